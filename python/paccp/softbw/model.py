"""SoftBW at the level of billing intervals: a fluid model of the host allocation, vectorised with numpy.

This is the model of the over-commitment study of the SoftBW slides (2,000 servers x 4 VMs, 1 s intervals,
600 s) and of the SoftBW charging experiment. It does not simulate packets: per interval each VM has a
demand (bits it wants to send in the interval), and the host's port of capacity C is shared by the SoftBW
rule of the slides in its fluid form:

1. *Guarantees first, round robin among the unsatisfied.* A VM with guarantee B_i and demand d_i is owed
   g_i = min(d_i, B_i). If sum g_i <= C every VM gets g_i. Otherwise the port is shared max-min fairly up to
   the owed amounts: r_i = min(g_i, L) with L such that sum r_i = C. This is where the packet rule converges
   (checked against a packet-level reference of it in the tests): unsatisfied VMs (lag >= 0) are served
   round robin, one packet each, so they get equal rates; a VM that reaches its B falls behind its tts and
   is held at B. With equal guarantees this is equal fulfilment, the slides' "fairness of fulfilment"; with
   unequal ones it is not (3 VMs of 600/600/300 Mb/s on 1 Gb/s get 350/350/300, not 400/400/200).
2. *Work conservation.* Capacity left over goes round robin to VMs that still have demand (a packet whose
   tts lies ahead goes when the port would otherwise idle). In the limit this is max-min on the *total*
   rate with step 1's rates as floors: r_i = clip(L, r1_i, d_i). 450/200/100 Mb/s guarantees, all
   backlogged on 1 Gb/s, give 450/275/275 (not 450 + 83, 200 + 83, 100 + 83).

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


def fill_to_level(low: Arr, high: Arr, cap: Arr) -> Arr:
    """Max-min fill of ``cap`` over the last axis with floors and ceilings: r_i = clip(L, low_i, high_i).

    L is the level at which sum r = min(cap, sum high); ``low`` <= ``high`` elementwise and sum low <= cap
    (the caller guarantees both). Exact: the usage sum clip(L, low, high) is piecewise linear in L with
    breakpoints at the lows and highs, so L is interpolated on the segment where the usage reaches the target.
    Shapes: ``low``, ``high`` (..., n), ``cap`` (...).
    """
    pts = np.sort(np.concatenate([low, high], axis=-1), axis=-1)  # (..., 2n)
    use = np.clip(pts[..., :, None], low[..., None, :], high[..., None, :]).sum(axis=-1)  # (..., 2n)
    target = np.minimum(cap, high.sum(axis=-1))
    k = np.argmax(use >= target[..., None] - 1e-12 * np.maximum(target[..., None], 1.0), axis=-1)
    k = np.maximum(k, 1)
    p0 = np.take_along_axis(pts, (k - 1)[..., None], -1)[..., 0]
    p1 = np.take_along_axis(pts, k[..., None], -1)[..., 0]
    u0 = np.take_along_axis(use, (k - 1)[..., None], -1)[..., 0]
    u1 = np.take_along_axis(use, k[..., None], -1)[..., 0]
    frac = np.divide(target - u0, u1 - u0, out=np.ones_like(u0), where=u1 > u0)
    level = p0 + np.clip(frac, 0.0, 1.0) * (p1 - p0)
    return np.clip(level[..., None], low, high)


def allocate(demand: Arr, guarantee: Arr, cap: Arr) -> Arr:
    """The SoftBW rule at one port per row (the limit of the packet rule, see the module docstring).

    1. owed = min(d, B), shared max-min up to the owed amounts (round robin among unsatisfied VMs);
    2. the rest max-min on the total rate with those as floors (a VM above its guarantee is served round
       robin with every other VM above its own), up to the demands.
    """
    owed = np.minimum(np.maximum(demand, 0.0), np.maximum(guarantee, 0.0))
    r1 = fill_to_level(np.zeros_like(owed), owed, cap)
    return fill_to_level(r1, np.maximum(demand, r1), cap)


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
