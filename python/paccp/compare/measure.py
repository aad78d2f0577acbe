"""What one run of a comparison measures (in a sweep worker) and the scores computed from it.

:func:`evaluate` runs the engine and keeps, per VM, the bytes it got in each window (the flow sample
interval) and its *backlog* at the window's start: the bytes still to send in its connections that were
open during the whole window (a long-lived connection's backlog is unbounded). A VM **demands at least
its guarantee G** in a window when that backlog is at least G x window. It also keeps each connection's
size, start and completion time, and the bytes sent by the scored channels. An MPTCP connection's subflows
(``f/bg``, ``f/wc0``) are one connection ``f``; a flow belongs to the VM named by its label.

Scores of one run (:func:`score_run`), all after the warm-up:

- **guarantee failure** of a VM with G > 0: the share of its demanding windows in which it got less than
  0.95 x G x payload/packet (1460/1500: a guarantee on the wire delivers that much payload); also over
  the *feasible* windows only, those in which the guarantees of the VMs of its host sum to at most the
  host's NIC rate (an over-committed host cannot meet them all), and over the windows feasible at *every*
  link, those in which the max-min fulfilment of the guarantees over the network gives the VM all of its
  guarantee (:mod:`paccp.compare.feasible`: each VM's guarantee split over its open connections as suits
  the network best): four 5 Gb/s guarantees sent to one host's 10 Gb/s link cannot all be met by any
  scheme, though each sender's NIC could carry its own. A VM counts its whole guarantee in a window it
  demands; in any other window, its guarantee weighted by the share of the window it had a connection
  open with bytes to send (its *presence*): a VM that joins 0.3 ms into a 5 ms window takes its share for
  94 % of it, so the window is as over-committed as the next one (until MEASURE_VERSION 4 such a VM
  counted for nothing and the join windows of the over-commit file counted as feasible);
- **utilisation**: bytes sent by the scored channels (``host_nic``: VM host to switch; ``host_in``: switch
  to VM host; ``fabric``: switch to switch) / their capacity over the run, mean over the channels that
  carried traffic;
- **spare**: a VM's mean rate above its (payload) guarantee over its backlogged windows; per class, its
  share of the classes' summed per-VM spare / its share of the summed weights: 1 is the policy's target
  (the spare shared in proportion to the weights), 0 = got no spare;
- **FCT**: mean and 99th percentile per class and size class (small <= 100 KB, medium <= 1 MB, big) over
  connections that started after the warm-up and finished (unfinished ones are counted);
- **paid vs got**: a VM's price per hour (its scheme's book section) and its mean rate over its
  backlogged windows; per class, (got / got_ref) / (paid / paid_ref) (1 = consistent, < 1 = pays more than
  it gets relative to the reference class, the one with the smallest weight, then guarantee; None when the
  reference pays nothing);
- **shuffle** (MapReduce points): each job's shuffle time (its last flow's finish - its submission), mean
  per job class of :mod:`paccp.traffic.mapreduce` (jobs of every class, all their VMs);
- **distance to the optimum**: :mod:`paccp.compare.distance` (share of backlogged VM-windows within 10 %
  of the VM's share in the optimum of that window, median relative error);
- **gaming** (gaming runs): the gamer VM's mean rate after the warm-up with k flows, divided by what a VM
  gets on average when every VM has one flow (k = 1, same seed): the mean over the VMs, not the gamer's
  own k = 1 rate, which Reno's unfairness between single flows makes noisy.
"""

from __future__ import annotations

from collections import defaultdict
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import numpy as np

from paccp.compare.distance import conn_backlog, distance_to_optimum, presence
from paccp.compare.feasible import FULL, fulfilment
from paccp.sim.rundir import size_class

if TYPE_CHECKING:
    from paccp.compare.schemes import Scheme
    from paccp.compare.setup import Setup
    from paccp.pricing.book import PriceBook
    from paccp.sim.sweep import Point

#: Version of what :func:`evaluate` returns: part of the cache directory (``DIR/cache-m<N>``), so results
#: measured by an older version are never reused.
MEASURE_VERSION = 6
FAIL_TOLERANCE = 0.95
UNBOUNDED = 1e15  # backlog of a long-lived connection (bytes)


#: The keys of every result of :func:`evaluate` (a cache file without one of them is damaged).
RAW_KEYS = ("params", "window_ns", "duration_ns", "warmup_ns", "vms", "conns", "channels")


def evaluate(point: Point) -> dict[str, Any]:
    """Run one point and return its raw measurements (JSON-serialisable; cached by the sweep)."""
    import time

    from paccp.scenario import hosts
    from paccp.sim import engine
    from paccp.sim.sweep import resolve

    resolved = resolve(point).resolved
    assert resolved is not None
    sc = resolved.scenario
    t0 = time.perf_counter()
    res = engine.run(resolved.engine)
    wall = time.perf_counter() - t0
    flows = res.flows.to_pylist()
    s = res.samples
    w = s.interval_ns
    acked = np.asarray(s.acked_bytes, dtype=np.int64)
    n_win = acked.shape[1] if acked.ndim == 2 else 0
    row_of = {fid: i for i, fid in enumerate(s.flow_ids)}
    # connections: subflows of one MPTCP connection are one connection
    conns: dict[str, dict[str, Any]] = {}
    for f in flows:
        cid = str(f["id"]).split("/")[0]
        c = conns.setdefault(
            cid,
            {
                "vm": f["label"],
                "size": f["size_bytes"],
                "start": f["start_ns"],
                "finish": f["finish_ns"],
                "done": True,
                "acked": np.zeros(n_win, dtype=np.int64),
            },
        )
        c["start"] = min(c["start"], f["start_ns"])
        if f["finish_ns"] is None:
            c["done"] = False
        elif c["finish"] is not None:
            c["finish"] = max(c["finish"], f["finish_ns"])
        if f["id"] in row_of and n_win:
            c["acked"] = c["acked"] + acked[row_of[f["id"]]]
    if res.connections is not None:  # MPTCP: the connection carries the size and the completion time
        for c in res.connections.to_pylist():
            if c["id"] in conns:
                conns[c["id"]].update(
                    size=c["size_bytes"], finish=c["finish_ns"], done=c["finish_ns"] is not None
                )
    got: dict[str, np.ndarray] = defaultdict(lambda: np.zeros(n_win, dtype=np.float64))
    backlog: dict[str, np.ndarray] = defaultdict(lambda: np.zeros(n_win, dtype=np.float64))
    present: dict[str, np.ndarray] = defaultdict(lambda: np.zeros(n_win, dtype=np.float64))
    starts = np.arange(n_win, dtype=np.int64) * w
    conn_rows = []
    conn_back: dict[str, Any] = {}
    for cid, c in conns.items():
        vm = c["vm"]
        got[vm] += c["acked"]
        finish = c["finish"] if c["done"] else None
        whole = (c["start"] <= starts) & ((starts + w <= finish) if finish is not None else True)
        if c["size"] is None:
            rem = np.full(n_win, UNBOUNDED)
        else:
            before = np.concatenate([[0], np.cumsum(c["acked"])[:-1]]) if n_win else np.zeros(0)
            rem = np.maximum(0.0, c["size"] - before)
        backlog[vm] += np.where(whole, rem, 0.0)
        frac = presence(c["start"], finish, starts, w)
        present[vm] = np.maximum(present[vm], np.where(rem > 0, frac, 0.0))
        conn_back[cid] = [vm, conn_backlog(whole, rem, frac)]
        if c["size"] is not None:
            fct = (finish - c["start"]) if finish is not None else None
            conn_rows.append([vm, int(c["size"]), int(c["start"]), fct, cid])
    host_set = set(hosts(sc.topology))
    channels = [
        [ch["from"], ch["to"], int(ch["rate_bps"]), int(ch["tx_bytes"])] for ch in res.channels.to_pylist()
    ]
    return {
        "params": point.params,
        "window_ns": w,
        "duration_ns": sc.run.duration,
        "warmup_ns": sc.run.warmup,
        "mtu": sc.transport.mtu,
        "header": sc.transport.header,
        "hosts": sorted(host_set),
        "vms": {
            vm: {"got": got[vm].tolist(), "backlog": backlog[vm].tolist(), "present": present[vm].tolist()}
            for vm in sorted(got)
        },
        "conns": conn_rows,
        "conn_backlog": conn_back,
        "channels": channels,
        "wall_s": round(wall, 3),
    }


# ------------------------------------------------------------------------------------------------ scores


def _first_window(raw: dict[str, Any]) -> int:
    return int(-(-raw["warmup_ns"] // raw["window_ns"]))


def vm_rates(raw: dict[str, Any], setup: Setup) -> dict[str, dict[str, Any]]:
    """Per VM: demanding/failed windows (all, and where its host's NIC could carry the guarantees of its
    demanding VMs), mean rate, rate and spare over its backlogged windows."""
    w = raw["window_ns"]
    k0 = _first_window(raw)
    last = raw["duration_ns"] // w
    n = max(0, last - k0)
    pf = (raw["mtu"] - raw["header"]) / raw["mtu"]
    hosts = set(raw["hosts"])
    nic: dict[str, int] = defaultdict(int)
    for a, _b, rate, _tx in raw["channels"]:
        if a in hosts:
            nic[a] += rate
    arrays: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    sold: dict[str, np.ndarray] = defaultdict(lambda: np.zeros(n))
    needs: dict[str, np.ndarray] = {}  # what each guaranteed VM needs per window (payload bit/s)
    for v in setup.vms:
        m = raw["vms"].get(v.id)
        g_bps = v.purchase.guarantee
        got = np.asarray(m["got"], dtype=np.float64)[k0:last] * 8e9 / w if m is not None else np.zeros(n)
        back = np.asarray(m["backlog"], dtype=np.float64)[k0:last] if m is not None else np.zeros(n)
        demand = back >= g_bps * w / 8e9 if g_bps > 0 else np.zeros(n, dtype=bool)
        arrays[v.id] = (got, back, demand)
        pres = m.get("present") if m is not None else None
        if pres is None:  # measured before MEASURE_VERSION 5
            sold[v.host] = sold[v.host] + np.where(demand, g_bps, 0)
        else:
            share = np.asarray(pres, dtype=np.float64)[k0:last]
            wanted = np.where(demand, 1.0, share) * g_bps
            sold[v.host] = sold[v.host] + wanted
            if g_bps > 0:
                needs[v.id] = wanted * pf
    reach = fulfilment(raw, setup, needs)
    out: dict[str, dict[str, Any]] = {}
    for v in setup.vms:
        got, back, demand = arrays[v.id]
        g_bps = v.purchase.guarantee
        busy = back > 0
        fail = demand & (got < FAIL_TOLERANCE * g_bps * pf)
        feasible = sold[v.host] <= nic.get(v.host, 0)
        # and at every link (sender's NIC, receivers' links, the fabric's): paccp.compare.feasible
        anywhere = feasible & (reach[v.id] >= FULL) if v.id in reach else feasible
        out[v.id] = {
            "rate_bps": float(got.mean()) if got.size else 0.0,
            "busy_rate_bps": float(got[busy].mean()) if busy.any() else None,
            "spare_bps": float(np.maximum(0.0, got[busy] - g_bps * pf).mean()) if busy.any() else None,
            "demand": int(demand.sum()),
            "fail": int(fail.sum()),
            "demand_feasible": int((demand & feasible).sum()),
            "fail_feasible": int((fail & feasible).sum()),
            "demand_fabric": int((demand & anywhere).sum()),
            "fail_fabric": int((fail & anywhere).sum()),
        }
    return out


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b <= 0:
        return None
    return a / b


def reference_class(setup: Setup) -> str:
    """The class with the smallest weight (then the smallest guarantee, then the first)."""
    ps = {v.purchase.name: v.purchase for v in setup.vms}
    return min(ps.values(), key=lambda p: (p.weight, p.guarantee)).name


def score_run(
    raw: dict[str, Any], setup: Setup, scheme: Scheme, book: PriceBook, scored: str
) -> dict[str, Any]:
    """The scores of one run (module docstring) per VM and per class."""
    rates = vm_rates(raw, setup)
    run_h = raw["duration_ns"] / 3.6e12
    flow_h: dict[str, float] = defaultdict(float)
    extra_h: dict[str, float] = defaultdict(float)
    for vm, _size, start, fct, _id in raw["conns"]:
        end = start + fct if fct is not None else raw["duration_ns"]
        flow_h[vm] += max(0, end - start) / 3.6e12
    for f in setup.flows:  # long-lived connections last from their start to the end of the run
        if f.get("size") is None:
            life = max(0, raw["duration_ns"] - _ns(f["start"])) / 3.6e12
            flow_h[f["vm"]] += life
            if f["vm"] == setup.gamer and not f["id"].endswith(".0"):
                extra_h[f["vm"]] += life
    from paccp.compare.schemes import VmUse

    per_vm: dict[str, Any] = {}
    for v in setup.vms:
        r = rates[v.id]
        use = VmUse(r["rate_bps"], flow_h[v.id], extra_h[v.id], run_h)
        price = scheme.price(book, v, use)
        per_vm[v.id] = {
            "class": v.purchase.name,
            "host": v.host,
            **r,
            "fail_share": (r["fail"] / r["demand"]) if r["demand"] else None,
            "fail_share_feasible": (r["fail_feasible"] / r["demand_feasible"])
            if r["demand_feasible"]
            else None,
            "fail_share_fabric": (r["fail_fabric"] / r["demand_fabric"]) if r["demand_fabric"] else None,
            "paid_per_hour": float(price),
        }
    classes: dict[str, Any] = {}
    for name in dict.fromkeys(v.purchase.name for v in setup.vms):
        members = [per_vm[v.id] for v in setup.vms if v.purchase.name == name]
        demand = sum(m["demand"] for m in members)
        dfeas = sum(m["demand_feasible"] for m in members)
        dfab = sum(m["demand_fabric"] for m in members)
        busy = [m["busy_rate_bps"] for m in members if m["busy_rate_bps"] is not None]
        spare = [m["spare_bps"] for m in members if m["spare_bps"] is not None]
        classes[name] = {
            "vms": len(members),
            "fail_share": (sum(m["fail"] for m in members) / demand) if demand else None,
            "fail_share_feasible": (sum(m["fail_feasible"] for m in members) / dfeas) if dfeas else None,
            "demand_windows": demand,
            "feasible_windows": dfeas,
            "fail_share_fabric": (sum(m["fail_fabric"] for m in members) / dfab) if dfab else None,
            "fabric_windows": dfab,
            "rate_bps": float(np.mean([m["rate_bps"] for m in members])),
            "got_bps": float(np.mean(busy)) if busy else None,
            "spare_bps": float(np.mean(spare)) if spare else None,
            "paid_per_hour": float(np.mean([m["paid_per_hour"] for m in members])),
            "fct": _fct(raw, setup, name),
        }
    ref = reference_class(setup)
    weight = {v.purchase.name: v.purchase.weight for v in setup.vms}
    spare_sum = sum(c["spare_bps"] or 0.0 for c in classes.values())
    w_sum = sum(weight[n] for n, c in classes.items() if c["spare_bps"] is not None)
    for name, c in classes.items():
        r = classes[ref]
        c["spare_vs_target"] = (
            (c["spare_bps"] / spare_sum) / (weight[name] / w_sum)
            if c["spare_bps"] is not None and spare_sum > 0
            else None
        )
        got = _ratio(c["got_bps"], r["got_bps"])
        paid = _ratio(c["paid_per_hour"], r["paid_per_hour"])
        c["got_vs_ref"] = got
        c["paid_vs_ref"] = paid
        c["consistency"] = got / paid if got is not None and paid else None
    fails = [m for m in per_vm.values() if m["demand"]]
    return {
        "per_vm": per_vm,
        "classes": classes,
        "reference_class": ref,
        "fail_share": (sum(m["fail"] for m in fails) / sum(m["demand"] for m in fails)) if fails else None,
        "utilisation": _utilisation(raw, scored, {v.host for v in setup.vms}),
        "shuffle": _shuffle(raw, setup),
        "distance": distance_to_optimum(raw, setup),
    }


def _shuffle(raw: dict[str, Any], setup: Setup) -> dict[str, Any] | None:
    """MapReduce points: job shuffle times (:func:`paccp.traffic.mapreduce.summarize`, without the CDF)."""
    if not setup.jobs:
        return None
    from paccp.traffic import mapreduce as mr

    finish = {cid: (start + fct if fct is not None else None) for _vm, _s, start, fct, cid in raw["conns"]}
    summary = mr.summarize(mr.shuffle_results(setup.jobs, finish))
    summary.pop("cdf", None)
    return summary


def _ns(text: str) -> int:
    from paccp.units import parse_duration_ns

    return parse_duration_ns(text)


def _utilisation(raw: dict[str, Any], scored: str, vm_hosts: set[str]) -> dict[str, float | None]:
    hosts = set(raw["hosts"])
    dur = raw["duration_ns"] / 1e9
    utils = []
    for a, b, rate, tx in raw["channels"]:
        if scored == "host_nic":
            pick = a in vm_hosts
        elif scored == "host_in":
            pick = b in vm_hosts
        else:
            pick = a not in hosts and b not in hosts
        if pick and tx > 0:
            utils.append(tx * 8 / (rate * dur))
    if not utils:
        return {"mean": None, "max": None, "channels": 0}
    return {"mean": float(np.mean(utils)), "max": float(np.max(utils)), "channels": len(utils)}


def _fct(raw: dict[str, Any], setup: Setup, cls: str) -> dict[str, Any]:
    vm_class = {v.id: v.purchase.name for v in setup.vms}
    groups: dict[str, list[float]] = defaultdict(list)
    unfinished: dict[str, int] = defaultdict(int)
    for vm, size, start, fct, _id in raw["conns"]:
        if vm_class.get(vm) != cls or start < raw["warmup_ns"]:
            continue
        sc = size_class(size) or "big"
        for g in (sc, "all"):
            if fct is None:
                unfinished[g] += 1
            else:
                groups[g].append(fct / 1e6)
    out: dict[str, Any] = {}
    for g in ("small", "medium", "big", "all"):
        xs = groups.get(g, [])
        out[g] = {
            "flows": len(xs) + unfinished.get(g, 0),
            "unfinished": unfinished.get(g, 0),
            "mean_ms": float(np.mean(xs)) if xs else None,
            "p99_ms": float(np.percentile(xs, 99)) if xs else None,
        }
    return out


def gaming_rates(raw: dict[str, Any], setup: Setup) -> tuple[float, float]:
    """(the gaming VM's mean rate, the mean over all VMs of their mean rates) after the warm-up, bit/s."""
    w = raw["window_ns"]
    k0 = _first_window(raw)
    last = raw["duration_ns"] // w
    rates = {}
    for v in setup.vms:
        m = raw["vms"].get(v.id)
        got = np.asarray(m["got"], dtype=np.float64)[k0:last] if m is not None else np.zeros(0)
        rates[v.id] = float(got.mean() * 8e9 / w) if got.size else 0.0
    assert setup.gamer is not None
    return rates[setup.gamer], float(np.mean(list(rates.values())))


def gaming_gains(ref: dict[int, tuple[float, float]], cur: dict[int, tuple[float, float]]) -> list[float]:
    """Per seed, the gain of the many-connection VM: its rate at k (``cur``) over the mean rate of every VM
    at k = 1 (``ref``), both as :func:`gaming_rates` gives them, for the seeds both have."""
    return [cur[sd][0] / ref[sd][1] for sd in cur if sd in ref and ref[sd][1] > 0]


def money(x: Decimal) -> float:
    """A price as a float for JSON and plots (the exact value stays in the pricing code)."""
    return float(x)
