"""Simulator benchmarks (``paccp bench``): engine speed figures as JSON.

Benchmarks (each runs in a fresh Python subprocess so that its peak RSS is its own):

- ``a``: fig4a at full size (6 x 5 leaf-spine, 240 long-lived flows, paper routing) for 50 ms simulated;
- ``b``: the 240-host paper leaf-spine with Poisson arrivals of finite flows (WebSearch CDF, ECMP) at 50 %
  load (offered inter-rack traffic / total leaf-to-spine capacity) for 20 ms simulated;
- ``c``: the fig8 point (VBP, WebSearch, 80 % load, 240 hosts, >= 50,000 flows; workload area, minutes).
- ``scale`` (``--only scale``, not run by default): the same workload on four leaf-spine sizes,
  ``scale240`` (6 leaves x 40 hosts, 5 spines), ``scale1000`` (25 x 40, 10 spines), ``scale2500``
  (50 x 50, 10 spines) and ``scale10000`` (100 x 100, 20 spines): Poisson WebSearch arrivals at 30 % load
  (offered inter-rack traffic / leaf-to-spine capacity), 60/20/20 % BE / DS (omega 2) / MRG (theta
  1 Gb/s) flows, per-flow ECMP, paper links. The simulated time shrinks as the fabric grows (333, 40, 20,
  5 ms) so that every size offers about the same traffic (~8,700 flows) and processes a similar number of
  events; ``events_per_s`` of the sizes is what to compare (the cost per event as the network grows).
- ``workingset`` (``--only workingset``, not run by default): the scale workload at other loads on 240,
  2,500 and 10,000 hosts (simulated time inversely proportional to the load), which moves the number of
  packets in flight independently of the number of hosts; ``--plot FILE.png`` draws events per loop CPU
  second against peak packets in flight.

Figures per benchmark: ``events`` (engine events processed), ``events_per_s``, ``sim_s_per_wall_s``,
``wall_s`` (the engine run only, not the scenario build), ``cpu_s`` and ``events_per_cpu_s`` (the same
run's CPU time: less sensitive than wall time to other jobs on a shared machine), ``loop_cpu_s`` and
``events_per_loop_cpu_s`` (the event loop alone, timed between the engine's first and last progress
reports: the cost per event without the engine's own build and output, which grow with the topology),
``peak_rss_mb`` (``ru_maxrss`` of the subprocess, which includes the Python interpreter and
numpy/pyarrow), ``flows``, ``peak_packets_in_flight``, ``hosts`` and ``load``. ``scale_vs_240``
divides each scale size's ``events_per_loop_cpu_s`` by the 240-host one; ``definitions`` in the JSON
says what each figure is. With a ``scale`` or ``workingset`` benchmark the JSON also holds
``memory_latency_ns``: this machine's latency of a dependent load by working-set size (KiB), measured
before the benchmarks, which is what the cost per event of a large fabric depends on.
"""

from __future__ import annotations

import io
import json
import platform
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from paccp.errors import UserError


def _fig4a() -> dict[str, Any]:
    from paccp.experiments.longlived import build_scenario

    return build_scenario("fig4a", seed=1, duration_ns=50_000_000)


def _websearch() -> dict[str, Any]:
    return {
        "run": {"seed": 1, "duration": "20ms", "warmup": "5ms", "sample_flows": "none"},
        "topology": {"kind": "leaf_spine"},
        "routing": {"kind": "ecmp"},
        "arrivals": [{"workload": "websearch", "load": 0.5}],
    }


def _fig8_point() -> dict[str, Any]:
    from paccp.experiments._workload_lib import bench_fig8_scenario  # workload area

    return bench_fig8_scenario()


def _scale(
    leaves: int, hosts_per_leaf: int, spines: int, duration: str, load: float = 0.3
) -> Callable[[], dict[str, Any]]:
    def build() -> dict[str, Any]:
        return {
            "run": {"seed": 1, "duration": duration, "warmup": "0ms", "sample_flows": "none"},
            "topology": {
                "kind": "leaf_spine",
                "leaves": leaves,
                "spines": spines,
                "hosts_per_leaf": hosts_per_leaf,
            },
            "routing": {"kind": "ecmp"},
            "arrivals": [
                {
                    "workload": "websearch",
                    "load": load,
                    "cos": {
                        "kind": "mix",
                        "classes": [
                            {"label": "BE", "prob": 0.6},
                            {"label": "DS", "prob": 0.2, "omega": 2.0},
                            {"label": "MRG", "prob": 0.2, "theta": "1Gbit"},
                        ],
                    },
                }
            ],
        }

    return build


BENCHMARKS: dict[str, tuple[str, Callable[[], dict[str, Any]]]] = {
    "a": ("fig4a_full_50ms", _fig4a),
    "b": ("leafspine240_websearch_load50_20ms", _websearch),
    "c": ("fig8_vbp_websearch_load80_900ms", _fig8_point),
    "scale240": ("scale_240hosts_websearch30_333ms", _scale(6, 40, 5, "333ms")),
    "scale1000": ("scale_1000hosts_websearch30_40ms", _scale(25, 40, 10, "40ms")),
    "scale2500": ("scale_2500hosts_websearch30_20ms", _scale(50, 50, 10, "20ms")),
    "scale10000": ("scale_10000hosts_websearch30_5ms", _scale(100, 100, 20, "5ms")),
    # The working-set points: the scale workload at other loads (simulated time inversely proportional
    # to the load, so each point offers about the same traffic), which moves the number of packets in
    # flight without moving the number of hosts.
    "ws240_load10": ("ws_240hosts_websearch10_1000ms", _scale(6, 40, 5, "1000ms", 0.1)),
    "ws240_load60": ("ws_240hosts_websearch60_166ms", _scale(6, 40, 5, "166ms", 0.6)),
    "ws2500_load60": ("ws_2500hosts_websearch60_10ms", _scale(50, 50, 10, "10ms", 0.6)),
    "ws10000_load5": ("ws_10000hosts_websearch5_30ms", _scale(100, 100, 20, "30ms", 0.05)),
    "ws10000_load10": ("ws_10000hosts_websearch10_15ms", _scale(100, 100, 20, "15ms", 0.1)),
    "ws10000_load20": ("ws_10000hosts_websearch20_7500us", _scale(100, 100, 20, "7500us", 0.2)),
}
DEFAULT = ("a", "b", "c")
# What each figure of a benchmark means (also written into the JSON).
DEFINITIONS = {
    "events": "engine events processed (one per packet hop, timer, arrival, ...)",
    "wall_s": "wall seconds of engine.run (the engine's scenario build, event loop and output)",
    "cpu_s": "CPU seconds of the same engine.run",
    "events_per_s": "events / wall_s",
    "events_per_cpu_s": "events / cpu_s",
    "loop_wall_s": "wall seconds of the event loop alone (between the engine's first and last progress call)",
    "loop_cpu_s": "CPU seconds of the event loop alone",
    "events_per_loop_cpu_s": "events / loop_cpu_s: the cost per event, the same definition at every size",
    "peak_rss_mb": "ru_maxrss of the benchmark's own subprocess (Python, numpy and pyarrow included)",
    "hosts": "hosts of the leaf-spine fabric (null for other topologies)",
    "load": "offered load of the benchmark's first arrival process (null without arrivals)",
    "memory_latency_ns": "mean ns of one dependent load chasing a random cycle through a buffer of the given "
    "KiB, measured once before the benchmarks (the machine's L2 / L3 / DRAM steps; not a simulator figure)",
    "peak_packets_in_flight": "most packets sent and not yet delivered or dropped at any instant (what sets "
    "the engine's working set: each holds a slot of the engine's packet slab, and its channels and flow are "
    "touched per hop)",
}
# The figure `scale_vs_240` compares (least sensitive to other jobs and to the build and output steps).
SCALE_METRIC = "events_per_loop_cpu_s"
# Loads timed per working-set size of the memory-latency curve (the sizes are the engine's,
# `paccp_sim::probe::SIZES_KIB`): about 1.5 s in all on a machine whose memory latency is ~150 ns.
MEMORY_LOADS = 1_000_000
GROUPS = {
    "scale": ("scale240", "scale1000", "scale2500", "scale10000"),
    "workingset": (
        "ws240_load10",
        "scale240",
        "ws240_load60",
        "scale2500",
        "ws2500_load60",
        "ws10000_load5",
        "ws10000_load10",
        "ws10000_load20",
        "scale10000",
    ),
}


def run_one(key: str) -> dict[str, Any]:
    """Run one benchmark in this process and return its figures."""
    from paccp.scenario import parse_scenario, to_engine
    from paccp.sim import engine

    name, build = BENCHMARKS[key]
    scn = build()
    eng = to_engine(parse_scenario(scn, where=name))
    arrivals = scn.get("arrivals") or [{}]
    marks: list[tuple[float, float]] = []

    def on_progress(done: int, total: int) -> None:
        # The engine reports (0, total) just before its event loop and (total, total) just after it.
        if not marks or done >= total:
            marks.append((time.perf_counter(), time.process_time()))

    t0, c0 = time.perf_counter(), time.process_time()
    res = engine.run(eng, progress=on_progress)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    loop_wall, loop_cpu = marks[-1][0] - marks[0][0], marks[-1][1] - marks[0][1]
    events = int(res.stats.get("events", 0))
    sim_s = eng["duration_ns"] / 1e9
    topo = eng.get("topology", {})
    hosts = (
        topo.get("leaves", 0) * topo.get("hosts_per_leaf", 0) if topo.get("kind") == "leaf_spine" else None
    )
    return {
        "name": name,
        "hosts": hosts,
        "load": arrivals[0].get("load"),
        "events": events,
        "events_per_s": events / wall if wall > 0 else None,
        "sim_s": sim_s,
        "sim_s_per_wall_s": sim_s / wall if wall > 0 else None,
        "wall_s": wall,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        "flows": res.flows.num_rows,
        "packets_sent": int(res.stats.get("packets_sent", 0)),
        "peak_packets_in_flight": int(res.stats.get("peak_packets_in_flight", 0)),
        "cpu_s": cpu,
        "events_per_cpu_s": events / cpu if cpu > 0 else None,
        "loop_wall_s": loop_wall,
        "loop_cpu_s": loop_cpu,
        "events_per_loop_cpu_s": events / loop_cpu if loop_cpu > 0 else None,
    }


def memory_curve(kib: tuple[int, ...] | None = None, loads: int = MEMORY_LOADS) -> dict[str, float]:
    """This machine's memory latency by working-set size: ``{KiB: ns per dependent load}`` (keys are
    strings, for JSON), at the engine's sizes unless ``kib`` is given."""
    from paccp.sim.engine import memory_latency_ns, memory_sizes_kib

    sizes = kib if kib is not None else memory_sizes_kib()
    return {str(k): round(memory_latency_ns(k * 1024, loads), 1) for k in sizes}


def median_figures(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One benchmark's figures over its rounds: the median of every numeric figure (the first run's
    value for the others), and with several rounds each round's ``events_per_loop_cpu_s`` as well."""
    import statistics

    out = dict(runs[0])
    for key, first in runs[0].items():
        values = [r.get(key) for r in runs]
        numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
        if isinstance(first, (int, float)) and len(numbers) == len(values):
            out[key] = statistics.median(numbers)
    if len(runs) > 1:
        out["rounds"] = len(runs)
        out[f"{SCALE_METRIC}_rounds"] = [r.get(SCALE_METRIC) for r in runs]
    return out


def run_cli(only: str = "", out: str = "", plot: str = "", rounds: int = 1) -> None:
    """Run the selected benchmarks (comma-separated keys or groups, default a, b, c), each in a subprocess;
    print JSON. ``scale`` is the group of the four scale sizes, ``workingset`` the scale workload at several
    loads on 240, 2,500 and 10,000 hosts; ``plot`` writes a PNG of the cost per event against the packets
    in flight (:func:`plot_cost`); ``rounds`` repeats every benchmark, interleaved, and reports medians
    (:func:`median_figures`)."""
    if rounds < 1:
        raise UserError(f"--rounds: must be >= 1, got {rounds}")
    asked = [k.strip() for k in only.split(",") if k.strip()] if only else list(DEFAULT)
    keys: list[str] = []
    for k in asked:
        if k in GROUPS:
            keys += GROUPS[k]
        elif k in BENCHMARKS:
            keys.append(k)
        else:
            known = ", ".join([*BENCHMARKS, *GROUPS])
            raise UserError(f"--only: unknown benchmark {k!r} (known: {known})")
    from paccp.common.outdir import check_out_file

    for path, option in ((out, "--out"), (plot, "--plot")):
        if path:
            check_out_file(Path(path), option)  # before the benchmarks run, not after
    memory: dict[str, float] | None = None
    if any(k in GROUPS["scale"] or k in GROUPS["workingset"] for k in keys):
        print("bench: memory latency by working-set size ...", file=sys.stderr, flush=True)
        # In a subprocess too: a child inherits its parent's peak RSS, and the probe's buffers reach
        # 128 MiB, which would show in every benchmark's peak_rss_mb.
        memory = _in_subprocess(MEMORY_CURVE_ARG, "the memory-latency probe")
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in keys}
    for r in range(rounds):
        for k in keys:  # rounds interleave the benchmarks, so a change in the machine's load hits all
            where = f" (round {r + 1}/{rounds})" if rounds > 1 else ""
            print(f"bench {k}: {BENCHMARKS[k][0]}{where} ...", file=sys.stderr, flush=True)
            runs[k].append(_in_subprocess(k, f"benchmark {k}"))
    results = {k: median_figures(v) for k, v in runs.items()}
    doc: dict[str, Any] = {
        "simulator": results,
        "machine": {
            "python": platform.python_version(),
            "cpu_count": _cpu_count(),
            "platform": platform.platform(),
        },
    }
    sizes = [k for k in GROUPS["scale"] if k in results]
    if len(sizes) > 1:
        base = results[sizes[0]][SCALE_METRIC]
        doc["scale_vs_240"] = {k: results[k][SCALE_METRIC] / base for k in sizes if base}
        doc["scale_metric"] = f"{SCALE_METRIC}: {DEFINITIONS[SCALE_METRIC]}"
    if memory is not None:
        doc["memory_latency_ns"] = memory
    doc["definitions"] = DEFINITIONS
    doc["load_average"] = _load_average()
    text = json.dumps(doc, indent=2, sort_keys=True)
    print(text)
    if out:
        from paccp.common.outdir import write_text_atomic

        write_text_atomic(Path(out), text + "\n")
    if plot:
        plot_cost(results, Path(plot), load_average=doc["load_average"])


def _in_subprocess(arg: str, what: str) -> Any:
    """``python -m paccp.sim.bench ARG`` in a fresh interpreter (its own peak RSS); its JSON output."""
    proc = subprocess.run(
        [sys.executable, "-m", "paccp.sim.bench", arg], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise UserError(f"{what} failed: {tail}")
    return json.loads(proc.stdout)


def plot_cost(results: dict[str, Any], path: Path, load_average: list[float] | None = None) -> None:
    """Write a PNG of events per loop CPU second (M) against peak packets in flight (log scale), one
    series per host count, each point labelled with its offered load: whether the cost per event
    follows the fabric's size or its working set."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from paccp.common.outdir import write_bytes_atomic

    points = [
        (r["hosts"], r["peak_packets_in_flight"], r[SCALE_METRIC] / 1e6, r.get("load"))
        for r in results.values()
        if r.get("hosts") and r.get("peak_packets_in_flight") and r.get(SCALE_METRIC)
    ]
    if not points:
        raise UserError(
            "--plot: no leaf-spine benchmark with packets in flight was run (try --only workingset)"
        )
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for hosts in sorted({p[0] for p in points}):
        mine = sorted((x, y, load) for h, x, y, load in points if h == hosts)
        ax.plot([p[0] for p in mine], [p[1] for p in mine], marker="o", label=f"{hosts:,} hosts")
        for x, y, load in mine:
            if load is not None:
                ax.annotate(f"{load:.0%}", (x, y), textcoords="offset points", xytext=(4, 5), fontsize=7)
    ax.set_xscale("log")
    ax.set_xlabel("peak packets in flight")
    ax.set_ylabel("M events per loop CPU second")
    ax.set_ylim(bottom=0)
    title = "Engine cost per event vs working set"
    rounds = max(int(r.get("rounds", 1)) for r in results.values())
    notes = [f"median of {rounds} runs"] if rounds > 1 else []
    if load_average:
        notes.append(f"load avg {load_average[0]}")
    if notes:
        title += f" ({', '.join(notes)})"
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    write_bytes_atomic(path, buf.getvalue())


def _load_average() -> list[float] | None:
    """The machine's 1/5/15-minute load averages at the end (benchmarks share the machine)."""
    import os

    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def _cpu_count() -> int | None:
    import os

    return os.cpu_count()


MEMORY_CURVE_ARG = "--memory-curve"

if __name__ == "__main__":
    print(json.dumps(memory_curve() if sys.argv[1] == MEMORY_CURVE_ARG else run_one(sys.argv[1])))
