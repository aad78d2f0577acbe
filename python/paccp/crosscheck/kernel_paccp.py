"""PACCP on a dumbbell, one-way and two-way: the kernel datapath against the engine (cross-check).

Three VMs, one flow each: BE (0, 1), DS (0, 2) and MRG (0.4 x rate, 2), as in Fig. 7, from ``s<i>`` to
``d<i>`` through ``paccp testbed``'s dumbbell (HTB + bfifo on router L's egress). Two-way: the same three
classes from ``d<i>`` back to ``s<i>``, with router R's egress shaped too, so each bottleneck carries one
direction's data and the other's ACKs (Fig. 7's situation on two queues instead of a ring of three).

The engine's twin is matched as the Fig. 7 simulation is (:data:`paccp.datapath.paccp.fig7.SIM_TRANSPORT`:
40 ms delayed-ACK timer, SACK, 1514/66-byte frames; bfifo + one frame; flows started at seeded offsets in
[0, START_SPREAD_MS)); its rates are the mean of :data:`DRAWS` start draws. Rates are per flow, keyed
``F<i>`` (s -> d) and ``R<i>`` (d -> s), with the class in ``classes``.
"""

from __future__ import annotations

import os
import random
import statistics
import time
from pathlib import Path
from typing import Any

# (label, theta as a share of the rate, omega)
CLASSES = (("BE", 0.0, 1.0), ("DS", 0.0, 2.0), ("MRG", 0.4, 2.0))
DRAWS = 3


def _theta(share: float, rate_bps: int) -> int:
    return int(share * rate_bps)


def flow_ids(two_way: bool) -> dict[str, str]:
    """Flow id -> class label."""
    ids = {f"F{i}": lab for i, (lab, _s, _o) in enumerate(CLASSES)}
    if two_way:
        ids |= {f"R{i}": lab for i, (lab, _s, _o) in enumerate(CLASSES)}
    return ids


def run_kernel(rate_bps: int, duration_s: int, omit_s: int, out: Path, two_way: bool) -> dict[str, Any]:
    """The kernel side (root, the PACCP datapath): per-flow Mb/s, drops per direction, TCP counters."""
    from paccp.datapath.core import netdiag, netns
    from paccp.datapath.paccp import testbed, vms

    out.mkdir(parents=True, exist_ok=True)
    os.environ["PACCP_NETNS_PREFIX"] = "fx"
    nodes = [f"s{i}" for i in range(3)] + [f"d{i}" for i in range(3)]
    with testbed.testbed() as net:
        l_if = netns.build_dumbbell(net, rate_bps, 3)
        r_if = "e0"  # R's first link is the one to L (build_dumbbell)
        if two_way:
            net.shape("R", r_if, rate_bps, netns.queue_bytes(rate_bps))
        pairs = []
        for fid in flow_ids(two_way):
            i = int(fid[1:])
            _lab, share, omega = CLASSES[i]
            cg = net.cgroup(f"vm{fid}")
            vms.vm_set(str(cg), _theta(share, rate_bps), omega)
            src, dst = (f"s{i}", f"d{i}") if fid[0] == "F" else (f"d{i}", f"s{i}")
            addr = f"10.202.{i}.2" if fid[0] == "F" else f"10.201.{i}.2"
            pairs.append((src, addr, dst, cg))
        marks: list[tuple[dict[str, tuple[int, int]], dict[str, dict[str, int]], float]] = []

        def probe() -> dict[str, int]:
            # called at the start of the measured window and near its end (testbed._run_flows)
            q = {"L->R": netdiag.qdisc_drops(net, "L", l_if), "R->L": netdiag.qdisc_drops(net, "R", r_if)}
            marks.append((q, {n: netdiag.nstat(net, n) for n in nodes}, time.monotonic()))
            return {"marks": len(marks)}  # a value makes _run_flows stop probing after the second

        rates = testbed._run_flows(net, pairs, float(duration_s), out, omit_s, probe, {})
    by_src = {src: fid for fid, (src, *_r) in zip(flow_ids(two_way), pairs, strict=True)}
    res: dict[str, Any] = {"mbps": {by_src[src]: r / 1e6 for src, r in rates.items()}}
    if len(marks) >= 2:
        (q0, n0, t0), (q1, n1, t1) = marks[0], marks[-1]
        res["drops_per_s"] = {k: (q1[k][0] - q0[k][0]) / (t1 - t0) for k in q0}
        res["nstat"] = {n: netdiag.nstat_delta(n0[n], n1[n]) for n in nodes}
        # a namespace runs one sender: its timeouts are its flow's
        res["timeouts_per_s"] = {
            by_src[src]: res["nstat"][src]["TcpExtTCPTimeouts"] / (t1 - t0) for src in by_src
        }
    return res


def engine_spec(rate_bps: int, duration_s: float, two_way: bool, seed: int) -> dict[str, Any]:
    """The twin as a scenario (:mod:`paccp.scenario` schema)."""
    from paccp.datapath.core.netns import FRAME_BYTES, queue_bytes
    from paccp.datapath.paccp.fig7 import SIM_CC, SIM_TRANSPORT, START_SPREAD_MS

    rng = random.Random(seed)
    q = queue_bytes(rate_bps)
    hosts = [f"s{i}" for i in range(3)] + [f"d{i}" for i in range(3)]
    nodes = [{"name": h, "kind": "host"} for h in hosts] + [
        {"name": "L", "kind": "switch"},
        {"name": "R", "kind": "switch"},
    ]
    access = {"rate": 10 * rate_bps, "delay": "5us", "buffer": f"{10 * q}B"}
    links = [{"a": h, "b": "L" if h[0] == "s" else "R", **access} for h in hosts]
    links.append({"a": "L", "b": "R", "rate": rate_bps, "delay": "5us", "buffer": f"{q + FRAME_BYTES}B"})
    vms, flows = [], []
    for fid, lab in flow_ids(two_way).items():
        i = int(fid[1:])
        _lab, share, omega = CLASSES[i]
        src, dst = (f"s{i}", f"d{i}") if fid[0] == "F" else (f"d{i}", f"s{i}")
        vms.append(
            {"id": f"vm{fid}", "host": src, "label": lab, "theta": _theta(share, rate_bps), "omega": omega}
        )
        start = f"{rng.randrange(START_SPREAD_MS * 1000)}us"
        flows.append({"id": fid, "src": src, "dst": dst, "vm": f"vm{fid}", "label": lab, "start": start})
    return {
        "run": {
            "seed": 1,
            "duration": f"{duration_s:g}s",
            "warmup": f"{duration_s / 5:g}s",
            "sample_interval": "10ms",
        },
        "transport": dict(SIM_TRANSPORT),
        "cc": dict(SIM_CC),
        "topology": {"kind": "explicit", "nodes": nodes, "links": links, "nic_buffer": f"{10 * q}B"},
        "routing": {"kind": "ecmp"},
        "vms": vms,
        "flows": flows,
    }


def run_engine(rate_bps: int, duration_s: float, two_way: bool, draws: int = DRAWS) -> dict[str, Any]:
    """The twin: per-flow Mb/s and drops per direction, means over ``draws`` start draws."""
    from paccp.scenario import parse_scenario, to_engine
    from paccp.sim.engine import run
    from paccp.sim.rundir import window_rates

    mbps: dict[str, list[float]] = {}
    drops: dict[str, list[float]] = {}
    timeouts: dict[str, list[float]] = {}
    for seed in range(1, draws + 1):
        sc = parse_scenario(engine_spec(rate_bps, duration_s, two_way, seed), where="paccp dumbbell twin")
        res = run(to_engine(sc))
        for fid, r in window_rates(res, sc.run.warmup, sc.run.duration).items():
            mbps.setdefault(fid, []).append(r / 1e6)
        for c in res.channels.to_pylist():
            if c["name"] in ("L->R", "R->L"):
                drops.setdefault(c["name"], []).append(c["drops"] / (sc.run.duration / 1e9))
        for f in res.flows.to_pylist():
            timeouts.setdefault(f["id"], []).append(f["timeouts"])
    return {
        "mbps": {k: statistics.mean(v) for k, v in sorted(mbps.items())},
        "drops_per_s": {k: statistics.mean(v) for k, v in sorted(drops.items())},
        "timeouts_per_s": {k: statistics.mean(v) / duration_s for k, v in sorted(timeouts.items())},
    }


def compare_metrics(res: dict[str, Any], two_way: bool) -> dict[str, Any]:
    """Metrics of one side for :func:`paccp.crosscheck.run.compare`: Mb/s per flow, drops per second
    (the engine's over its whole run, the kernel's over the measured window)."""
    m: dict[str, Any] = {f"{fid}_{lab}_mbps": res["mbps"][fid] for fid, lab in flow_ids(two_way).items()}
    m |= {f"drops_per_s[{k}]": v for k, v in res.get("drops_per_s", {}).items() if two_way or k == "L->R"}
    m |= {f"timeouts_per_s[{k}]": v for k, v in res.get("timeouts_per_s", {}).items()}
    return m
