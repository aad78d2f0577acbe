"""Conversion of a validated scenario to the engine's fully resolved JSON (docs/engine-contract.md)."""

from __future__ import annotations

from typing import Any

from paccp.common.cos import classify
from paccp.scenario.models import CosMix, Scenario, arrival_rate_per_s
from paccp.scenario.softbw import softbw_host_queues
from paccp.scenario.topology import Dumbbell, LeafSpine, hosts


def _link(rate: int, delay: int, buffer: dict[str, int]) -> dict[str, Any]:
    return {"rate_bps": rate, "delay_ns": delay, "buffer": dict(buffer)}


def to_engine(sc: Scenario) -> dict[str, Any]:
    """The fully resolved engine JSON (docs/engine-contract.md)."""
    from paccp.traffic.workload import load_cdf

    topo = sc.topology
    if isinstance(topo, LeafSpine):
        t: dict[str, Any] = {
            "kind": "leaf_spine",
            "leaves": topo.leaves,
            "spines": topo.spines,
            "hosts_per_leaf": topo.hosts_per_leaf,
            "host_link": _link(topo.host_rate, topo.host_delay, topo.host_buffer),
            "fabric_link": _link(topo.fabric_rate, topo.fabric_delay, topo.fabric_buffer),
            "nic_buffer": dict(topo.nic_buffer),
        }
    elif isinstance(topo, Dumbbell):
        t = {
            "kind": "dumbbell",
            "left_hosts": topo.left_hosts,
            "right_hosts": topo.right_hosts,
            "access_link": _link(topo.access_rate, topo.access_delay, topo.access_buffer),
            "bottleneck_link": _link(topo.bottleneck_rate, topo.bottleneck_delay, topo.bottleneck_buffer),
            "nic_buffer": dict(topo.nic_buffer),
        }
    else:
        t = {
            "kind": "explicit",
            "nodes": [{"name": n.name, "kind": n.kind} for n in topo.nodes],
            "links": [{"a": ln.a, "b": ln.b, **_link(ln.rate, ln.delay, ln.buffer)} for ln in topo.links],
            "nic_buffer": dict(topo.nic_buffer),
        }
    vm_map = {vm.id: vm for vm in sc.vms}
    vms = [
        {
            "id": vm.id,
            "host": vm.host,
            "label": vm.label if vm.label is not None else (vm.cos or classify(vm.theta, vm.omega)).upper(),
            "theta_bps": vm.theta,
            "omega": float(vm.omega),
        }
        for vm in sc.vms
    ]
    vm_label = {v["id"]: v["label"] for v in vms}  # (not sc.vms.index: quadratic in flows x VMs)
    flows = []
    for f in sc.flows:
        if f.vm is not None:
            vm = vm_map[f.vm]
            theta, omega = vm.theta, vm.omega
            default_label = vm_label[vm.id]
        else:
            theta, omega = f.theta, f.omega
            default_label = (f.cos or classify(theta, omega)).upper()
        flows.append(
            {
                "id": f.id,
                "src": f.src,
                "dst": f.dst,
                "size_bytes": f.size,
                "start_ns": f.start,
                "theta_bps": theta,
                "omega": float(omega),
                "vm": f.vm,
                "label": f.label if f.label is not None else default_label,
                "changes": [
                    {"at_ns": c.at, "theta_bps": c.theta, "omega": float(c.omega)} for c in f.changes
                ],
            }
            | ({} if f.stop is None else {"stop_ns": f.stop})
        )
    arrivals = []
    for k, a in enumerate(sc.arrivals):
        cdf = load_cdf(a.workload)
        rate = arrival_rate_per_s(sc, a, cdf.mean_bytes)
        cos: dict[str, Any]
        if isinstance(a.cos, CosMix):
            cos = {
                "kind": "mix",
                "classes": [
                    {"label": c.label, "prob": c.prob, "theta_bps": c.theta, "omega": float(c.omega)}
                    for c in a.cos.classes
                ],
            }
        else:
            cos = {"kind": "by_vm"}
        arrivals.append(
            {
                "kind": "poisson",
                "id_prefix": a.id_prefix if a.id_prefix is not None else f"a{k}-",
                "rate_per_s": rate,
                "start_ns": a.start,
                "stop_ns": a.stop if a.stop is not None else sc.run.duration,
                "max_flows": a.max_flows,
                "sources": list(a.sources) if a.sources is not None else hosts(topo),
                "destination": a.destination
                or ("other_leaf" if isinstance(topo, LeafSpine) else "any_other_host"),
                "size_cdf": cdf.as_engine(),
                "cos": cos,
            }
        )
    tr = sc.transport
    cc: dict[str, Any] = (
        {"kind": "paccp", "rcos": float(sc.cc.rcos), "min_cwnd_pkts": float(sc.cc.min_cwnd)}
        if sc.cc.kind == "paccp"
        else {"kind": "reno"}
    )
    eng: dict[str, Any] = {
        "seed": sc.run.seed,
        "duration_ns": sc.run.duration,
        **tr.engine_sections(),
        "cc": cc,
        "topology": t,
        "routing": {"kind": sc.routing.kind},
        "vms": vms,
        "flows": flows,
        "arrivals": arrivals,
        "sampling": {
            "interval_ns": sc.run.sample_interval,
            "flows": sc.run.sample_flows,
            "cwnd": sc.run.sample_cwnd,
        },
    }
    if sc.softbw is not None:
        eng["queues"] = {"host": softbw_host_queues(sc, sc.softbw)}
    return sc.scheme.to_engine(sc, eng) if sc.scheme is not None else eng
