"""``paccp bench datapath``: paccp (BE) against the kernel's reno on one bulk iperf3 flow over veth.

Two namespaces joined by a veth pair (no shaping: the flow is CPU-bound, which is what exposes the cost of
the BPF congestion control). Each run sets the sender's CC with ``iperf3 -C``. Reported per CC:
throughput, and CPU seconds per GB moved: ``cpu_s_per_gb`` from iperf3's own getrusage of sender and
receiver (user + system time of both processes), and ``machine_cpu_s_per_gb`` from /proc/stat (all CPUs'
busy time, includes softirq work but also anything else running on the shared machine). Runs alternate
reno/paccp; medians are reported.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from paccp.datapath.paccp import lifecycle
from paccp.datapath.paccp.testbed import testbed
from paccp.errors import EnvironmentUnsupported


def _cpu_busy_s() -> float:
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    vals = [int(x) for x in fields]
    idle = vals[3] + (vals[4] if len(vals) > 4 else 0)
    hz = float(os.sysconf("SC_CLK_TCK"))
    return (sum(vals[:8]) - idle) / hz


def run(duration_s: float, repeats: int = 3, gso: bool = True) -> dict[str, Any]:
    """Alternate reno and paccp runs ``repeats`` times each; return medians as a JSON-able dict."""
    if duration_s < 1:
        raise EnvironmentUnsupported("bench duration must be at least 1s")
    results: dict[str, list[dict[str, float]]] = {"reno": [], "paccp": []}
    with testbed() as net:
        net.add_node("a")
        net.add_node("b")
        net.link("a", "10.210.0.1/24", "b", "10.210.0.2/24", no_gso=not gso)
        net.spawn("b", ["iperf3", "-s", "-p", "5201"])
        net.wait_listening("b", 5201)
        for _ in range(repeats):
            for cc in ("reno", "paccp"):
                c0, t0 = _cpu_busy_s(), time.monotonic()
                res = net.exec(
                    "a", "iperf3", "-c", "10.210.0.2", "-p", "5201", "-t", f"{duration_s:g}", "-C", cc, "-J"
                )
                c1, t1 = _cpu_busy_s(), time.monotonic()
                doc = json.loads(res.stdout)
                got_cc = doc["end"].get("sender_tcp_congestion", cc)
                if got_cc != cc:
                    raise EnvironmentUnsupported(f"iperf3 ran {got_cc}, not {cc}")
                bps = float(doc["end"]["sum_received"]["bits_per_second"])
                nbytes = float(doc["end"]["sum_received"]["bytes"])
                secs = float(doc["end"]["sum_received"]["seconds"])
                cpu = doc["end"]["cpu_utilization_percent"]
                iperf_cpu_s = (float(cpu["host_total"]) + float(cpu["remote_total"])) / 100 * secs
                gb = max(1e-9, nbytes / 1e9)
                results[cc].append(
                    {
                        "throughput_bps": bps,
                        "cpu_s_per_gb": iperf_cpu_s / gb,
                        "machine_cpu_s_per_gb": (c1 - c0) / gb,
                        "wall_s": t1 - t0,
                    }
                )
    out: dict[str, Any] = {
        "bench": "datapath",
        "duration_s": duration_s,
        "repeats": repeats,
        "gso": gso,
        "loaded": lifecycle.is_loaded(),
    }
    for cc, runs in results.items():
        tp = sorted(r["throughput_bps"] for r in runs)
        cpu = sorted(r["cpu_s_per_gb"] for r in runs)
        mcpu = sorted(r["machine_cpu_s_per_gb"] for r in runs)
        out[cc] = {
            "throughput_bps": round(tp[len(tp) // 2]),
            "cpu_s_per_gb": round(cpu[len(cpu) // 2], 4),
            "machine_cpu_s_per_gb": round(mcpu[len(mcpu) // 2], 4),
            "best_throughput_bps": round(tp[-1]),
            "best_cpu_s_per_gb": round(cpu[0], 4),
            "runs": runs,
        }
    p, r = out["paccp"], out["reno"]
    out["throughput_ratio_paccp_over_reno"] = round(p["throughput_bps"] / r["throughput_bps"], 4)
    out["cpu_per_gb_ratio_paccp_over_reno"] = round(p["cpu_s_per_gb"] / r["cpu_s_per_gb"], 4)
    # best-of ratios are less sensitive to other load on a shared machine
    out["best_throughput_ratio"] = round(p["best_throughput_bps"] / r["best_throughput_bps"], 4)
    out["best_cpu_per_gb_ratio"] = round(p["best_cpu_s_per_gb"] / r["best_cpu_s_per_gb"], 4)
    return out
