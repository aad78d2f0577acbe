"""Which windows' guarantees the network could carry: a guarantee failure counts against a scheme only
where some allocation would have met it.

The NIC rule of :func:`paccp.compare.measure.vm_rates` calls a VM's window feasible when the guarantees
of its host's VMs fit the host's NIC. A guarantee can also be out of reach at a receiver: four 5 Gb/s
guarantees sent to one host's 10 Gb/s link cannot all be met, by any scheme (the leaf-spine file, seed 4,
60 %). This module finds, per window, the **fulfilment** of each guaranteed VM: the largest share of its
guarantee it can get while every other guaranteed VM gets as large a share or its own largest, that is
the max-min fair fulfilment of the guarantees (the issue's rule 4, equal fulfilment, applied to every
link rather than to one). A VM whose fulfilment is below 1 could not have been given its guarantee in
that window; one at 1 could, whatever the others needed.

The problem of a window (payload bit/s):

- **needs**: each guaranteed VM that demands its guarantee in the window needs G, one that was present
  for a share of it (a connection open with bytes to send) needs that share of G, as the NIC rule
  counts it, and at most what its connections open in the window have to send (a VM short of data is
  not short of network); best effort needs nothing (a guarantee takes precedence over it); needs below a
  millionth of the largest link are left out;
- **how a VM may carry it**: over its connections open in the window, **split in any proportion** (the
  most favourable split, not the VBP split of the distance score: a VM with connections to a hot and an
  idle receiver could have put its guarantee on the idle one), each at most what it had to send
  (its rest over the window) and its share of the window times its path's capacity;
- **links**: those of :class:`paccp.compare.distance.Net` (the sender's NIC, the receiver's link, a
  switch's uplinks and downlinks each pooled into one link, as if load balancing were perfect).

Pooling the fabric's links and splitting freely both make more windows feasible, so a window called
infeasible here is infeasible for any scheme. Each round of the max-min filling is one linear program
(scipy's HiGHS), whose dual prices tell the VMs that cannot get more; windows in which no link could be
over-committed (every VM putting its whole need on it) skip it.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any

import numpy as np

from paccp.compare.distance import Net

if TYPE_CHECKING:
    from paccp.compare.setup import Setup

#: A connection in a window's problem: its VM, its route's links and the most it can carry (payload bit/s).
Conn = tuple[str, tuple[str, ...], float]

FULL = 1.0 - 1e-6
"""A fulfilment at least this is 1: the linear programs meet their constraints to HiGHS's absolute
tolerance (1e-7 of the largest link), a relative error of up to about 1e-6 on a guarantee a tenth of it,
and a window whose guarantees fit exactly must not be called infeasible by that rounding."""
_TOL = 1e-7
_NEGLIGIBLE = 1e-6
_SLACK = 1e-6


def fulfilment(raw: dict[str, Any], setup: Setup, needs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Per guaranteed VM (``needs``: payload bit/s needed in each scored window, from the first window
    after the warm-up), its max-min fair fulfilment in each window (1: feasible)."""
    w = raw["window_ns"]
    w_s = w / 1e9
    k0 = int(-(-raw["warmup_ns"] // w))
    n = len(next(iter(needs.values()))) if needs else 0
    out = {vm: np.ones(n) for vm in needs}
    cb = raw.get("conn_backlog")
    if cb is None or not needs:
        return out
    net = Net(raw)
    host = {v.id: v.host for v in setup.vms}
    ends = {str(f["id"]): (f.get("src") or host[f["vm"]], f["dst"]) for f in setup.flows}
    # per window: (vm, route, upper bound) of each connection of a VM that needs something
    per_win: dict[int, list[Conn]] = defaultdict(list)
    for cid, (vm, rows) in cb.items():
        if vm not in needs or cid not in ends:
            continue
        route = tuple(ln for ln in net.route(*ends[cid]) if net.cap.get(ln, 0.0) > 0)
        path = min((net.cap[ln] for ln in route), default=0.0)
        for k, rest, *fr in rows:
            j = k - k0
            if 0 <= j < n and needs[vm][j] > 0:
                ub = (fr[0] if fr else 1.0) * path
                if rest is not None:
                    ub = min(ub, rest * 8 / w_s)
                per_win[j].append((vm, route, ub))
    negligible = _NEGLIGIBLE * max(net.cap.values(), default=0.0)
    for j, conns in per_win.items():
        # a VM needs at most what its connections have to send (a VM with less is short of data, not
        # of network); needs and connections below a millionth of the largest link are left out
        # (connections with a few bytes left gave HiGHS bounds below its tolerances)
        can: dict[str, float] = defaultdict(float)
        for vm, _r, ub in conns:
            can[vm] += ub
        need = {vm: min(float(needs[vm][j]), x) for vm, x in can.items()}
        need = {vm: x for vm, x in need.items() if x > negligible}
        kept = [c for c in conns if c[0] in need and c[2] > negligible]
        if kept:
            for vm, f in _max_min(kept, need, net.cap).items():
                out[vm][j] = f
    return out


def _max_min(conns: list[Conn], need: dict[str, float], cap: dict[str, float]) -> dict[str, float]:
    """The max-min fair fulfilment of ``need`` over the connections (vm, route, upper bound)."""
    if not _may_overflow(conns, need, cap):
        return dict.fromkeys(need, 1.0)
    # in units of the largest capacity: HiGHS's tolerances are absolute, and bit/s (1e10) are not
    unit = max((cap[ln] for _v, r, _u in conns for ln in r), default=1.0) or 1.0
    conns = [(vm, r, u / unit) for vm, r, u in conns]
    need = {vm: x / unit for vm, x in need.items()}
    cap = {ln: x / unit for ln, x in cap.items()}
    from scipy import sparse
    from scipy.optimize import linprog

    vms = sorted(need)
    vi = {vm: i for i, vm in enumerate(vms)}
    links = sorted({ln for _v, r, _u in conns for ln in r})
    li = {ln: i for i, ln in enumerate(links)}
    nc = len(conns)
    # x (one per connection) and t; link rows: sum of x on the link <= capacity
    rows = [li[ln] for _v, r, _u in conns for ln in r]
    cols = [c for c, (_v, r, _u) in enumerate(conns) for _ln in r]
    a_link = sparse.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(links), nc + 1))
    b_link = np.array([cap[ln] for ln in links])
    # a VM's row: t * need - sum of its x <= 0 (or, frozen, -sum of its x <= -f * need)
    member = sparse.csr_matrix(
        (-np.ones(nc), ([vi[v] for v, _r, _u in conns], list(range(nc)))), shape=(len(vms), nc + 1)
    )
    bounds = [(0.0, max(0.0, u)) for _v, _r, u in conns]
    frozen: dict[str, float] = {}
    while len(frozen) < len(vms):
        t_col = np.array([0.0 if vm in frozen else need[vm] for vm in vms])
        # a frozen VM keeps its level less a millionth of the largest link: the level is the previous
        # round's optimum, met to HiGHS's tolerance (1e-7, absolute), and asked for exactly (or less a
        # millionth of itself) a Clos window's next round was infeasible
        b_vm = np.array([min(0.0, _SLACK - frozen[vm] * need[vm]) if vm in frozen else 0.0 for vm in vms])
        a_vm = member + sparse.csr_matrix(
            (t_col, (range(len(vms)), [nc] * len(vms))), shape=(len(vms), nc + 1)
        )
        a_ub = sparse.vstack([a_link, a_vm]).tocsr()
        b_ub = np.concatenate([b_link, b_vm])
        c = np.zeros(nc + 1)
        c[nc] = -1.0
        res = linprog(c, A_ub=a_ub, b_ub=b_ub, bounds=[*bounds, (0.0, 1.0)], method="highs")
        free = [vm for vm in vms if vm not in frozen]
        if res.status != 0:
            # not solved (numerically): the VMs not yet shown short count as feasible, so their
            # failures count; this figure never excuses a failure it has not shown unavoidable
            frozen.update(dict.fromkeys(free, 1.0))
            break
        t = float(res.x[nc])
        if t >= FULL:
            frozen.update(dict.fromkeys(free, 1.0))
            break
        # the VMs that cannot get more than t while every other free VM keeps t, frozen at t: those
        # whose row has a dual price (raising its need would lower t); the prices of the free VMs'
        # rows times their needs sum to 1, so at least one is frozen per round
        price = np.abs(res.ineqlin.marginals[len(links) :])
        stuck = [vm for vm in free if price[vi[vm]] * need[vm] > _TOL]
        if not stuck:  # rounding: the largest price
            stuck = [max(free, key=lambda vm: price[vi[vm]] * need[vm])]
        frozen.update(dict.fromkeys(stuck, t))
    return frozen


def _may_overflow(conns: list[Conn], need: dict[str, float], cap: dict[str, float]) -> bool:
    """Whether some link could be over-committed: the needs of the VMs crossing it, each at most what
    its connections through it can carry, sum above its capacity (else every VM gets its need)."""
    through: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    total: dict[str, float] = defaultdict(float)
    for vm, route, ub in conns:
        total[vm] += ub
        for ln in route:
            through[ln][vm] += ub
    if any(total[vm] < need[vm] * FULL for vm in need):
        return True
    return any(sum(min(need[vm], u) for vm, u in by_vm.items()) > cap[ln] for ln, by_vm in through.items())
