"""The simulator's prediction for a testbed experiment: the same topology, rates, guarantees and queues.

Each testbed experiment (``paccp testbed mptcp-* / softbw-*``) prints paper vs testbed vs simulator. The
scenarios are those of the simulator's own experiments (:mod:`paccp.experiments.mptcp_bgwc`,
:mod:`paccp.experiments.softbw_share`) rescaled to the testbed: every link at the testbed's rate (the
simulator's 10 Gbit/s fabric links of the SoftBW scenario at 10x it), guarantees as the testbed sets them
(paper rates x rate / 1 Gbit/s), the testbed's switch buffer (bytes, as a packet count of 1514-byte
frames), the same competition levels A_l and connection counts. Simulated time is ``SIM_S`` (``QUICK_S``
in tests). Rates are the engine's acknowledged payload rates, comparable with the testbed's goodput.
"""

from __future__ import annotations

from typing import Any

SIM_S = 3.0
QUICK_S = 0.6
FRAME = 1514


def _rescale_links(topology: dict[str, Any], rate_bps: int, buffer_pkts: int) -> dict[str, Any]:
    for ln in topology["links"]:
        ln["rate"] = f"{rate_bps}bit"
        ln["buffer"] = f"{buffer_pkts}pkt"
    return topology


def _mbps_by_vm(spec: dict[str, Any], name: str) -> dict[str, dict[str, float]]:
    from paccp.experiments.mptcp_measure import measure

    m = measure(spec, description=name)
    vms = {v["id"] for v in spec["vms"]}
    return {vm: {"bg": round(m.rate(vm, "bg"), 2), "wc": round(m.rate(vm, "wc"), 2)} for vm in sorted(vms)}


def mptcp(
    servers: list[tuple[str, int, int, int]],
    rate_bps: int,
    queue_bytes: int,
    *,
    star: bool,
    policy: bool = True,
    duration_s: float = SIM_S,
    seed: int = 1,
) -> dict[str, dict[str, float]]:
    """Per testbed server name: the simulator's BG and WC Mb/s.

    ``servers``: (testbed name ``s<i>``, guarantee bit/s, A_l, connections). ``star``: the paper's Fig. 4
    star (Table 3: all senders to one receiver), else the Fig. 11 testbed (S_i -> S_(i+4) over one path).
    """
    from paccp.experiments import mptcp_bgwc as mb

    pkts = max(2, queue_bytes // FRAME)
    if star:
        hosts = {name: "ABC"[k] for k, (name, *_r) in enumerate(servers)}
        topo = _rescale_links(mb.star(["A", "B", "C"], "D"), rate_bps, pkts)
        dst = {name: "D" for name in hosts}
    else:
        hosts = {name: f"S{int(name[1:])}" for name, *_r in servers}
        topo = _rescale_links(mb.testbed(), rate_bps, pkts)
        dst = {name: f"S{int(name[1:]) + 4}" for name in hosts}
    vms = [(f"vm{name}", hosts[name], 0) for name, *_r in servers]
    flows = [
        {"id": f"f{name}-{k}", "src": hosts[name], "dst": dst[name], "vm": f"vm{name}"}
        for name, _g, _a, conns in servers
        for k in range(conns)
    ]
    scheme: dict[str, Any] = {"fair_wc": policy}
    if policy:
        scheme["competition_levels"] = {f"vm{name}": a for name, _g, a, _c in servers}
    spec = mb._scenario(topo, vms, flows, scheme, duration_s=duration_s, seed=seed)
    for v, (_name, g, _a, _c) in zip(spec["vms"], servers, strict=True):
        v["theta"] = f"{g}bit"
    got = _mbps_by_vm(spec, "testbed prediction")
    return {name: got[f"vm{name}"] for name, *_r in servers}


def softbw(
    flows: list[int],
    guarantee_bps: int,
    rate_bps: int,
    queue_bytes: int,
    *,
    scheduler: bool,
    duration_s: float = SIM_S,
    seed: int = 1,
    extra_flows: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """SoftBW (or one FIFO) at a host port of ``rate_bps``: per-VM delivered Mb/s (+ flow records).

    The simulator's ``softbw-share`` non-blocking fabric: VMs on one host, the host port the only
    bottleneck, each flow to its own receiver. ``extra_flows``: finite flows added as they are
    (``softbw-short``); their completion times are returned under ``fct_ms``.
    """
    from paccp.scenario import parse_scenario, to_engine
    from paccp.sim.rundir import run_engine, sample_rates

    n_rx = sum(flows) + len(extra_flows or [])
    pkts = max(2, queue_bytes // FRAME)
    nodes = [{"name": "s", "kind": "host"}, {"name": "sw", "kind": "switch"}]
    nodes += [{"name": f"r{i}", "kind": "host"} for i in range(n_rx)]
    links = [{"a": "s", "b": "sw", "rate": f"{rate_bps}bit", "delay": "10us", "buffer": f"{pkts}pkt"}]
    links += [
        {"a": f"r{i}", "b": "sw", "rate": f"{10 * rate_bps}bit", "delay": "10us", "buffer": f"{pkts}pkt"}
        for i in range(n_rx)
    ]
    spec_flows: list[dict[str, Any]] = []
    k = 0
    for v, n in enumerate(flows, start=1):
        for j in range(n):
            spec_flows.append({"id": f"v{v}-f{j}", "src": "s", "dst": f"r{k}", "vm": f"v{v}"})
            k += 1
    for f in extra_flows or []:
        spec_flows.append({**f, "src": "s", "dst": f"r{k}"})
        k += 1
    n_vms = max([len(flows)] + [int(str(f["vm"])[1:]) for f in extra_flows or []])
    spec: dict[str, Any] = {
        "run": {
            "seed": seed,
            "duration": f"{duration_s:g}s",
            "warmup": f"{duration_s / 4:g}s",
            "sample_interval": "10ms",
        },
        "cc": {"kind": "reno"},
        "topology": {"kind": "explicit", "nodes": nodes, "links": links},
        "vms": [{"id": f"v{v}", "host": "s"} for v in range(1, n_vms + 1)],
        "flows": spec_flows,
    }
    if scheduler:
        spec["softbw"] = {
            "overcommit": 4.0,
            "guarantees": [
                {"vm": f"v{v}", "kind": "strict", "rate": f"{guarantee_bps}bit"} for v in range(1, n_vms + 1)
            ],
        }
    sc = parse_scenario(spec, where="softbw testbed prediction")
    result, _wall = run_engine(to_engine(sc), description="softbw testbed prediction")
    times, ids, rates = sample_rates(result)
    first = -(-sc.run.warmup // result.samples.interval_ns)
    per_vm: dict[str, float] = {}
    for i, fid in enumerate(ids):
        vm = str(fid).split("-", 1)[0]
        per_vm[vm] = per_vm.get(vm, 0.0) + float(rates[i][first:].mean()) / 1e6
    out: dict[str, Any] = {"mbps": {k: round(v, 2) for k, v in sorted(per_vm.items())}}
    if extra_flows:
        fl = result.flows.to_pylist()
        ids_extra = {f["id"] for f in extra_flows}
        out["fct_ms"] = sorted(
            round((r["finish_ns"] - r["start_ns"]) / 1e6, 3)
            for r in fl
            if r["id"] in ids_extra and r.get("finish_ns") is not None
        )
        out["unfinished"] = sum(1 for r in fl if r["id"] in ids_extra and r.get("finish_ns") is None)
    _ = times
    return out
