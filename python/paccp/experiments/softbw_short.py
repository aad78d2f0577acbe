"""``softbw-short``: short-flow completion time, SoftBW vs the ElasticSwitch-style rate limiters.

The slides' "short flows" experiment (SPEC section 10): SoftBW improves short-flow completion time by
2.8-4.5x over a rate-limit based scheme whose update interval (about 50 ms) is longer than a short flow.
The slides give no flow sizes or background; this setup is ours and stated here:

One sending host with a 1 Gb/s NIC on a non-blocking fabric (one switch, receivers on 10 Gb/s links) carries
3 VMs, each guaranteed B = 300 Mb/s (900 Mb/s sold: not over-committed). VM1 and VM2 each run 2 long-lived
TCP flows (to their own receivers) from t = 0; VM0 sends short TCP flows one at a time, one every 25 ms
(+ uniform 0-5 ms jitter) from t = 200 ms, sizes cycling 10 kB, 50 kB, 200 kB, each to the next of 4
receivers. Schemes: ``softbw`` (fulfilment selector), ``elasticswitch`` (per-VM-pair limiters, GP and RA every
50 ms) and ``best_effort`` (one FIFO, for context). TCP Reno with the schema's transport defaults. Each seed
draws the jitter and the long flows' start times; the FCT ratio (baseline mean FCT / SoftBW mean FCT, per
size class and over all short flows) is computed per seed and reported as a mean with a 95 % t-interval
over seeds.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from paccp.experiments import Experiment, ExperimentOptions, check, register
from paccp.scenario import parse_scenario, to_engine

EXP_ID = "softbw-short"
TITLE = "SoftBW short flows: FCT with SoftBW vs the ElasticSwitch-style rate limiters"
B_BPS = 300_000_000
SIZES = (10_000, 50_000, 200_000)
SCHEMES = ("softbw", "elasticswitch", "best_effort")
PAPER_RATIO = (2.8, 4.5)
N_RX_SHORT = 4


def nonblocking(n_rx: int) -> tuple[dict[str, Any], str, list[str]]:
    """(topology, sender, receivers): one 1 Gb/s sender and ``n_rx`` 10 Gb/s receivers on one switch."""
    nodes = [{"name": "s", "kind": "host"}, {"name": "sw", "kind": "switch"}]
    nodes += [{"name": f"r{i}", "kind": "host"} for i in range(n_rx)]
    links = [{"a": "s", "b": "sw", "rate": "1Gbit", "delay": "10us", "buffer": "200pkt"}]
    links += [
        {"a": f"r{i}", "b": "sw", "rate": "10Gbit", "delay": "10us", "buffer": "200pkt"} for i in range(n_rx)
    ]
    return {"kind": "explicit", "nodes": nodes, "links": links}, "s", [f"r{i}" for i in range(n_rx)]


def scheme_spec(scheme: str, vms: list[str], b_bps: int, spec: dict[str, Any]) -> dict[str, Any]:
    """``spec`` with the scheme's section: [softbw] strict B per VM, [scheme] elasticswitch B, or none."""
    if scheme == "softbw":
        spec["softbw"] = {
            "overcommit": 2.0,
            "guarantees": [{"vm": v, "kind": "strict", "rate": f"{b_bps}bit"} for v in vms],
        }
    elif scheme == "elasticswitch":
        spec["scheme"] = {"kind": "elasticswitch", "guarantee": f"{b_bps}bit"}
    return spec


def scenario(scheme: str, quick: bool, seed: int) -> dict[str, Any]:
    """The scenario dict of one (scheme, seed)."""
    dur_s = 0.7 if quick else 2.2
    topo, src, rx = nonblocking(N_RX_SHORT + 4)
    rng = np.random.default_rng([seed, 12])
    vms = [{"id": f"vm{v}", "host": src} for v in range(3)]
    flows: list[dict[str, Any]] = []
    for v in (1, 2):
        for j in range(2):
            flows.append(
                {
                    "id": f"vm{v}-long{j}",
                    "src": src,
                    "dst": rx[N_RX_SHORT + 2 * (v - 1) + j],
                    "vm": f"vm{v}",
                    "start": f"{int(rng.integers(0, 2000))}us",
                }
            )
    t, k = 0.2, 0
    while t < dur_s - 0.05:
        start_us = int((t + rng.uniform(0, 0.005)) * 1e6)
        flows.append(
            {
                "id": f"vm0-short{k}",
                "src": src,
                "dst": rx[k % N_RX_SHORT],
                "vm": "vm0",
                "size": f"{SIZES[k % len(SIZES)]}B",
                "start": f"{start_us}us",
            }
        )
        t += 0.025
        k += 1
    spec: dict[str, Any] = {
        "run": {
            "seed": seed,
            "duration": f"{int(dur_s * 1000)}ms",
            "warmup": "100ms",
            "sample_interval": "1ms",
        },
        "cc": {"kind": "reno"},
        "topology": topo,
        "vms": vms,
        "flows": flows,
    }
    return scheme_spec(scheme, [v["id"] for v in vms], B_BPS, spec)


def mean_ci(xs: list[float]) -> tuple[float, float, float]:
    """(mean, low, high) of a 95 % t-interval over ``xs`` (low = high = mean for one value)."""
    from scipy import stats

    a = np.asarray(xs, dtype=float)
    m = float(a.mean())
    if len(a) < 2:
        return m, m, m
    half = float(stats.t.ppf(0.975, len(a) - 1) * a.std(ddof=1) / np.sqrt(len(a)))
    return m, m - half, m + half


def plot(points: list[dict[str, Any]], ratios: dict[str, list[float]], out: Path) -> Path:
    """fct.png: mean short-flow FCT per size class and scheme (left); ES/SoftBW ratio per seed (right)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 3.8))
    w = 0.8 / len(SCHEMES)
    for j, scheme in enumerate(SCHEMES):
        means = []
        for size in SIZES:
            vals = [p["mean_fct_ms"][str(size)] for p in points if p["scheme"] == scheme]
            means.append(float(np.mean(vals)))
        a1.bar(np.arange(len(SIZES)) + j * w, means, w, label=scheme)
    a1.set_xticks(np.arange(len(SIZES)) + w, [f"{s // 1000} kB" for s in SIZES])
    a1.set_ylabel("mean FCT (ms)")
    a1.set_title("short flows of VM0 (mean over seeds)")
    a1.legend(fontsize=8)
    keys = ["all", *(str(s) for s in SIZES)]
    for j, key in enumerate(keys):
        ys = ratios[key]
        a2.scatter([j] * len(ys), ys, s=14)
        a2.plot([j - 0.2, j + 0.2], [np.mean(ys)] * 2, color="k")
    a2.axhspan(*PAPER_RATIO, color="grey", alpha=0.2, label="slides 2.8-4.5x")
    a2.axhline(1, color="grey", lw=0.6)
    a2.set_xticks(range(len(keys)), [k if k == "all" else f"{int(k) // 1000} kB" for k in keys])
    a2.set_ylabel("FCT ratio elasticswitch / softbw")
    a2.legend(fontsize=8)
    fig.tight_layout()
    path = out / "fct.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def run(opts: ExperimentOptions) -> dict[str, Any]:
    """All (scheme, seed) points; FCT per size class; the ES/SoftBW ratio with its CI over seeds."""
    from paccp.experiments._common import print_table, write_table
    from paccp.sim.rundir import flow_table, run_engine

    t0 = time.perf_counter()
    out = opts.out_dir / EXP_ID
    out.mkdir(parents=True, exist_ok=True)
    seeds = [opts.seed + i for i in range(3 if opts.quick else 8)]
    points: list[dict[str, Any]] = []
    for seed in seeds:
        for scheme in SCHEMES:
            sc = parse_scenario(scenario(scheme, opts.quick, seed), where=f"{EXP_ID} {scheme} seed {seed}")
            res, wall = run_engine(to_engine(sc), description=f"{EXP_ID} {scheme} seed {seed}")
            rows = [r for r in flow_table(sc, res) if r["id"].startswith("vm0-short")]
            unfinished = sum(r["fct_ns"] is None for r in rows)
            fct: dict[str, float] = {}
            for size in SIZES:
                xs = [r["fct_ns"] / 1e6 for r in rows if r["size_bytes"] == size and r["fct_ns"] is not None]
                fct[str(size)] = float(np.mean(xs)) if xs else float("nan")
            done = [r["fct_ns"] / 1e6 for r in rows if r["fct_ns"] is not None]
            fct["all"] = float(np.mean(done)) if done else float("nan")
            points.append(
                {
                    "scheme": scheme,
                    "seed": seed,
                    "short_flows": len(rows),
                    "unfinished": unfinished,
                    "mean_fct_ms": fct,
                    "wall_s": round(wall, 2),
                }
            )
    get = {(p["scheme"], p["seed"]): p for p in points}
    ratios: dict[str, list[float]] = {}
    for key in ["all", *(str(s) for s in SIZES)]:
        ratios[key] = [
            get[("elasticswitch", s)]["mean_fct_ms"][key] / get[("softbw", s)]["mean_fct_ms"][key]
            for s in seeds
        ]
    ci = {k: mean_ci(v) for k, v in ratios.items()}
    m, lo, hi = ci["all"]
    per_size = ", ".join(f"{int(k) // 1000} kB {ci[k][0]:.2f}x" for k in ratios if k != "all")
    checks = [
        check(
            f"short-flow FCT ratio elasticswitch / softbw (mean over {len(seeds)} seeds, 95 % CI)",
            f"{PAPER_RATIO[0]}-{PAPER_RATIO[1]}x",
            f"{m:.2f}x [{lo:.2f}, {hi:.2f}] ({per_size})",
            hi >= PAPER_RATIO[0] and lo <= PAPER_RATIO[1],
        ),
        check(
            "short flows complete faster with SoftBW than with the rate limiters (CI above 1)",
            "faster",
            f"CI low {lo:.2f}x",
            lo > 1.0,
        ),
    ]
    unfinished = sum(p["unfinished"] for p in points)
    checks.append(
        check("every short flow completes within the run", "-", f"{unfinished} unfinished", unfinished == 0)
    )
    summary = {
        "kind": "experiment",
        "experiment": EXP_ID,
        "title": TITLE,
        "quick": opts.quick,
        "points": points,
        "ratio": {
            k: {"per_seed": v, "mean": ci[k][0], "ci95": [ci[k][1], ci[k][2]]} for k, v in ratios.items()
        },
        "checks": checks,
        "wall_s": round(time.perf_counter() - t0, 2),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    plot(points, ratios, out)
    write_table(summary, out)
    print_table(summary)
    return summary


register(Experiment(id=EXP_ID, title=TITLE, run=run))
