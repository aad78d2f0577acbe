"""The reference allocation: weighted proportional fairness with per-flow lower bounds, on any topology.

Problem (SPEC section 5, paper Eq. 9)::

    maximise   sum_i omega_i * log(x_i)
    subject to sum_{i on l} x_i <= B_l   for every link l
               x_i >= theta_i            for every flow i

Algorithm (exact to ~1e-12 relative, not a generic solver):

1. *Pre-pinning*: a link whose lower bounds use all its capacity pins its flows at theta (and is an
   error if it also carries a flow with theta = 0, whose log utility would be -inf).
2. *Interior point*: a primal log-barrier Newton method (rates scaled to the largest capacity) follows the
   central path to t = 1e10; it identifies the tight links and the flows pinned at theta and gives
   starting link prices p_l = 1 / (t * slack_l).
3. *Active-set polish*: with T the tight links and P the pinned flows, the KKT conditions say
   x_i = omega_i / q_i (q_i = sum of p_l over the tight links on i's route) for i not in P and
   sum_{i on l} x_i = B_l on every l in T. Newton's method on the prices p_T solves this system to
   machine precision (least-squares steps, so redundant tight links - non-unique prices - are fine: the
   rates are unique). The KKT sign conditions are then checked; a violated one moves the link or flow
   between sets and the system is solved again.

Normalised utility (:func:`normalized_utility`) compares an achieved allocation with the optimum:

- ``log`` (the headline figure): ``sum_i omega_i log(x_i / 1 Mb/s)`` achieved divided by the same sum at
  the optimum. Rates are expressed in Mb/s, so both sums are positive for rates above 1 Mb/s; 1 means
  optimal, lower is worse.
- ``geo``: ``exp((U_ach - U_opt) / sum omega)``, the omega-weighted geometric mean of x_ach / x_opt
  (unit-free).
- ``mean_ratio``: the plain mean over flows of x_ach / x_opt.
- ``reno``: the paper's TCP (Reno-like) utility U(x) = -1/x: ``sum omega/x_opt / sum omega/x_ach``, so
  that 1 means "as good as the log optimum" and lower is worse. (The -1/x optimum differs from the log
  optimum, so this figure may exceed 1.)
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from paccp.errors import UserError
from paccp.limits import MAX_OPTIMUM_CELLS

MBPS = 1e6
FEASIBILITY_REL = 1e-9  # every link's load is at most (1 + this) x its capacity in an answer


@dataclass(frozen=True)
class Flow:
    """One flow of an optimum problem."""

    id: str
    route: tuple[str, ...]
    theta_bps: float = 0.0
    omega: float = 1.0


@dataclass(frozen=True)
class Problem:
    """Links (name -> capacity in bit/s) and flows."""

    links: dict[str, float]
    flows: tuple[Flow, ...]


@dataclass
class Solution:
    """The optimum: rates, utility, link prices and the flows pinned at their lower bound."""

    rates_bps: dict[str, float]
    utility: float
    prices: dict[str, float]  # dual price of each link (utility per bit/s); 0 on slack links
    loads_bps: dict[str, float]
    capacities_bps: dict[str, float]
    pinned: list[str] = field(default_factory=list)

    def tight(self, link: str, rel: float = 1e-9) -> bool:
        """True when the link is saturated at the optimum."""
        return self.loads_bps[link] >= self.capacities_bps[link] * (1 - rel)

    def to_json(self) -> dict[str, Any]:
        """The JSON printed by ``paccp optimum``."""
        return {
            "rates_bps": self.rates_bps,
            "utility": self.utility,
            "utility_unit": "sum omega * ln(rate in Mb/s)",
            "bottlenecks": {
                name: {
                    "tight": self.tight(name),
                    "price_per_gbps": self.prices[name] * 1e9,
                    "load_bps": self.loads_bps[name],
                    "capacity_bps": self.capacities_bps[name],
                }
                for name in self.capacities_bps
            },
            "pinned_at_theta": self.pinned,
        }


def utility(rates_bps: dict[str, float], omegas: dict[str, float]) -> float:
    """sum omega_i ln(x_i / 1 Mb/s)."""
    return float(sum(omegas[f] * math.log(rates_bps[f] / MBPS) for f in rates_bps))


def validate(problem: Problem) -> None:
    """Raise UserError for an unknown link, a bad omega/theta/capacity or infeasible lower bounds."""
    if not problem.flows:
        raise UserError("optimum problem: no flows")
    seen: set[str] = set()
    for name, cap in problem.links.items():
        if not (isinstance(cap, int | float) and math.isfinite(cap) and cap > 0):
            raise UserError(f"link {name!r}: capacity must be a positive number of bit/s, got {cap!r}")
    for f in problem.flows:
        if f.id in seen:
            raise UserError(f"flow {f.id!r}: duplicate id")
        seen.add(f.id)
        if not f.route:
            raise UserError(f"flow {f.id!r}: empty route")
        for link in f.route:
            if link not in problem.links:
                raise UserError(f"flow {f.id!r}: unknown link {link!r} in its route")
        if not (math.isfinite(f.omega) and f.omega > 0):
            raise UserError(f"flow {f.id!r}: omega must be > 0, got {f.omega!r}")
        if not (math.isfinite(f.theta_bps) and f.theta_bps >= 0):
            raise UserError(f"flow {f.id!r}: theta_bps must be >= 0, got {f.theta_bps!r}")
    for name, cap in problem.links.items():
        on = [f for f in problem.flows if name in f.route]
        total = sum(f.theta_bps for f in on)
        if total > cap * (1 + 1e-12):
            raise UserError(
                f"infeasible: link {name!r}: lower bounds sum to {total:.6g} bit/s > capacity {cap:.6g} bit/s"
            )
        if total >= cap * (1 - 1e-12) and any(f.theta_bps == 0 for f in on):
            raise UserError(
                f"infeasible: link {name!r}: lower bounds use all its capacity, leaving nothing for "
                "its flows with theta = 0"
            )


def solve(problem: Problem) -> Solution:
    """Solve the problem exactly (see the module docstring)."""
    validate(problem)
    flows = list(problem.flows)
    link_names = sorted({ln for f in flows for ln in f.route})
    idx = {ln: k for k, ln in enumerate(link_names)}
    scale = max(problem.links[ln] for ln in link_names)
    cap = np.array([problem.links[ln] / scale for ln in link_names])
    n, m = len(flows), len(link_names)
    a = np.zeros((m, n))
    for i, f in enumerate(flows):
        for ln in f.route:
            a[idx[ln], i] = 1.0
    w = np.array([f.omega for f in flows])
    theta = np.array([f.theta_bps / scale for f in flows])

    # 1. pre-pinning: links fully used by lower bounds.
    fixed = np.zeros(n, dtype=bool)
    for k in range(m):
        on = a[k] > 0
        if theta[on].sum() >= cap[k] * (1 - 1e-12):
            fixed |= on
    try:
        with np.errstate(all="ignore"):
            x, p0 = _barrier(a, cap, w, theta, fixed)
            x, p, pinned = _polish(a, cap, w, theta, fixed, x, p0)
    except (RuntimeError, ArithmeticError, ValueError, np.linalg.LinAlgError) as exc:
        raise UserError(f"optimum: the solver failed on this problem ({str(exc)[:120]})") from None
    x = _feasible(a, cap, theta, x, link_names, scale)

    rates = {f.id: float(x[i] * scale) for i, f in enumerate(flows)}
    load = a @ x
    return Solution(
        rates_bps=rates,
        utility=utility(rates, {f.id: f.omega for f in flows}),
        prices={ln: float(p[idx[ln]] / scale) for ln in link_names},
        loads_bps={ln: float(load[idx[ln]] * scale) for ln in link_names},
        capacities_bps={ln: float(problem.links[ln]) for ln in link_names},
        pinned=[flows[i].id for i in range(n) if pinned[i]],
    )


def _feasible(
    a: np.ndarray, cap: np.ndarray, theta: np.ndarray, x: np.ndarray, names: list[str], scale: float
) -> np.ndarray:
    """Final check and projection: every link within FEASIBILITY_REL of its capacity and x >= theta.

    Rounding can leave a link a few ulps above its capacity; such a link's flows give up the same
    fraction of their rate above theta (the smallest factor over a flow's links). A point that is still
    infeasible after that, or not finite, is an error naming the link or the flow.
    """
    if not np.isfinite(x).all():
        raise UserError("optimum: the solver produced non-finite rates (problem too badly scaled)")
    x = np.maximum(x, theta)
    extra = x - theta
    room = cap - a @ theta
    used = a @ extra
    over_cap = a @ x > cap * (1 + 1e-12)  # beyond rounding: a link a few ulps over is left as it is
    with np.errstate(divide="ignore", invalid="ignore"):
        factor = np.where(
            over_cap & (used > room), np.clip(room / np.where(used > 0, used, 1.0), 0.0, 1.0), 1.0
        )
    if (factor < 1.0).any():
        per_flow = np.where(a > 0, factor[:, None], 1.0).min(axis=0)
        x = theta + extra * np.where(per_flow < 1.0, per_flow * (1 - 1e-15), 1.0)
    load = a @ x
    over = (load - cap) / cap
    k = int(np.argmax(over))
    if over[k] > FEASIBILITY_REL:
        raise UserError(
            f"optimum: no feasible answer found: link {names[k]!r} loaded {load[k] * scale:.17g} bit/s > "
            f"capacity {cap[k] * scale:.17g} bit/s"
        )
    if ((x <= 0) & (theta == 0)).any():
        raise UserError("optimum: a flow without a lower bound got no rate (its links are full of thetas)")
    return x


def _barrier(
    a: np.ndarray, cap: np.ndarray, w: np.ndarray, theta: np.ndarray, fixed: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Primal log-barrier path following: an interior point close to the optimum and price estimates."""
    x = theta.copy()
    free = ~fixed
    if not free.any():
        return x, np.zeros(len(cap))
    af = a[:, free]
    wf, tf = w[free], theta[free]
    residual = cap - a[:, fixed] @ theta[fixed]
    counts = np.maximum(af.sum(axis=1), 1.0)
    # strictly feasible start: theta plus half of each link's spare capacity split evenly
    spare = np.where(af.sum(axis=1) > 0, (residual - af @ tf) / counts, np.inf)
    step0 = np.array([0.5 * spare[af[:, i] > 0].min() for i in range(af.shape[1])])
    xf = tf + step0
    has_theta = tf > 0

    import scipy.sparse as sp
    from scipy.sparse.linalg import spsolve

    asp = sp.csr_matrix(af)
    at = asp.T.tocsr()
    n_free, n_links = af.shape[1], af.shape[0]

    def newton_step(diag: np.ndarray, s: np.ndarray, grad: np.ndarray) -> np.ndarray:
        """Solve (diag + A^T S^-2 A) step = -grad: sparse n x n, or Woodbury on m x m when m < n."""
        if n_links < n_free:
            dinv_g = grad / diag
            small = np.diag(s**2) + (af / diag) @ af.T
            return -(dinv_g - (at @ np.linalg.solve(small, asp @ dinv_g)) / diag)
        hess = (sp.diags(diag) + at @ sp.diags(1.0 / s**2) @ asp).tocsc()
        return -np.asarray(spsolve(hess, grad))

    def phi(z: np.ndarray, t: float) -> float:
        s = residual - asp @ z
        d = z - tf
        if (s <= 0).any() or (z <= 0).any() or (d[has_theta] <= 0).any():
            return math.inf
        return float(-t * (wf @ np.log(z)) - np.log(s).sum() - np.log(d[has_theta]).sum())

    t = 1.0
    while True:
        for _ in range(200):
            s = residual - asp @ xf
            d = np.where(has_theta, xf - tf, 1.0)
            grad = -t * wf / xf + at @ (1.0 / s) - np.where(has_theta, 1.0 / d, 0.0)
            diag = t * wf / xf**2 + np.where(has_theta, 1.0 / d**2, 0.0)
            step = newton_step(diag, s, grad)
            dec = float(-grad @ step)
            if dec / 2 < 1e-10:
                break
            # largest step keeping every slack positive, then backtracking (Armijo)
            alpha = 1.0
            ds = asp @ step
            for num, den in ((s, ds), (xf, -step), (d[has_theta], -step[has_theta])):
                mask = den > 0
                if mask.any():
                    alpha = min(alpha, 0.99 * float((num[mask] / den[mask]).min()))
            f0 = phi(xf, t)
            while phi(xf + alpha * step, t) > f0 - 0.25 * alpha * dec:
                alpha *= 0.5
                if alpha < 1e-20:
                    break
            xf = xf + alpha * step
        if t >= 1e10:
            break
        t *= 20.0
    x[free] = xf
    return x, 1.0 / (t * (residual - asp @ xf))


def _polish(
    a: np.ndarray,
    cap: np.ndarray,
    w: np.ndarray,
    theta: np.ndarray,
    fixed: np.ndarray,
    x0: np.ndarray,
    p0: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Solve the KKT system on the active set identified from ``x0``; returns rates, prices, pinned."""
    load = a @ x0
    tight = (cap - load) <= 1e-6 * cap
    pinned = fixed | ((theta > 0) & (x0 - theta <= 1e-6 * np.maximum(theta, 1e-12)))
    p = p0.copy()
    for _ in range(50):
        x, p = _solve_active(a, cap, w, theta, tight, pinned, p)
        q = a.T @ p
        load = a @ x
        changed = False
        over = (~tight) & (load > cap * (1 + 1e-12))
        if over.any():
            tight |= over
            changed = True
        neg = tight & (p < -1e-12 * max(1.0, float(np.abs(p).max())))
        if neg.any():
            tight &= ~neg
            changed = True
        below = (~pinned) & (theta > 0) & (x < theta * (1 - 1e-12))
        if below.any():
            pinned |= below
            changed = True
        release = pinned & ~fixed & (w / np.maximum(q, 1e-300) > theta * (1 + 1e-12))
        if release.any():
            pinned &= ~release
            changed = True
        if not changed:
            return x, np.maximum(p, 0.0), pinned
    raise RuntimeError("optimum: active-set polish did not converge")  # pragma: no cover


def _solve_active(
    a: np.ndarray,
    cap: np.ndarray,
    w: np.ndarray,
    theta: np.ndarray,
    tight: np.ndarray,
    pinned: np.ndarray,
    p_init: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Newton on the tight links' prices: sum_{i unpinned on l} w_i/q_i = B_l - sum_{pinned} theta."""
    m = a.shape[0]
    free = ~pinned
    t_idx = np.flatnonzero(tight)
    at = a[t_idx][:, free]
    wf = w[free]
    rhs = cap[t_idx] - a[t_idx][:, pinned] @ theta[pinned]
    x = theta.copy()
    p = np.zeros(m)
    if free.any():
        if (at.sum(axis=0) == 0).any():
            raise RuntimeError("optimum: a flow crosses no tight link")  # pragma: no cover
        # start: each tight link priced as if alone: sum of its flows' weights / its residual capacity
        pt = p_init[t_idx].copy()
        if not (pt > 0).all():
            pt = (at @ wf) / np.maximum(rhs, 1e-300) / np.maximum(at.sum(axis=1), 1.0)
        for _ in range(500):
            q = at.T @ pt
            xf = wf / q
            res = at @ xf - rhs
            if np.abs(res).max() <= 1e-15 * max(1.0, float(np.abs(rhs).max())):
                break
            jac = -(at * (wf / q**2)) @ at.T
            if not (np.isfinite(jac).all() and np.isfinite(res).all()):
                # a price ran off to 0 or infinity: stop here (the caller reports the failure) instead of
                # handing LAPACK non-finite numbers, which it rejects with a message on stderr per call
                raise RuntimeError("optimum: the Newton step on the link prices is not finite")
            # symmetric diagonal scaling: prices span many decades when capacities and weights do, and an
            # unscaled least-squares solve truncates the small directions (the step then never converges)
            d = 1.0 / np.sqrt(np.maximum(-np.diag(jac), 1e-300))
            step = d * np.linalg.lstsq(jac * d[:, None] * d[None, :], -res * d, rcond=None)[0]
            # damp so that every q stays positive
            alpha = 1.0
            while (at.T @ (pt + alpha * step) <= 0).any():
                alpha *= 0.5
            pt = pt + alpha * step
        p[t_idx] = pt
        x[free] = wf / (at.T @ pt)
    return x, p


# --------------------------------------------------------------------------------------------------
# The optimum of an engine run


def optimum_on_routes(result: Any) -> tuple[list[Flow], Solution]:
    """Optimum on the engine's routes and channel rates; returns (the per-flow problem, its solution).

    A VM's pair is split equally over its flows (all long-lived, so always active).
    """
    from paccp.common.cos import split_pair

    chan = dict(
        zip(
            result.channels.column("name").to_pylist(),
            result.channels.column("rate_bps").to_pylist(),
            strict=True,
        )
    )
    rows = result.flows.to_pylist()
    per_vm: dict[str, int] = {}
    for r in rows:
        if r["vm"] is not None:
            per_vm[r["vm"]] = per_vm.get(r["vm"], 0) + 1
    flows = []
    for r in rows:
        n = per_vm.get(r["vm"], 1) if r["vm"] is not None else 1
        theta, omega = split_pair(r["theta_bps"], r["omega"], n)
        flows.append(Flow(r["id"], tuple(r["route"]), theta, omega))
    links = {ln: float(chan[ln]) for f in flows for ln in f.route}
    sol = solve(Problem(links=links, flows=tuple(flows)))
    return flows, sol


# --------------------------------------------------------------------------------------------------
# JSON problems (``paccp optimum``)


def problem_from_json(obj: Any, where: str = "problem") -> Problem:
    """Build a Problem from ``{"links": {name: bps}, "flows": [{"id","route","theta_bps","omega"}]}``.

    Capacities and ``theta_bps`` are numbers of bit/s or rates with units (``"40Gbit"``), as in scenarios.
    """
    if not isinstance(obj, dict):
        raise UserError(f"{where}: expected a JSON object with 'links' and 'flows'")
    extra = set(obj) - {"links", "flows"}
    if extra:
        raise UserError(f"{where}: unknown key {sorted(extra)[0]!r} (expected 'links' and 'flows')")
    links = obj.get("links")
    flows = obj.get("flows")
    if not isinstance(links, dict) or not links:
        raise UserError(f"{where}: 'links' must be a non-empty object {{name: capacity_bps}}")
    if not isinstance(flows, list):
        raise UserError(f"{where}: 'flows' must be a list")
    caps: dict[str, float] = {}
    for name, c in links.items():
        if isinstance(c, str):  # human units, as in scenarios: "40Gbit"
            c = _rate(c, f"{where}: links.{_short(name)}: capacity")
        if isinstance(c, bool) or not isinstance(c, int | float):
            raise UserError(
                f'{where}: links.{_short(name)}: capacity must be a rate (bit/s or e.g. "40Gbit"),'
                f" got {_short(c)}"
            )
        caps[str(name)] = _finite(c, f"{where}: links.{_short(name)}: capacity")
    if len(links) * len(flows) > MAX_OPTIMUM_CELLS:
        raise UserError(
            f"{where}: {len(links)} links x {len(flows)} flows; "
            f"at most {MAX_OPTIMUM_CELLS:,} (dense matrices)"
        )
    out: list[Flow] = []
    for k, f in enumerate(flows):
        if not isinstance(f, dict):
            raise UserError(f"{where}: flows[{k}]: expected an object")
        bad = set(f) - {"id", "route", "theta_bps", "omega"}
        if bad:
            raise UserError(f"{where}: flows[{k}]: unknown key {sorted(bad)[0]!r}")
        fid = f.get("id", str(k))
        if not isinstance(fid, str | int) or isinstance(fid, bool):
            raise UserError(f"{where}: flows[{k}].id must be a string, got {_short(fid)}")
        route = f.get("route")
        if not isinstance(route, list) or not all(isinstance(r, str) for r in route):
            raise UserError(f"{where}: flows[{k}].route must be a list of link names")
        theta = f.get("theta_bps", 0)
        if isinstance(theta, str):
            theta = _rate(theta, f"{where}: flows[{k}].theta_bps")
        omega = f.get("omega", 1.0)
        for key, val in (("theta_bps", theta), ("omega", omega)):
            if isinstance(val, bool) or not isinstance(val, int | float):
                raise UserError(f"{where}: flows[{k}].{key} must be a number, got {_short(val)}")
        out.append(
            Flow(
                id=str(fid),
                route=tuple(route),
                theta_bps=_finite(theta, f"{where}: flows[{k}].theta_bps"),
                omega=_finite(omega, f"{where}: flows[{k}].omega"),
            )
        )
    return Problem(links=caps, flows=tuple(out))


def _rate(text: str, what: str) -> int:
    """A rate with units (paccp.units, the scenarios' parser): ``"40Gbit"``, ``"400Mbps"``."""
    from paccp.units import parse_rate_bps

    try:
        return parse_rate_bps(text)
    except (UserError, ValueError) as exc:
        msg = exc.message if isinstance(exc, UserError) else str(exc)
        raise UserError(f"{what}: {msg}") from None


def _short(v: Any) -> str:
    text = (
        repr(v) if not isinstance(v, int) or abs(v) < 10**30 else f"an integer of {len(str(abs(v)))} digits"
    )
    return text if len(text) <= 60 else text[:60] + "..."


def _finite(v: float | int, what: str) -> float:
    """A JSON number as a finite float (NaN, Infinity and integers beyond float range are errors)."""
    try:
        x = float(v)
    except OverflowError:
        raise UserError(f"{what}: {_short(v)} is too large") from None
    if not math.isfinite(x):
        raise UserError(f"{what}: must be a finite number, got {_short(v)}")
    return x


def load_problem(path: str | Path) -> Problem:
    """Read a problem JSON file (UserError for a missing, unreadable or malformed file)."""
    p = Path(path)
    try:
        if not p.is_file():
            raise UserError(f"{p}: no such file")
        data = p.read_bytes()
    except OSError as exc:
        raise UserError(f"{p}: cannot read it ({exc.strerror or type(exc).__name__})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise UserError(f"{p} line {line}: not UTF-8 text (byte {exc.start})") from None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"{p}: not valid JSON ({exc})") from None
    except (RecursionError, ValueError) as exc:  # nesting too deep; an integer of more than 4300 digits
        raise UserError(f"{p}: not valid JSON ({str(exc)[:100]})") from None
    return problem_from_json(obj, where=str(p))


# --------------------------------------------------------------------------------------------------
# Normalised utility


def normalized_utility(
    achieved_bps: dict[str, float], optimum_bps: dict[str, float], omegas: dict[str, float]
) -> dict[str, float]:
    """Compare achieved rates with optimal ones (definitions in the module docstring).

    Flows with a zero achieved rate are given 1 bit/s (so the log figure stays finite and very low).
    """
    ids = sorted(optimum_bps)
    if not ids:
        raise ValueError("normalized_utility: no flows")
    xa = np.array([max(float(achieved_bps[i]), 1.0) for i in ids])
    xo = np.array([float(optimum_bps[i]) for i in ids])
    w = np.array([float(omegas[i]) for i in ids])
    ua = float(w @ np.log(xa / MBPS))
    uo = float(w @ np.log(xo / MBPS))
    return {
        "log": ua / uo,
        "geo": math.exp((ua - uo) / float(w.sum())),
        "mean_ratio": float(np.mean(xa / xo)),
        "reno": float((w / xo).sum() / (w / xa).sum()),
    }
