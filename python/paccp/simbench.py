"""Simulator benchmarks (``paccp bench``): engine speed figures as JSON.

Benchmarks (each runs in a fresh Python subprocess so that its peak RSS is its own):

- ``a``: fig4a at full size (6 x 5 leaf-spine, 240 long-lived flows, paper routing) for 50 ms simulated;
- ``b``: the 240-host paper leaf-spine with Poisson arrivals of finite flows (WebSearch CDF, ECMP) at 50 %
  load (offered inter-rack traffic / total leaf-to-spine capacity) for 20 ms simulated;
- ``c``: the fig8 point (VBP, WebSearch, 80 % load, 240 hosts, >= 50,000 flows; workload area, minutes).

Figures per benchmark: ``events`` (engine events processed), ``events_per_s``, ``sim_s_per_wall_s``,
``wall_s`` (the engine run only, not the scenario build), ``peak_rss_mb`` (``ru_maxrss`` of the
subprocess, which includes the Python interpreter and numpy/pyarrow), ``flows``.
"""

from __future__ import annotations

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
    from paccp.experiments.workload import bench_fig8_scenario  # workload area

    return bench_fig8_scenario()


BENCHMARKS: dict[str, tuple[str, Callable[[], dict[str, Any]]]] = {
    "a": ("fig4a_full_50ms", _fig4a),
    "b": ("leafspine240_websearch_load50_20ms", _websearch),
    "c": ("fig8_vbp_websearch_load80_900ms", _fig8_point),
}


def run_one(key: str) -> dict[str, Any]:
    """Run one benchmark in this process and return its figures."""
    from paccp import engine
    from paccp.scenario import parse_scenario, to_engine

    name, build = BENCHMARKS[key]
    eng = to_engine(parse_scenario(build(), where=name))
    t0 = time.perf_counter()
    res = engine.run(eng)
    wall = time.perf_counter() - t0
    events = int(res.stats.get("events", 0))
    sim_s = eng["duration_ns"] / 1e9
    return {
        "name": name,
        "events": events,
        "events_per_s": events / wall if wall > 0 else None,
        "sim_s": sim_s,
        "sim_s_per_wall_s": sim_s / wall if wall > 0 else None,
        "wall_s": wall,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        "flows": res.flows.num_rows,
        "packets_sent": int(res.stats.get("packets_sent", 0)),
    }


def run_cli(only: str = "", out: str = "") -> None:
    """Run the selected benchmarks (comma-separated keys, default all), each in a subprocess; print JSON."""
    keys = [k.strip() for k in only.split(",") if k.strip()] if only else list(BENCHMARKS)
    for k in keys:
        if k not in BENCHMARKS:
            raise UserError(f"--only: unknown benchmark {k!r} (known: {', '.join(BENCHMARKS)})")
    if out:
        from paccp.outdir import check_out_file

        check_out_file(Path(out))  # before the benchmarks run, not after
    results: dict[str, Any] = {}
    for k in keys:
        print(f"bench {k}: {BENCHMARKS[k][0]} ...", file=sys.stderr, flush=True)
        proc = subprocess.run(
            [sys.executable, "-m", "paccp.simbench", k], capture_output=True, text=True, check=False
        )
        if proc.returncode != 0:
            tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise UserError(f"benchmark {k} failed: {tail}")
        results[k] = json.loads(proc.stdout)
    doc = {
        "simulator": results,
        "machine": {
            "python": platform.python_version(),
            "cpu_count": _cpu_count(),
            "platform": platform.platform(),
        },
    }
    text = json.dumps(doc, indent=2, sort_keys=True)
    print(text)
    if out:
        from paccp.outdir import write_text_atomic

        write_text_atomic(Path(out), text + "\n")


def _cpu_count() -> int | None:
    import os

    return os.cpu_count()


if __name__ == "__main__":
    print(json.dumps(run_one(sys.argv[1])))
