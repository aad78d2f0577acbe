"""``softbw-converge``: VMs join and leave; how fast the per-VM rates settle (TCP and UDP).

The slides' "fast convergence" experiment: SoftBW converges in about 20 ms and the throughput is stable, for
TCP and UDP. The slides do not give the timeline; ours: one 1 Gb/s sending host on a non-blocking fabric with
3 VMs, each guaranteed B = 300 Mb/s. VM0 sends from t = 0 to the end; VM1 joins at T/5 and VM2 at 2T/5; VM1
leaves at 3T/5 and VM2 at 4T/5 (T = 2 s, 1 s with ``--quick``). Traffic per VM: ``tcp`` = one TCP Reno
flow, or ``udp`` = one constant-rate flow at 600 Mb/s (above B: the VMs contend), without host back-pressure
(what does not fit the host queue is dropped; a blocked sender would catch up in bursts later).
A leaving TCP VM's flow carries the bytes of an equal share of the port until its leave time, a UDP one its
rate's bytes (it stops sending at the leave time); the event is when its last byte arrives (the end of its
last 1 ms sample with traffic).
Schemes: ``softbw`` and, for comparison, ``elasticswitch`` (limiters updated every 50 ms).

**Convergence time** (our definition): per-VM rates are sampled every 1 ms and smoothed over 5 ms (moving
mean). After an event at t_e, with the next event at t_n, each active VM's steady rate is its mean over the
second half of [t_e, t_n). The convergence time is the smallest d such that from t_e + d to t_n every active
VM's smoothed rate stays within 10 % of its steady rate (or within 10 Mb/s, whichever is larger). It is the
epoch length when that never happens (reported as not converged).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from paccp.experiments import Experiment, ExperimentOptions, check, register
from paccp.experiments.softbw_short import nonblocking, scheme_spec
from paccp.scenario import parse_scenario, to_engine

EXP_ID = "softbw-converge"
TITLE = "SoftBW convergence: VMs join and leave, TCP and UDP"
B_BPS = 300_000_000
UDP_BPS = 600_000_000
PORT_BPS = 1_000_000_000
SCHEMES = ("softbw", "elasticswitch")
TRAFFIC = ("tcp", "udp")
SMOOTH_MS = 5
TOL = 0.10
TOL_FLOOR_BPS = 10_000_000
PAPER_MS = 20.0


def timeline(quick: bool) -> tuple[int, dict[str, tuple[int, int | None]]]:
    """(duration ns, VM -> (join ns, leave ns or None))."""
    t = 1_000_000_000 if quick else 2_000_000_000
    f = t // 5
    return t, {"vm0": (0, None), "vm1": (f, 3 * f), "vm2": (2 * f, 4 * f)}


def engine_json(scheme: str, traffic: str, quick: bool, seed: int) -> tuple[Any, dict[str, Any]]:
    """(parsed scenario, engine JSON) of one point."""
    dur, tl = timeline(quick)
    topo, src, rx = nonblocking(3)
    flows: list[dict[str, Any]] = []
    for k, (vm, (join, leave)) in enumerate(tl.items()):
        flow: dict[str, Any] = {"id": f"{vm}-f", "src": src, "dst": rx[k], "vm": vm, "start": f"{join}ns"}
        if leave is not None:
            # TCP: the bytes of an equal share of the port up to the leave time; UDP: its rate's bytes
            rate = UDP_BPS if traffic == "udp" else PORT_BPS // 3
            flow["size"] = f"{rate * (leave - join) // 8_000_000_000}B"
        flows.append(flow)
    spec: dict[str, Any] = {
        "run": {
            "seed": seed,
            "duration": f"{dur}ns",
            "warmup": "0ns",
            "sample_interval": "1ms",
            "sample_flows": "all",
        },
        "cc": {"kind": "reno"},
        # UDP: a full host queue drops (a sender blocked by back-pressure would catch up in bursts later)
        "transport": {"host_backpressure": traffic == "tcp"},
        "topology": topo,
        "vms": [{"id": vm, "host": src} for vm in tl],
        "flows": flows,
    }
    sc = parse_scenario(scheme_spec(scheme, list(tl), B_BPS, spec), where=f"{EXP_ID} {scheme} {traffic}")
    eng = to_engine(sc)
    if traffic == "udp":
        for f in eng["flows"]:
            f["cbr_bps"] = UDP_BPS
            if f["size_bytes"] is None:
                f["size_bytes"] = UDP_BPS * dur // 8_000_000_000 + 1
    return sc, eng


def convergence(
    times_s: np.ndarray, rates: dict[str, np.ndarray], events: list[tuple[float, str]], end_s: float
) -> list[dict[str, Any]]:
    """Convergence time after each event (module docstring) from smoothed per-VM rates."""
    kernel = np.ones(SMOOTH_MS) / SMOOTH_MS
    smooth = {vm: np.convolve(r, kernel, mode="same") for vm, r in rates.items()}
    out = []
    bounds = [t for t, _ in events] + [end_s]
    for i, (t_e, what) in enumerate(events):
        t_n = bounds[i + 1]
        win = (times_s > t_e) & (times_s <= t_n - SMOOTH_MS / 2000)
        half = (times_s > (t_e + t_n) / 2) & (times_s <= t_n)
        idx = np.flatnonzero(win)
        ok = np.ones(len(idx), dtype=bool)
        steady: dict[str, float] = {}
        for vm, r in rates.items():
            m = float(r[half].mean())
            if m < TOL_FLOOR_BPS:
                continue  # not active in this epoch
            steady[vm] = m
            ok &= np.abs(smooth[vm][idx] - m) <= max(TOL * m, TOL_FLOOR_BPS)
        # the first sample from which every later one is within the band
        bad = np.flatnonzero(~ok)
        first = 0 if len(bad) == 0 else int(bad[-1]) + 1
        converged = first < len(idx)
        d_ms = (times_s[idx[first]] - t_e) * 1000 if converged else (t_n - t_e) * 1000
        out.append(
            {
                "event": what,
                "at_s": t_e,
                "convergence_ms": float(d_ms),
                "converged": bool(converged),
                "steady_mbps": {vm: m / 1e6 for vm, m in steady.items()},
            }
        )
    return out


def plot(series: list[dict[str, Any]], out: Path) -> Path:
    """rates.png: per-VM rate over time (5 ms mean), one panel per scheme and traffic."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(SCHEMES), len(TRAFFIC), figsize=(11, 6), sharex=True, squeeze=False)
    for s in series:
        ax = axes[SCHEMES.index(s["scheme"])][TRAFFIC.index(s["traffic"])]
        t = np.asarray(s["t_s"])
        kernel = np.ones(SMOOTH_MS) / SMOOTH_MS
        for vm, r in s["rates"].items():
            ax.plot(t, np.convolve(np.asarray(r), kernel, mode="same") / 1e6, lw=0.8, label=vm)
        for e in s["events"]:
            ax.axvline(e["at_s"], color="grey", lw=0.5, ls=":")
        conv = ", ".join(f"{e['convergence_ms']:.0f}" for e in s["events"])
        ax.set_title(f"{s['scheme']} {s['traffic']}: converged in {conv} ms", fontsize=9)
        ax.set_ylabel("Mb/s")
        ax.legend(fontsize=7)
    for ax in axes[-1]:
        ax.set_xlabel("time (s)")
    fig.tight_layout()
    path = out / "rates.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def run(opts: ExperimentOptions) -> dict[str, Any]:
    """Every (scheme, traffic) point; convergence after each join and leave; checks against ~20 ms."""
    from paccp.experiments._common import print_table, write_table
    from paccp.sim.rundir import run_engine, sample_rates

    t0 = time.perf_counter()
    out = opts.out_dir / EXP_ID
    out.mkdir(parents=True, exist_ok=True)
    dur, tl = timeline(opts.quick)
    points: list[dict[str, Any]] = []
    series: list[dict[str, Any]] = []
    for scheme in SCHEMES:
        for traffic in TRAFFIC:
            _, eng = engine_json(scheme, traffic, opts.quick, opts.seed)
            res, wall = run_engine(eng, description=f"{EXP_ID} {scheme} {traffic}")
            times, ids, r = sample_rates(res)
            rates = {vm: r[ids.index(f"{vm}-f")] for vm in tl}
            events: list[tuple[float, str]] = []
            for vm, (join, leave) in tl.items():
                if join > 0:
                    events.append((join / 1e9, f"{vm} joins"))
                if leave is not None:
                    # it leaves when its last byte arrives: the end of its last sample with traffic
                    last = np.flatnonzero(rates[vm] > 0)
                    events.append((float(times[last[-1]]) if len(last) else dur / 1e9, f"{vm} leaves"))
            events.sort()
            conv = convergence(times, rates, events, dur / 1e9)
            points.append({"scheme": scheme, "traffic": traffic, "events": conv, "wall_s": round(wall, 2)})
            series.append(
                {
                    "scheme": scheme,
                    "traffic": traffic,
                    "t_s": times.tolist(),
                    "rates": {vm: x.tolist() for vm, x in rates.items()},
                    "events": conv,
                }
            )
    checks = []
    for p in points:
        worst = max(e["convergence_ms"] for e in p["events"])
        allc = all(e["converged"] for e in p["events"])
        ours = (
            " / ".join(
                f"{e['event']} {e['convergence_ms']:.0f}" + ("" if e["converged"] else " (not converged)")
                for e in p["events"]
            )
            + " ms"
        )
        if p["scheme"] == "softbw":
            checks.append(
                check(
                    f"SoftBW {p['traffic'].upper()}: every join and leave converges within about 20 ms "
                    "(we accept <= 2x, 40 ms)",
                    f"~{PAPER_MS:.0f} ms",
                    ours,
                    allc and worst <= 2 * PAPER_MS,
                )
            )
        else:
            checks.append(
                check(
                    f"ElasticSwitch-style {p['traffic'].upper()}: slowest convergence above SoftBW's "
                    "(slides: limiters updated every ~50 ms; an epoch's length = never converged)",
                    "slower than SoftBW",
                    ours,
                    worst
                    > max(
                        e["convergence_ms"]
                        for q in points
                        if q["scheme"] == "softbw" and q["traffic"] == p["traffic"]
                        for e in q["events"]
                    ),
                )
            )
    summary = {
        "kind": "experiment",
        "experiment": EXP_ID,
        "title": TITLE,
        "quick": opts.quick,
        "definition": "smallest d after an event from which every active VM's 5 ms mean rate stays within "
        "10 % (or 10 Mb/s) of its mean over the second half of the epoch",
        "points": points,
        "checks": checks,
        "wall_s": round(time.perf_counter() - t0, 2),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    plot(series, out)
    write_table(summary, out)
    print_table(summary)
    return summary


register(Experiment(id=EXP_ID, title=TITLE, run=run))
