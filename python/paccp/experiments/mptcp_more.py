"""The MPTCP BG/WC experiments on coupling, pauses and finite connections: ``mptcp-cc`` (Fig. 3),
``mptcp-wc`` (Fig. 13) and ``mptcp-clos`` (Figs. 18-20).

They run on the engine's connection layer (``crates/paccp-sim/src/transport/conn/``), like every
``mptcp_bgwc`` run: a flow is a connection over its BG and WC subflows; coupled controllers (LIA, OLIA)
see the other subflows' windows; a finite connection completes when its stream is delivered in order; a
subflow's retransmission timeout reinjects its unacknowledged data on another subflow; ``stop`` ends a
connection's stream. Setups, the paper's numbers and the scenario builders are in :mod:`.mptcp_bgwc`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from paccp.experiments import Experiment, ExperimentOptions, register
from paccp.experiments import mptcp_bgwc as E
from paccp.experiments import mptcp_checks as mc
from paccp.experiments.mptcp_measure import Measured
from paccp.traffic import mapreduce as mr

CCS = ("reno", "lia", "olia")  # mptcp-cc: uncoupled Reno (the paper's choice) vs the coupled ones
CC_SERVERS = ("S1", "S3", "S4")


def _bars(path: Path, title: str, groups: dict[str, dict[str, float]], ylabel: str) -> None:
    """A grouped bar chart: one group per key of ``groups``, one bar per inner key."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(groups)
    inner = sorted({k for g in groups.values() for k in g})
    x = np.arange(len(names))
    w = 0.8 / max(1, len(inner))
    fig, ax = plt.subplots(figsize=(6, 3.2), dpi=100)
    for k, key in enumerate(inner):
        ax.bar(x + k * w - 0.4 + w / 2, [groups[n].get(key, 0.0) for n in names], w, label=key)
    ax.set_xticks(x, names)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)


def run_cc(opts: ExperimentOptions) -> dict[str, Any]:
    """mptcp-cc (Fig. 3): S1, S3, S4 with 100 / 200 / 300 Mb/s on one link; WC subflows under uncoupled Reno,
    LIA and OLIA (coupled over each connection's BG and WC subflows); no fair-WC policy."""
    out = opts.out_dir / "mptcp-cc"
    g = {f"vm{s}": float(v) for s, v in E.PAPER["mptcp-cc"].numbers["guarantee_mbps"].items()}
    measured: dict[str, Any] = {}
    wc_by_cc: dict[str, dict[str, float]] = {}
    checks: list[dict[str, Any]] = []
    for cc in CCS:
        m: Measured = E._measure(
            E.cc_scenario(cc, quick=opts.quick, seed=opts.seed), out, cc, f"mptcp-cc {cc}", g
        )
        wc = {s: m.rate(f"vm{s}", "wc") for s in CC_SERVERS}
        bg = {s: m.rate(f"vm{s}", "bg") for s in CC_SERVERS}
        wc_by_cc[cc] = wc
        measured[cc] = {
            "wc": wc,
            "bg": bg,
            "wc_cv_over_time": _cv_over_time(m, [f"vm{s}" for s in CC_SERVERS]),
            "wall_s": m.wall_s,
        }
        spare = E.LINK_PAYLOAD_MBPS - sum(bg.values())
        checks += mc.checks_cc(cc, wc, spare_mbps=spare)
        low = min(bg[s] / g[f"vm{s}"] for s in CC_SERVERS)
        checks.append(
            mc.check(f"{cc}: guarantees held (BG >= 95 % of B_g)", "held", f"worst {low:.1%}", low >= 0.95)
        )
    _bars(out / "wc_by_cc.png", "mptcp-cc: WC Mb/s per server (Fig. 3)", wc_by_cc, "WC Mb/s")
    return E._finish("mptcp-cc", opts, measured, checks)


def _cv_over_time(m: Measured, vms: list[str]) -> dict[str, float]:
    """Per VM: coefficient of variation of its WC rate over the samples after warm-up (how erratic)."""
    out = {}
    n = m.times_s.size
    first = n // 10
    for vm in vms:
        s = m.series.get((vm, "wc"))
        if s is None or s[first:].size == 0 or s[first:].mean() <= 0:
            out[vm] = 0.0
            continue
        out[vm] = float(s[first:].std() / s[first:].mean())
    return out


# ------------------------------------------------------------------------------------------------------
# mptcp-wc


def regain_s(m: Measured, vm: str, target: float, after_s: float) -> float | None:
    """Seconds from ``after_s`` until the VM's BG rate first reaches ``target`` (None: never)."""
    s = m.series.get((vm, "bg"))
    if s is None:
        return None
    for t, v in zip(m.times_s, s, strict=True):
        if t > after_s and v >= target:
            return float(t - after_s)
    return None


def run_wc(opts: ExperimentOptions) -> dict[str, Any]:
    """mptcp-wc (Fig. 13): mptcp-bg's setup with S2 silent from 50 s to 80 s of 110 s (compressed)."""
    out = opts.out_dir / "mptcp-wc"
    g = {f"vm{i}": float(v) for i, v in enumerate(E.PAPER["mptcp-bg"].numbers["guarantee_mbps"].values(), 1)}
    dur = E.QUICK_S if opts.quick else E.FULL_S
    a, b = (f * dur for f in E.WC_PAUSE)
    settle = dur / 22  # 5 s of the figure's 110 s
    m = E._measure(E.wc_scenario(quick=opts.quick, seed=opts.seed), out, "run", "mptcp-wc", g)
    phases = {"before": (dur / 10, a), "gap": (a + settle, b), "after": (b + settle, dur)}
    others = ["vm1", "vm3", "vm4"]
    rate: dict[str, dict[str, dict[str, float]]] = {
        ph: {vm: {c: m.window_mean(vm, c, lo, hi) for c in ("bg", "wc")} for vm in g}
        for ph, (lo, hi) in phases.items()
    }
    s2_before = rate["before"]["vm2"]["bg"] + rate["before"]["vm2"]["wc"]
    taken = sum(rate["gap"][vm]["wc"] - rate["before"][vm]["wc"] for vm in others)
    back = regain_s(m, "vm2", 0.95 * g["vm2"], b)
    quick_s = dur / 110  # one second of the testbed's time
    checks = [
        mc.check(
            "the others' WC subflows take the bandwidth S2 leaves idle (>= 80 % of S2's rate before)",
            "about 280 Mb/s",
            f"{taken:.0f} of {s2_before:.0f} Mb/s",
            taken >= 0.8 * s2_before,
        )
    ]
    for vm in others:
        d = abs(rate["gap"][vm]["bg"] / rate["before"][vm]["bg"] - 1)
        checks.append(
            mc.check(
                f"{vm}: BG unchanged while S2 is silent (within 5 %)",
                "unchanged",
                f"{rate['before'][vm]['bg']:.0f} -> {rate['gap'][vm]['bg']:.0f} Mb/s",
                d <= mc.BG_TOLERANCE,
            )
        )
    checks.append(
        mc.check(
            "S2 regains its guarantee after resuming (BG >= 95 % of 250 Mb/s within 1 testbed second)",
            "quickly",
            "never" if back is None else f"{back * 1e3:.0f} ms (= {back / quick_s:.2f} s of testbed time)",
            back is not None and back <= quick_s,
        )
    )
    tot = {ph: {vm: rate[ph][vm]["bg"] + rate[ph][vm]["wc"] for vm in others} for ph in rate}
    worst = max(abs(tot["after"][vm] / tot["before"][vm] - 1) for vm in others)
    checks.append(
        mc.check(
            "the others fall back to their earlier totals after S2 resumes (within 5 %)",
            "fall back",
            f"worst {worst:.1%} off",
            worst <= mc.BG_TOLERANCE,
        )
    )
    measured = {
        "phases_s": phases,
        "rates": rate,
        "idle_taken_mbps": taken,
        "s2_regain_s": back,
        "wall_s": m.wall_s,
    }
    return E._finish("mptcp-wc", opts, measured, checks)


# ------------------------------------------------------------------------------------------------------
# mptcp-clos


def _connection(flow_id: str) -> tuple[str, str]:
    """(connection, class) of a flow record: ``f/bg`` -> (f, bg), ``f/wc0`` -> (f, wc), ``f`` -> (f, tcp)."""
    if "/" not in flow_id:
        return flow_id, "tcp"
    base, tail = flow_id.rsplit("/", 1)
    return base, "wc" if tail.startswith("wc") else tail


def clos_records(
    rows: list[dict[str, Any]], plans: list[mr.JobPlan]
) -> tuple[dict[str, int | None], dict[str, Any]]:
    """Per connection its finish (the last of its subflows; None if one did not finish) and, for the
    large jobs, what the flow records say: per class the subflows, delivered bytes, retransmissions and
    timeouts, and the mean connection time of the connections whose WC subflow timed out vs the others."""
    finish: dict[str, int | None] = {}
    start: dict[str, int] = {}
    wc_timed_out: dict[str, bool] = {}
    large = {fid for p in plans if p.job.size_class == "large" for fid in p.flow_ids}
    per_class: dict[str, dict[str, int]] = {}
    for r in rows:
        conn, cls = _connection(str(r["id"]))
        f = r["finish_ns"]
        prev = finish.get(conn, 0)
        finish[conn] = None if f is None or (conn in finish and prev is None) else max(int(f), prev or 0)
        start[conn] = int(r["start_ns"])
        if conn not in large:
            continue
        c = per_class.setdefault(cls, {"subflows": 0, "bytes": 0, "retransmits": 0, "timeouts": 0})
        c["subflows"] += 1
        c["bytes"] += int(r["bytes_acked"])
        c["retransmits"] += int(r["retransmits"])
        c["timeouts"] += int(r["timeouts"])
        if cls == "wc":
            wc_timed_out[conn] = wc_timed_out.get(conn, False) or int(r["timeouts"]) > 0

    def mean_time(conns: list[str]) -> float | None:
        ts = [(finish[c] or 0) - start[c] for c in conns if finish.get(c) is not None]
        return float(np.mean(ts)) / 1e9 if ts else None

    timed = [c for c in large if wc_timed_out.get(c)]
    clean = [c for c in large if c in wc_timed_out and not wc_timed_out[c]]
    why: dict[str, Any] = {
        "large_job_connections": len(large),
        "per_class": per_class,
        "mean_connection_s": mean_time(sorted(large)),
    }
    if wc_timed_out:
        why["wc_timed_out"] = {"connections": len(timed), "mean_connection_s": mean_time(timed)}
        why["wc_no_timeout"] = {"connections": len(clean), "mean_connection_s": mean_time(clean)}
    return finish, why


def _plot_clos(out: Path, cdfs: dict[str, list[list[float]]], means: dict[str, dict[str, float]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.2), dpi=100)
    for v, pts in cdfs.items():
        if pts:
            a = np.asarray(pts)
            ax.step(a[:, 0] * 1e3, a[:, 1], where="post", label=v)
    ax.set_xscale("log")
    ax.set_xlabel("shuffle completion time (ms, compressed time)")
    ax.set_ylabel("CDF of jobs")
    ax.set_title("mptcp-clos: shuffle completion (Fig. 19)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "shuffle_cdf.png", metadata={"Software": None})
    plt.close(fig)
    _bars(out / "shuffle_mean.png", "mptcp-clos: mean shuffle time (Fig. 20)", means, "seconds (compressed)")


def run_clos(opts: ExperimentOptions) -> dict[str, Any]:
    """mptcp-clos (Figs. 18-20): the four variants on the Clos with the MapReduce shuffle (scaling:
    :data:`.mptcp_bgwc.CLOS_FULL` / ``CLOS_QUICK``); ranked by mean large-job shuffle time."""
    from paccp.scenario import parse_scenario, to_engine
    from paccp.sim.rundir import run_engine

    out = opts.out_dir / "mptcp-clos"
    out.mkdir(parents=True, exist_ok=True)
    scaling = E.CLOS_QUICK if opts.quick else E.CLOS_FULL
    measured: dict[str, Any] = {"scaling": scaling.describe()}
    mean_large: dict[str, float] = {}
    cdfs: dict[str, list[list[float]]] = {}
    means: dict[str, dict[str, float]] = {}
    unfinished = 0
    for variant in E.PAPER["mptcp-clos"].numbers["ranking"]:
        spec, plans = E.clos_scenario(variant, scaling, seed=opts.seed, drain_s=2.0 if opts.quick else 10.0)
        result, wall = run_engine(to_engine(parse_scenario(spec, where=variant)), description=variant)
        finish, why = clos_records(result.flows.to_pylist(), plans)
        s = mr.summarize(mr.shuffle_results(plans, finish))
        unfinished += int(s["jobs_unfinished"])  # type: ignore[call-overload]
        by_class: dict[str, Any] = s["by_class"]  # type: ignore[assignment]
        cdfs[variant] = s["cdf"]  # type: ignore[assignment]
        means[variant] = {
            "all": float(s["all"]["mean_s"] or 0.0),  # type: ignore[index]
            "large": float(by_class["large"]["mean_s"] or 0.0),
        }
        measured[variant] = {k: v for k, v in s.items() if k != "cdf"} | {
            "wall_s": wall,
            "packets_dropped": int(result.stats.get("packets_dropped", 0)),
            "why_large": why,
        }
        if by_class["large"]["mean_s"] is not None:
            mean_large[variant] = float(by_class["large"]["mean_s"])
    _plot_clos(out, cdfs, means)
    checks = [mc.check("every job's shuffle finished", "all", f"{unfinished} unfinished", unfinished == 0)]
    if len(mean_large) == len(mc.PAPER_RANKING):
        checks += mc.checks_clos(mean_large)
    else:
        checks.append(
            mc.check(
                "ranking by mean large-job shuffle time",
                " < ".join(mc.PAPER_RANKING),
                "no large job finished in every variant",
                False,
            )
        )
    return E._finish("mptcp-clos", opts, measured, checks)


for _id, _run in (("mptcp-cc", run_cc), ("mptcp-wc", run_wc), ("mptcp-clos", run_clos)):
    register(Experiment(id=_id, title=f"MPTCP BG/WC {E.PAPER[_id].figures}", run=_run))
