"""``softbw-share``: 2 and 3 VMs guaranteed 450 Mb/s each on one 1 Gb/s port, different flow counts.

The slides' "bandwidth allocation" experiment. One sending host with a 1 Gb/s NIC carries 2 VMs (1 and 3
TCP flows) or 3 VMs (1, 2 and 4 TCP flows), each guaranteed 450 Mb/s (3 x 450 = 1,350 Mb/s: over-committed
1.35x). Every flow goes to its own receiver. Fabrics: ``nonblocking`` (the paper's assumption: one switch,
receivers on 10 Gb/s links, so the sender's port is the only bottleneck) and ``leafspine`` (our 2 x 2
leaf-spine with 1 Gb/s host links and 10 Gb/s fabric links; the sender in leaf 0, the receivers in leaf 1).
Schemes: ``softbw`` (per-VM queues at the sender's NIC served by the fulfilment selector),
``elasticswitch`` (the ElasticSwitch-style baseline: per-VM-pair rate limiters from guarantee partitioning
and rate allocation, both every 50 ms, feeding a FIFO NIC; docs/softbw.md) with B = 450 Mb/s per VM, and
``best_effort`` (one FIFO, per-flow TCP sharing). TCP: Reno with the scenario schema's transport defaults.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from paccp.experiments import Experiment, ExperimentOptions, check, register
from paccp.scenario import parse_scenario, to_engine

EXP_ID = "softbw-share"
TITLE = "SoftBW bandwidth allocation: 2 and 3 VMs x 450 Mb/s on 1 Gb/s, different flow counts"
B_BPS = 450_000_000
FLOWS = {2: [1, 3], 3: [1, 2, 4]}
SCHEMES = ("softbw", "elasticswitch", "best_effort")
FABRICS = ("nonblocking", "leafspine")


def scenario(n_vms: int, scheme: str, fabric: str, quick: bool, seed: int) -> dict[str, Any]:
    """The scenario dict of one point."""
    counts = FLOWS[n_vms]
    n_rx = sum(counts)
    dur, warm = ("400ms", "150ms") if quick else ("2s", "500ms")
    if fabric == "nonblocking":
        nodes = [{"name": "s", "kind": "host"}, {"name": "sw", "kind": "switch"}]
        nodes += [{"name": f"r{i}", "kind": "host"} for i in range(n_rx)]
        links = [{"a": "s", "b": "sw", "rate": "1Gbit", "delay": "10us", "buffer": "200pkt"}]
        links += [
            {"a": f"r{i}", "b": "sw", "rate": "10Gbit", "delay": "10us", "buffer": "200pkt"}
            for i in range(n_rx)
        ]
        topo: dict[str, Any] = {"kind": "explicit", "nodes": nodes, "links": links}
        src, rx = "s", [f"r{i}" for i in range(n_rx)]
    else:
        per_leaf = n_rx + 1
        topo = {
            "kind": "leaf_spine",
            "leaves": 2,
            "spines": 2,
            "hosts_per_leaf": per_leaf,
            "host_rate": "1Gbit",
            "fabric_rate": "10Gbit",
        }
        src, rx = "h0", [f"h{per_leaf + i}" for i in range(n_rx)]
    vms = [
        {"id": f"vm{v}", "host": src, "label": f"VM{v} ({c} flow{'s' if c > 1 else ''})"}
        for v, c in enumerate(counts)
    ]
    flows = []
    k = 0
    rng = np.random.default_rng([seed, n_vms])
    for v, c in enumerate(counts):
        for j in range(c):
            flows.append(
                {
                    "id": f"vm{v}-f{j}",
                    "src": src,
                    "dst": rx[k],
                    "vm": f"vm{v}",
                    "start": f"{int(rng.integers(0, 1000))}us",
                }
            )
            k += 1
    spec: dict[str, Any] = {
        "run": {"seed": seed, "duration": dur, "warmup": warm, "sample_interval": "1ms"},
        "cc": {"kind": "reno"},
        "topology": topo,
        "vms": vms,
        "flows": flows,
    }
    if scheme == "softbw":
        spec["softbw"] = {
            "overcommit": 2.0,
            "guarantees": [{"vm": f"vm{v}", "kind": "strict", "rate": f"{B_BPS}bit"} for v in range(n_vms)],
        }
    elif scheme == "elasticswitch":
        spec["scheme"] = {"kind": "elasticswitch", "guarantee": f"{B_BPS}bit"}
    return spec


def plot(points: list[dict[str, Any]], out: Path) -> Path:
    """share.png: per-VM rate per fabric, VM count and scheme, with the 450 Mb/s guarantee."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(FABRICS), figsize=(6 * len(FABRICS), 3.6), sharey=True, squeeze=False)
    for ax, fabric in zip(axes[0], FABRICS, strict=True):
        x = 0
        for p in (p for p in points if p["fabric"] == fabric):
            for v, r in enumerate(p["rate_bps"]):
                ax.bar(x, r / 1e6, color=f"C{v}", label=f"VM{v}" if x < 3 else None)
                ax.text(x, r / 1e6 + 10, str(p["flows"][v]), ha="center", fontsize=7)
                x += 1
            ax.text(
                x - len(p["rate_bps"]) / 2 - 0.5,
                -90,
                f"{p['vms']} VMs\n{p['scheme']}",
                ha="center",
                fontsize=7,
            )
            x += 1
        ax.axhline(B_BPS / 1e6, color="grey", ls="--", lw=0.8)
        ax.set_title(f"{fabric} (numbers: flows per VM)")
        ax.set_xticks([])
        ax.set_ylabel("rate (Mb/s, payload)")
    fig.tight_layout()
    path = out / "share.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def run(opts: ExperimentOptions) -> dict[str, Any]:
    """All points; summary with per-VM rates and fulfilments, checks against the slides."""
    from paccp.experiments._common import print_table, write_table
    from paccp.sim.rundir import run_engine, window_rates

    t0 = time.perf_counter()
    out = opts.out_dir / EXP_ID
    out.mkdir(parents=True, exist_ok=True)
    points: list[dict[str, Any]] = []
    for fabric in FABRICS:
        for n_vms in FLOWS:
            for scheme in SCHEMES:
                spec = scenario(n_vms, scheme, fabric, opts.quick, opts.seed)
                sc = parse_scenario(spec, where=f"{EXP_ID} {fabric} {n_vms} VMs {scheme}")
                res, wall = run_engine(to_engine(sc), description=f"{EXP_ID} {fabric} {n_vms} {scheme}")
                rates = window_rates(res, sc.run.warmup, sc.run.duration)
                per_vm = [sum(r for f, r in rates.items() if f.startswith(f"vm{v}-")) for v in range(n_vms)]
                points.append(
                    {
                        "fabric": fabric,
                        "vms": n_vms,
                        "scheme": scheme,
                        "flows": FLOWS[n_vms],
                        "rate_bps": per_vm,
                        "fulfilment": [r / B_BPS for r in per_vm],
                        "wall_s": round(wall, 2),
                    }
                )
    checks = []
    for fabric in FABRICS:
        get = {(p["vms"], p["scheme"]): p for p in points if p["fabric"] == fabric}
        two = get[(2, "softbw")]["rate_bps"]
        checks.append(
            check(
                f"[{fabric}] 2 VMs (1 and 3 flows): each gets at least 450 Mb/s with SoftBW (payload rate)",
                ">= 450 each",
                " / ".join(f"{r / 1e6:.0f}" for r in two) + " Mb/s",
                min(two) >= B_BPS,
            )
        )
        f3 = get[(3, "softbw")]["fulfilment"]
        spread = max(f3) / min(f3) - 1 if min(f3) > 0 else float("inf")
        checks.append(
            check(
                f"[{fabric}] 3 VMs (1, 2, 4 flows): fulfilments within 5 % of each other with SoftBW",
                "fair",
                " / ".join(f"{x:.3f}" for x in f3) + f" (spread {spread:.1%})",
                spread <= 0.05,
            )
        )
        es2 = get[(2, "elasticswitch")]["rate_bps"]
        checks.append(
            check(
                f"[{fabric}] 2 VMs: the ElasticSwitch-style limiters also give each at least 450 Mb/s",
                "guarantees met (sufficient bandwidth)",
                " / ".join(f"{r / 1e6:.0f}" for r in es2) + " Mb/s",
                min(es2) >= B_BPS,
            )
        )
        es3 = get[(3, "elasticswitch")]["fulfilment"]
        es_spread = max(es3) / min(es3) - 1 if min(es3) > 0 else float("inf")
        side = "; ".join(
            f"{sch} " + " / ".join(f"{r / 1e6:.0f}" for r in get[(3, sch)]["rate_bps"]) for sch in SCHEMES
        )
        checks.append(
            check(
                f"[{fabric}] 3 VMs (1, 2, 4 flows): ElasticSwitch-style limiters not fair (spread > 5 %)",
                "ES fails to achieve fairness",
                f"spread {es_spread:.1%} (Mb/s: {side})",
                es_spread > 0.05,
            )
        )
        be = get[(3, "best_effort")]["rate_bps"]
        checks.append(
            check(
                f"[{fabric}] 3 VMs best effort: rates follow flow counts (1:2:4)",
                "not fair",
                " / ".join(f"{r / 1e6:.0f}" for r in be) + " Mb/s",
                be[0] < be[1] < be[2],
            )
        )
    summary = {
        "kind": "experiment",
        "experiment": EXP_ID,
        "title": TITLE,
        "quick": opts.quick,
        "points": points,
        "checks": checks,
        "wall_s": round(time.perf_counter() - t0, 2),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    plot(points, out)
    write_table(summary, out)
    print_table(summary)
    return summary


register(Experiment(id=EXP_ID, title=TITLE, run=run))
