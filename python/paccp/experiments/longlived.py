"""Long-lived flow experiments of the PACCP paper: Fig. 4 (a,b), Fig. 4 (c,d) and Fig. 5.

Setup (SPEC sections 7-8): leaf-spine with L = 6 leaves, S = 5 spines, 40 hosts per leaf, 10 Gb/s / 10 us
host links, 40 Gb/s / 20 us fabric links, 100-packet host-port and 400-packet fabric-port drop-tail
buffers, 1500-byte packets, the paper's deterministic routing (rack s reaches rack d through spine
((d - s) mod L) - 1), PACCP with rcos = 3. Every flow is long-lived (unlimited data).

Host layout: the hosts of rack s form L - 1 *groups* of 8 consecutive hosts; group j sends to rack
d = (s + j + 1) mod L, and host k of the group sends to host k of group j in rack d, so each host receives
from exactly one sending host and each leaf-spine uplink / spine-leaf downlink carries exactly one group.

- fig4a: group = 4 BE (0,1), 2 DS (0,2), 2 MRG (2 Gb/s, 1): per rack 20 / 10 / 10 hosts. Optimum 4/8/4.
- fig4c: same with MRG (7 Gb/s, 2). Optimum 3.25 / 6.5 / 7.
- fig5 (VBP): every host runs one VM; group = 2 BE-1, 2 BE-2, 1 DS-1, 1 DS-2, 1 MRG-1, 1 MRG-2 hosts, where
  an "-2" VM sends 2 flows (to the same receiver) and splits its pair: BE (0,1), DS (0,2), MRG (7 Gb/s, 2)
  give BE-2 (0, 0.5), DS-2 (0, 1), MRG-2 (3.5 Gb/s, 1) per flow. Per rack 20 BE / 10 DS / 10 MRG hosts,
  half of each CoS sending 2 flows. Optimum 3.25 / 6.5 / 7 (1-flow) and 1.625 / 3.25 / 3.5 (per 2-flow flow).

Flows start at times drawn uniformly in [0, 1 ms) from the seed (so that they do not all start on the same
nanosecond); rates are measured over [warm-up, end) with warm-up = a quarter of the duration. The
optimum is computed with :mod:`paccp.sim.optimum` on the routes the engine reports and the channel rates it
used. ``--quick`` keeps every per-group detail (so the optimum is unchanged) but uses L = 3 leaves,
S = 2 spines, 16 hosts per leaf (48 hosts) and 60 ms of simulated time by default.

Tolerance: a class is "within tolerance" of the paper when |ours / paper - 1| <= 20 %.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from paccp.experiments import Experiment, ExperimentOptions, register
from paccp.scenario import parse_scenario, to_engine, to_toml
from paccp.sim import optimum as opt
from paccp.sim.optimum import optimum_on_routes

TOLERANCE = 0.20
GBIT = 1_000_000_000
FULL_DURATION_NS = 200_000_000
QUICK_DURATION_NS = 60_000_000

# Paper's simulated per-flow rates (SPEC section 8), bit/s.
PAPER_BPS: dict[str, dict[str, float]] = {
    "fig4a": {"BE": 3.72e9, "DS": 6.21e9, "MRG": 4.09e9},
    "fig4c": {"BE": 2.98e9, "DS": 5.08e9, "MRG": 7.14e9},
    "fig5": {"BE-1": 2.74e9, "BE-2": 1.6e9, "DS-1": 4.65e9, "DS-2": 2.66e9, "MRG-1": 7.16e9, "MRG-2": 3.85e9},
}

# Per-group slots: (label, theta bit/s, omega, flows of the VM). Pairs are the VM's (fig5) or the flow's.
_FIG4A = [("BE", 0, 1.0, 1)] * 4 + [("DS", 0, 2.0, 1)] * 2 + [("MRG", 2 * GBIT, 1.0, 1)] * 2
_FIG4C = [("BE", 0, 1.0, 1)] * 4 + [("DS", 0, 2.0, 1)] * 2 + [("MRG", 7 * GBIT, 2.0, 1)] * 2
_FIG5 = (
    [("BE-1", 0, 1.0, 1)] * 2
    + [("BE-2", 0, 1.0, 2)] * 2
    + [("DS-1", 0, 2.0, 1), ("DS-2", 0, 2.0, 2), ("MRG-1", 7 * GBIT, 2.0, 1), ("MRG-2", 7 * GBIT, 2.0, 2)]
)
GROUPS = {"fig4a": _FIG4A, "fig4c": _FIG4C, "fig5": _FIG5}
TITLES = {
    "fig4a": "Fig. 4(a,b): long-lived BE/DS/MRG, MRG (2 Gb/s, 1)",
    "fig4c": "Fig. 4(c,d): long-lived BE/DS/MRG, MRG (7 Gb/s, 2)",
    "fig5": "Fig. 5: VBP, half of each CoS's hosts send 2 flows",
}


def _dur(ns: int) -> str:
    for unit, f in (("ms", 1_000_000), ("us", 1_000)):
        if ns % f == 0:
            return f"{ns // f}{unit}"
    return f"{ns}ns"


def _rate(bps: int) -> str:
    return f"{bps // GBIT}Gbit" if bps % GBIT == 0 and bps else f"{bps}bit"


def build_scenario(
    exp: str,
    *,
    seed: int = 1,
    quick: bool = False,
    duration_ns: int | None = None,
    transport: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The scenario (TOML-shaped dict) of one experiment."""
    leaves, spines = (3, 2) if quick else (6, 5)
    group = GROUPS[exp]
    per_group = len(group)
    hosts_per_leaf = per_group * (leaves - 1)
    duration = duration_ns or (QUICK_DURATION_NS if quick else FULL_DURATION_NS)
    rng = np.random.default_rng(seed)
    vbp = exp == "fig5"
    vms: list[dict[str, Any]] = []
    flows: list[dict[str, Any]] = []
    for s in range(leaves):
        for j in range(leaves - 1):
            d = (s + j + 1) % leaves
            for k, (label, theta, omega, n) in enumerate(group):
                src = s * hosts_per_leaf + j * per_group + k
                dst = d * hosts_per_leaf + j * per_group + k
                cos = label.split("-")[0].lower()
                if vbp:
                    vms.append(
                        {
                            "id": f"vm{src}",
                            "host": f"h{src}",
                            "theta": _rate(theta),
                            "omega": omega,
                            "cos": cos,
                        }
                    )
                for m in range(n):
                    start_ns = int(rng.integers(0, 1_000_000))
                    f: dict[str, Any] = {
                        "id": f"f{src}-{m}",
                        "src": f"h{src}",
                        "dst": f"h{dst}",
                        "start": _dur(start_ns),
                        "label": label,
                    }
                    if vbp:
                        f["vm"] = f"vm{src}"
                    else:
                        f.update({"theta": _rate(theta), "omega": omega, "cos": cos})
                    flows.append(f)
    return {
        "run": {
            "seed": seed,
            "duration": _dur(duration),
            "warmup": _dur(duration // 4),
            "sample_interval": "1ms",
            "sample_flows": "long_lived",
        },
        **({"transport": dict(transport)} if transport else {}),
        "cc": {"kind": "paccp", "rcos": 3.0},
        "topology": {
            "kind": "leaf_spine",
            "leaves": leaves,
            "spines": spines,
            "hosts_per_leaf": hosts_per_leaf,
            "host_rate": "10Gbit",
            "host_delay": "10us",
            "host_buffer": "100pkt",
            "fabric_rate": "40Gbit",
            "fabric_delay": "20us",
            "fabric_buffer": "400pkt",
            "nic_buffer": "100pkt",
        },
        "routing": {"kind": "leaf_spine_paper"},
        "vms": vms,
        "flows": flows,
    }


def _time_below(result: Any, ids: list[str], theta: dict[str, float], warmup_ns: int, end_ns: int) -> float:
    s = result.samples
    idx = {fid: i for i, fid in enumerate(s.flow_ids)}
    first = -(-warmup_ns // s.interval_ns)
    last = min(end_ns // s.interval_ns, s.acked_bytes.shape[1])
    below = total = 0
    for fid in ids:
        rates = s.acked_bytes[idx[fid], first:last] * 8e9 / s.interval_ns
        below += int((rates < theta[fid]).sum())
        total += rates.size
    return below / total if total else float("nan")


def run_experiment(exp: str, opts: ExperimentOptions) -> dict[str, Any]:
    """Build, run and score one experiment; write DIR/<exp>/ and print the comparison table.

    DIR/<exp>/ is written beside its place and moved there at the end
    (:func:`paccp.common.outdir.staged_dir`).
    """
    return prepare_experiment(exp, opts)()


def prepare_experiment(exp: str, opts: ExperimentOptions) -> Callable[[], dict[str, Any]]:
    """Validate and resolve an experiment (scenario, engine input) and return the thunk that runs it."""
    from paccp.common.outdir import check_out_dir, staged_dir

    spec = build_scenario(
        exp, seed=opts.seed, quick=opts.quick, duration_ns=opts.duration_ns, transport=opts.transport
    )
    sc = parse_scenario(spec, where=exp)
    engine_json = to_engine(sc)
    option = f"--out (experiment {exp})"
    check_out_dir(opts.out_dir / exp, option, replace=True)

    def run() -> dict[str, Any]:
        with staged_dir(opts.out_dir / exp, option=option) as out:
            summary = _run_and_write(exp, opts, spec, sc, engine_json, out)
        print_table(summary)
        return summary

    return run


def _run_and_write(
    exp: str, opts: ExperimentOptions, spec: dict[str, Any], sc: Any, engine_json: dict[str, Any], out: Path
) -> dict[str, Any]:
    from paccp.sim.plots import plot_class_rates
    from paccp.sim.rundir import class_rate_series, run_engine, window_rates, write_run_dir

    result, wall = run_engine(engine_json, description=f"{exp}{' (quick)' if opts.quick else ''}")
    rates = window_rates(result, sc.run.warmup, sc.run.duration)
    problem, sol = optimum_on_routes(result)
    opt_rates = sol.rates_bps
    omegas = {f.id: f.omega for f in problem}
    theta_of = {f.id: f.theta_bps for f in problem}  # per-flow pair (a VM's pair split over its flows)
    rows = result.flows.to_pylist()
    label_of = {r["id"]: r["label"] for r in rows}
    classes: dict[str, dict[str, Any]] = {}
    for label in PAPER_BPS[exp]:
        ids = [fid for fid, lab in label_of.items() if lab == label]
        entry: dict[str, Any] = {
            "rate_bps": float(np.mean([rates[f] for f in ids])),
            "optimal_bps": float(np.mean([opt_rates[f] for f in ids])),
            "paper_bps": PAPER_BPS[exp][label],
        }
        if label.startswith("MRG"):
            entry["theta_bps"] = float(np.mean([theta_of[f] for f in ids]))
            entry["time_below_theta"] = _time_below(result, ids, theta_of, sc.run.warmup, sc.run.duration)
        classes[label] = entry
    nu = opt.normalized_utility(rates, opt_rates, omegas)
    summary: dict[str, Any] = {
        "experiment": exp,
        "seed": opts.seed,
        "duration_s": sc.run.duration / 1e9,
        "wall_s": round(wall, 3),
        "normalized_utility": nu["log"],
        "classes": classes,
    }
    if exp == "fig5":
        summary["vm_totals"] = _vm_totals(rows, rates, opt_rates)
    (out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    details = {
        "normalized_utility": nu,
        "normalized_utility_definitions": "paccp.optimum docstring; headline = 'log' (rates in Mb/s)",
        "tolerance": TOLERANCE,
        "warmup_s": sc.run.warmup / 1e9,
        "quick": opts.quick,
        "pinned_at_theta": len(sol.pinned),
        "tight_links": sum(1 for ln in sol.capacities_bps if sol.tight(ln)),
        "engine": dict(result.stats),
    }
    (out / "details.json").write_text(json.dumps(details, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    (out / "scenario.toml").write_text(
        to_toml(spec, header=f"{exp}: generated by paccp.experiments.longlived")
    )
    write_run_dir(out / "run", sc, result, wall_s=wall, plots=False, engine_json=engine_json)
    times, series = class_rate_series(result, label_of)
    plot_class_rates(
        times,
        series,
        out,
        reference_bps={k: v["optimal_bps"] for k, v in classes.items()},
        theta_bps={k: v.get("theta_bps", 0.0) for k, v in classes.items()},
        title=exp,
    )
    return summary


def _vm_totals(
    rows: list[dict[str, Any]], rates: dict[str, float], opt_rates: dict[str, float]
) -> dict[str, dict[str, dict[str, float]]]:
    """Mean per-VM total rate by CoS and host type (1-flow / 2-flow VMs)."""
    by_vm: dict[str, list[str]] = {}
    label: dict[str, str] = {}
    for r in rows:
        by_vm.setdefault(r["vm"], []).append(r["id"])
        label[r["vm"]] = r["label"]
    acc: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for vm, ids in by_vm.items():
        cos, kind = label[vm].split("-")
        acc.setdefault(cos, {}).setdefault(f"{kind}-flow", []).append(
            (sum(rates[i] for i in ids), sum(opt_rates[i] for i in ids))
        )
    return {
        cos: {
            kind: {
                "rate_bps": float(np.mean([a for a, _ in v])),
                "optimal_bps": float(np.mean([o for _, o in v])),
            }
            for kind, v in sorted(kinds.items())
        }
        for cos, kinds in sorted(acc.items())
    }


def print_table(summary: dict[str, Any]) -> None:
    """Print the comparison table (rich)."""
    from paccp.common import console as cons

    cols = ("class", "paper", "ours", "optimum", "ours/paper", "ours/opt", "< theta")
    t = cons.table(
        *cols,
        title=f"{summary['experiment']}: per-flow rates in Gb/s "
        f"(seed {summary['seed']}, {summary['duration_s'] * 1e3:g} ms simulated)",
        right=cols,
    )
    for label, c in summary["classes"].items():
        ratio = c["rate_bps"] / c["paper_bps"]
        mark = "" if abs(ratio - 1) <= TOLERANCE else " *"
        below = f"{c['time_below_theta']:.1%}" if "time_below_theta" in c else ""
        cons.add_row(
            t,
            label,
            f"{c['paper_bps'] / 1e9:.2f}",
            f"{c['rate_bps'] / 1e9:.2f}",
            f"{c['optimal_bps'] / 1e9:.3g}",
            f"{ratio:.2f}{mark}",
            f"{c['rate_bps'] / c['optimal_bps']:.2f}",
            below,
        )
    console = cons.console()
    console.print(t)
    cons.echo(
        f"normalised utility (sum omega ln(rate/1Mb/s), ours / optimum): {summary['normalized_utility']:.4f}"
        f"   (* = more than {TOLERANCE:.0%} from the paper)",
        con=console,
    )
    if "vm_totals" in summary:
        for cos, kinds in summary["vm_totals"].items():
            parts = ", ".join(
                f"{k} {v['rate_bps'] / 1e9:.2f} (opt {v['optimal_bps'] / 1e9:.2f})" for k, v in kinds.items()
            )
            cons.echo(f"  {cos} per-VM total Gb/s: {parts}", con=console)


def write_paper_scenarios(directory: Path) -> list[Path]:
    """Write scenarios/fig4a.toml, fig4c.toml, fig5.toml (full size, seed 1)."""
    paths = []
    for exp in GROUPS:
        p = directory / f"{exp}.toml"
        header = f"{TITLES[exp]}\nGenerated by paccp.experiments.longlived.write_paper_scenarios"
        header += " (full size, seed 1).\n"
        header += (
            f"Run:  paccp run scenarios/{exp}.toml --out out/{exp}   (or: paccp reproduce {exp} --out out)"
        )
        p.write_text(to_toml(build_scenario(exp), header=header), encoding="utf-8")
        paths.append(p)
    return paths


def _runner(exp: str) -> Callable[[ExperimentOptions], dict[str, Any]]:
    def run(opts: ExperimentOptions) -> dict[str, Any]:
        return run_experiment(exp, opts)

    return run


def _preparer(exp: str) -> Callable[[ExperimentOptions], Callable[[], dict[str, Any]]]:
    def prepare(opts: ExperimentOptions) -> Callable[[], dict[str, Any]]:
        return prepare_experiment(exp, opts)

    return prepare


for _exp in GROUPS:
    register(
        Experiment(
            id=_exp,
            title=TITLES[_exp],
            run=_runner(_exp),
            replaces_dir=True,
            prepare=_preparer(_exp),
            takes_transport=True,
            takes_duration=True,
        )
    )
