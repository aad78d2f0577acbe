"""SoftBW at the level of billing intervals: a fluid model of the host allocation, vectorised with numpy.

This is the model of the over-commitment study of the SoftBW slides (2,000 servers x 4 VMs, 1 s intervals,
600 s) and of the SoftBW charging experiment. It does not simulate packets: per interval each VM has a
demand (bits it wants to send in the interval), and the host's port of capacity C is shared by the SoftBW
rule of the slides in its fluid form:

1. *Guarantees first, equal fulfilment.* A VM with guarantee B_i and demand d_i is owed g_i = min(d_i, B_i).
   If sum g_i <= C every VM gets g_i. Otherwise every unsatisfied VM is served to the same fulfilment level
   F < 1: r_i = min(g_i, F B_i) with F such that sum r_i = C (this is where the fulfilment scheduler's
   "unsatisfied VM first, round robin" converges; a VM whose demand is below F B_i keeps its demand).
2. *Work conservation.* Capacity left over is shared round-robin among the VMs that still have demand, i.e.
   max-min fair per VM on the remainder (a packet whose tts lies ahead goes when the port would idle).

Guarantee kinds (per VM): ``strict`` (B), ``dynamic`` (a job of size S by deadline T; B re-derived every
billing cycle as residual size / residual time, at most the sold B), ``fair`` (VM-level fair share: B = C /
number of VMs on the host) and ``best_effort`` (B = 0: only what step 2 leaves).

Failure definitions (the issue's): a *strict failure* is an interval in which a strict VM's demand was at
least B and it got less than B; a *dynamic failure* is a job that finished after its deadline (or had not
finished by the end of the run although its deadline lay inside it).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

Arr = NDArray[np.float64]

KINDS: tuple[str, ...] = ("strict", "dynamic", "fair", "best_effort")
STRICT, DYNAMIC, FAIR, BEST_EFFORT = range(4)
_REL = 1e-9  # relative slack when comparing a rate with a guarantee (float rounding of the water-fill)


def waterfill(demand: Arr, weight: Arr, cap: Arr) -> Arr:
    """Weighted max-min share of ``cap`` over the last axis: r_i = min(d_i, w_i L), sum r = min(cap, sum d).

    ``demand`` and ``weight`` have shape (..., n), ``cap`` shape (...). An entry with weight 0 gets 0. When
    the (weighted) demand fits, everyone gets their demand; otherwise the level L is found exactly by
    sorting the entries by d_i / w_i (no iteration).
    """
    d = np.where(weight > 0, np.maximum(demand, 0.0), 0.0)
    w = np.maximum(weight, 0.0)
    cap = np.maximum(cap, 0.0)
    level = np.divide(d, w, out=np.zeros_like(d), where=w > 0)
    order = np.argsort(level, axis=-1, kind="stable")
    ls = np.take_along_axis(level, order, axis=-1)
    ds = np.take_along_axis(d, order, axis=-1)
    ws = np.take_along_axis(w, order, axis=-1)
    sat = np.cumsum(ds, axis=-1)  # demand of entries 0..k, all saturated when L = ls_k
    w_after = ws.sum(axis=-1, keepdims=True) - np.cumsum(ws, axis=-1)  # weight of entries k+1..
    use = sat + ls * w_after  # capacity used at L = ls_k
    over = use >= cap[..., None]
    fits = ~over.any(axis=-1)
    k = np.argmax(over, axis=-1)  # first k at which the level would use all of cap
    sat_before = np.where(k > 0, np.take_along_axis(sat, np.maximum(k - 1, 0)[..., None], -1)[..., 0], 0.0)
    w_from = np.take_along_axis(w_after + ws, k[..., None], -1)[..., 0]
    lev = np.divide(cap - sat_before, w_from, out=np.full_like(cap, np.inf), where=w_from > 0)
    with np.errstate(invalid="ignore"):  # 0 x inf where everything fits (those rows take d)
        r = np.minimum(d, w * lev[..., None])
    return np.where(fits[..., None], d, r)


def allocate(demand: Arr, guarantee: Arr, cap: Arr) -> Arr:
    """The SoftBW rule at one port per row: guarantees at equal fulfilment, then round-robin on the rest."""
    owed = np.minimum(demand, guarantee)
    r1 = waterfill(owed, guarantee, cap)
    spare = cap - r1.sum(axis=-1)
    r2 = waterfill(demand - r1, np.ones_like(demand), spare)
    return r1 + r2


def analytic_failure(n: int, rho: float, delta: float) -> float:
    """The slides' P_n = e^{-alpha C} sum_{i=1..n} (alpha C)^{i-1} / (i-1)!, alpha = n / (rho C_B).

    n VMs with i.i.d. exponential demands of mean rho C_B / n (C_B = delta C, the guarantees sold on a port
    of capacity C): P_n is the probability that their total demand exceeds C (an Erlang tail), i.e. that the
    port is overloaded in an interval. ``alpha C = n / (rho delta)``.
    """
    ac = n / (rho * delta)
    term, total = 1.0, 0.0
    for i in range(1, n + 1):
        total += term
        term *= ac / i
    return math.exp(-ac) * total


# --------------------------------------------------------------------------------------------------
# demand models (bits per second, per interval, per VM): shape (T, hosts, vms)


@dataclass(frozen=True)
class DemandModel:
    """How per-interval demand is drawn, relative to each VM's sold guarantee B.

    ``exponential``: i.i.d. per VM and interval, exponential with mean ``rho`` B (the slides' analytic
    assumption). ``onoff``: each VM alternates OFF and ON periods (a two-state Markov chain per 1 s
    interval, mean ON period ``mean_on_s``); each VM's long-run ON fraction is drawn once from
    Beta(``beta_a``, ``beta_b``) scaled so that its mean is ``on_frac`` (most VMs rarely send, a few often:
    the skew of the measurements the slides cite); ON demand is exponential with mean (rho / on_frac) B, so
    the mean demand is rho B as in ``exponential``.
    """

    kind: str = "exponential"
    rho: float = 0.095
    on_frac: float = 0.1
    mean_on_s: float = 5.0
    beta_a: float = 0.5

    def __post_init__(self) -> None:
        if self.kind not in ("exponential", "onoff"):
            raise ValueError(f"unknown demand model {self.kind!r} (expected exponential or onoff)")
        if not (self.rho > 0 and 0 < self.on_frac < 1 and self.mean_on_s >= 1 and self.beta_a > 0):
            raise ValueError("demand model: need rho > 0, 0 < on_frac < 1, mean_on_s >= 1, beta_a > 0")

    @property
    def beta_b(self) -> float:
        """Beta's second parameter, so that the mean ON fraction is ``on_frac``."""
        return self.beta_a * (1 - self.on_frac) / self.on_frac

    def describe(self) -> str:
        """One line naming the distribution and its parameters."""
        if self.kind == "exponential":
            return f"i.i.d. exponential per VM and 1 s interval, mean {self.rho:g} B"
        return (
            f"ON/OFF per VM (Markov, mean ON {self.mean_on_s:g} s; per-VM ON fraction ~ "
            f"Beta({self.beta_a:g}, {self.beta_b:g}), mean {self.on_frac:g}); ON demand exponential, "
            f"mean {self.rho / self.on_frac:g} B"
        )

    def relative(self, rng: np.random.Generator, t: int, shape: tuple[int, ...]) -> Arr:
        """Demand / B, shape (t, *shape)."""
        if self.kind == "exponential":
            return rng.exponential(self.rho, size=(t, *shape))
        pi = np.clip(rng.beta(self.beta_a, self.beta_b, size=shape), 1e-6, 0.999)
        p_off = 1.0 / self.mean_on_s  # ON -> OFF per interval
        p_on = np.minimum(pi * p_off / (1 - pi), 1.0)  # OFF -> ON, stationary ON fraction pi
        on = rng.random(shape) < pi
        states = np.empty((t, *shape), dtype=bool)
        u = rng.random((t, *shape))
        for i in range(t):
            states[i] = on
            on = np.where(on, u[i] >= p_off, u[i] < p_on)
        amount = rng.exponential(self.rho / self.on_frac, size=(t, *shape))
        return np.where(states, amount, 0.0)


# --------------------------------------------------------------------------------------------------
# the interval simulation


@dataclass
class Jobs:
    """Dynamic-guarantee jobs: one row per job (times in s from the start of the run)."""

    host: NDArray[np.int64]
    vm: NDArray[np.int64]
    start_s: Arr
    deadline_s: Arr
    size_bits: Arr
    finish_s: Arr  # nan = not finished by the end of the run


@dataclass
class DynamicTrace:
    """Per cycle and dynamic VM (shape (T, n_dyn)): which jobs it served, with how many bits and what B."""

    host: NDArray[np.int64]  # (n_dyn,)
    vm: NDArray[np.int64]  # (n_dyn,)
    late_job: NDArray[np.int64]  # -1 = none
    late_bits: Arr
    late_b: Arr
    cur_job: NDArray[np.int64]
    cur_bits: Arr
    cur_b: Arr


@dataclass
class Run:
    """What an interval simulation produced; arrays have shape (T, hosts, vms) unless stated."""

    capacity_bps: Arr  # (hosts,)
    kinds: NDArray[np.int64]  # (hosts, vms)
    sold_bps: Arr  # (hosts, vms): strict B, dynamic maximum B, fair and best effort 0
    demand_bps: Arr  # what each VM asked for in the interval (dynamic: its backlog, at most C)
    guarantee_bps: Arr  # B in force in the interval (dynamic: re-derived; fair: C / vms)
    rate_bps: Arr  # what each VM got
    jobs: Jobs
    dynamic: DynamicTrace
    cycle_s: float = 1.0


def simulate(
    capacity_bps: Arr,
    kinds: NDArray[np.int64],
    sold_bps: Arr,
    demand_bps: Arr,
    *,
    job_window: int = 10,
    progress: Callable[[int], None] | None = None,
) -> Run:
    """Run the interval model: ``demand_bps`` (T, hosts, vms); intervals (billing cycles) of 1 s.

    Strict, fair and best-effort VMs ask for their demand of each interval. A dynamic VM's demand is turned
    into jobs: the demand of each block of ``job_window`` intervals, at most B x the block's length, is one
    job of size S arriving at the block's start with deadline T = the block's end (so S/T <= B).
    The VM serves its jobs in order; a job still unfinished at its deadline is late and keeps being served
    (before the next job) until it finishes. Its guarantee in a cycle is residual / residual time (a late
    job: residual / one cycle), summed over its jobs, at most the sold B.
    """
    if job_window < 1:
        raise ValueError("job_window must be >= 1 interval")
    t_n, _h_n, v_n = demand_bps.shape
    cap = capacity_bps.astype(float)
    hi, vi = np.nonzero(kinds == DYNAMIC)
    n_dyn = len(hi)
    static_b = np.where(kinds == FAIR, cap[:, None] / v_n, np.where(kinds == BEST_EFFORT, 0.0, sold_bps))
    static_b = np.where(kinds == DYNAMIC, 0.0, static_b)
    rate = np.zeros_like(demand_bps)
    gua = np.zeros_like(demand_bps)
    asked = np.zeros_like(demand_bps)
    most = sold_bps[hi, vi] * job_window  # a job's S is at most B T
    blocks = [
        (t, np.minimum(demand_bps[t : t + job_window, hi, vi].sum(axis=0), most))
        for t in range(0, t_n, job_window)
    ]
    new_of = [np.nonzero(size > 0)[0] for _t, size in blocks]
    first = np.cumsum([0] + [len(k) for k in new_of])
    jobs = Jobs(
        host=np.concatenate([hi[k] for k in new_of]) if n_dyn else np.zeros(0, dtype=np.int64),
        vm=np.concatenate([vi[k] for k in new_of]) if n_dyn else np.zeros(0, dtype=np.int64),
        start_s=np.concatenate(
            [np.full(len(k), float(t)) for (t, _s), k in zip(blocks, new_of, strict=True)]
        ),
        deadline_s=np.concatenate(
            [np.full(len(k), float(t + job_window)) for (t, _s), k in zip(blocks, new_of, strict=True)]
        ),
        size_bits=np.concatenate([size[k] for (_t, size), k in zip(blocks, new_of, strict=True)]),
        finish_s=np.full(int(first[-1]), np.nan),
    )
    tr = DynamicTrace(
        hi, vi, *(np.full((t_n, n_dyn), -1, dtype=np.int64), np.zeros((t_n, n_dyn)), np.zeros((t_n, n_dyn))),
        *(np.full((t_n, n_dyn), -1, dtype=np.int64), np.zeros((t_n, n_dyn)), np.zeros((t_n, n_dyn))),
    )  # fmt: skip
    # per dynamic VM: the current job (index, residual, deadline) and a late backlog (index, residual); two
    # jobs late at once (rare) share the backlog and both finish when it does
    cur_j = np.full(n_dyn, -1, dtype=np.int64)
    cur_r = np.zeros(n_dyn)
    cur_dl = np.zeros(n_dyn)
    late_j = np.full(n_dyn, -1, dtype=np.int64)
    late_r = np.zeros(n_dyn)
    merged: dict[int, list[int]] = {}
    sold_dyn = sold_bps[hi, vi]
    if not n_dyn:  # no state carried between intervals: allocate many intervals at once
        for t in range(0, t_n, 64):
            d = demand_bps[t : t + 64]
            rate[t : t + 64] = allocate(
                d, np.broadcast_to(static_b, d.shape), np.broadcast_to(cap, d.shape[:2])
            )
            gua[t : t + 64], asked[t : t + 64] = static_b, d
            if progress is not None:
                progress(min(t + 64, t_n) - 1)
        return Run(cap, kinds, sold_bps, asked, gua, rate, jobs, tr)
    for t in range(t_n):
        if t % job_window == 0:
            # a current job with data left at its deadline is late: it joins the late backlog
            missed = (cur_j >= 0) & (cur_r > 0)
            for k in np.nonzero(missed & (late_j >= 0))[0]:
                merged.setdefault(int(late_j[k]), []).append(int(cur_j[k]))
            late_j = np.where(missed & (late_j < 0), cur_j, late_j)
            late_r = np.where(missed, late_r + cur_r, late_r)
            b = t // job_window
            cur_j = np.full(n_dyn, -1, dtype=np.int64)
            cur_j[new_of[b]] = np.arange(first[b], first[b + 1])
            cur_r = np.where(cur_j >= 0, blocks[b][1], 0.0)
            cur_dl = np.full(n_dyn, float(t + job_window))
        d = demand_bps[t].copy()
        g = static_b.copy()
        b_late = late_r  # residual over one cycle
        b_cur = cur_r / np.maximum(cur_dl - t, 1.0)
        total = b_late + b_cur
        scale = np.divide(sold_dyn, total, out=np.ones(n_dyn), where=total > sold_dyn)
        d[hi, vi] = np.minimum(late_r + cur_r, cap[hi])
        g[hi, vi] = total * scale
        r = allocate(d, g, cap)
        rate[t], gua[t], asked[t] = r, g, d
        got = r[hi, vi]
        to_late = np.minimum(got, late_r)
        to_cur = np.minimum(got - to_late, cur_r)
        tr.late_job[t], tr.late_bits[t], tr.late_b[t] = (
            np.where(late_r > 0, late_j, -1),
            to_late,
            b_late * scale,
        )
        tr.cur_job[t], tr.cur_bits[t], tr.cur_b[t] = np.where(cur_r > 0, cur_j, -1), to_cur, b_cur * scale
        done_late = (late_r > 0) & (to_late >= late_r * (1 - _REL))
        if done_late.any():
            _finish(jobs, merged, late_j[done_late], t + late_r[done_late] / got[done_late])
        done_cur = (cur_r > 0) & (to_cur >= cur_r * (1 - _REL))
        jobs.finish_s[cur_j[done_cur]] = t + (to_late[done_cur] + cur_r[done_cur]) / got[done_cur]
        late_r = np.where(done_late, 0.0, late_r - to_late)
        late_j = np.where(done_late, -1, late_j)
        cur_r = np.where(done_cur, 0.0, cur_r - to_cur)
        if progress is not None:
            progress(t)
    return Run(cap, kinds, sold_bps, asked, gua, rate, jobs, tr)


def _finish(jobs: Jobs, merged: dict[int, list[int]], idx: NDArray[np.int64], when: Arr) -> None:
    jobs.finish_s[idx] = when
    if merged:
        for job, w in zip(idx.tolist(), when.tolist(), strict=True):
            for other in merged.pop(job, []):
                jobs.finish_s[other] = w
