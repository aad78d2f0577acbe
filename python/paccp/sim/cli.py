"""Simulator commands: ``run``, ``reproduce``, ``optimum``."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import typer

from paccp.errors import UserError
from paccp.limits import INT64_MAX
from paccp.sim.reproduce_all import JOBS, is_group, reproduce_all

# The ids of `paccp reproduce`, for its help without importing every experiment (a test keeps this list
# equal to the registry, paccp.experiments.REGISTRY): the experiment lines of `paccp reproduce all`.
EXPERIMENT_IDS = tuple(j.id for j in JOBS if not j.is_compare)


PROBLEM_HELP = (
    'problem JSON: {"links": {NAME: RATE}, "flows": [{"id", "route", "theta_bps", "omega"}]};'
    ' rates in bit/s or with units, e.g. "40Gbit"'
)


def optimum(
    problem: Path = typer.Argument(..., help=PROBLEM_HELP),
) -> None:
    """Solve the reference allocation (max sum omega log x within link capacities, x >= theta); print
    rates, utility and bottlenecks as JSON."""
    from paccp.sim import optimum as opt

    sol = opt.solve(opt.load_problem(problem))
    typer.echo(json.dumps(sol.to_json(), indent=2, sort_keys=True))


def run(
    scenario: Path = typer.Argument(..., help="scenario TOML file (see scenarios/)"),
    out: Path = typer.Option(..., "--out", help="run directory to write (created; files are overwritten)"),
    seed: int | None = typer.Option(None, "--seed", help="override [run] seed"),
) -> None:
    """Run one scenario and write a run directory (summary.json, flows.parquet/csv, usage.jsonl, plots)."""
    import paccp.sim.rundir as rundir
    from paccp.common.outdir import check_out_dir
    from paccp.scenario import load_scenario

    check_out_dir(out, replace=True)
    sc = load_scenario(scenario)
    if seed is not None:
        if not 0 <= seed <= INT64_MAX:
            raise UserError(f"--seed must be 0..{INT64_MAX}, got {seed}")
        sc = sc.model_copy(update={"run": sc.run.model_copy(update={"seed": seed})})
    summary = rundir.run_scenario(sc, out, scenario_text=scenario.read_bytes().decode("utf-8"))
    for line in summary.get("warnings", []):
        typer.echo(f"paccp: warning: {line}", err=True)
    print_run_table(summary, out)


def _ms(ns: float | None) -> str:
    return "" if ns is None else f"{ns / 1e6:.3g} ms"


def print_run_table(summary: dict[str, Any], out: Path) -> None:
    """Per class: flows, mean delivered rate per flow, its guarantee and optimum (long-lived runs), FCTs."""
    from paccp.common import console as cons
    from paccp.units import format_rate

    classes = summary["classes"]
    has_fct = any(c.get("mean_fct_ns") is not None for c in classes.values())
    has_opt = any("optimal_bps" in c for c in classes.values())
    cols = ["class", "flows", "finished", "rate per flow", "theta per flow"]
    cols += ["optimum per flow", "rate/optimum"] if has_opt else []
    cols += ["mean FCT", "p99 FCT", "deadlines met"] if has_fct else []
    warm = summary["warmup_ns"] / 1e6
    t = cons.table(
        *cols,
        title=f"{out.name}: {summary['duration_ns'] / 1e6:g} ms simulated,"
        f" rates after the {warm:g} ms warm-up",
        right=tuple(cols[1:]),
    )
    for lab, c in classes.items():
        row = [lab, c["flows"], c["finished"], format_rate(round(c["mean_rate_bps"]))]
        row.append(format_rate(round(c["theta_bps"])) if c.get("theta_bps") else "-")
        if has_opt:
            o = c.get("optimal_bps")
            row += [format_rate(round(o)), f"{c['mean_rate_bps'] / o:.2f}"] if o else ["", ""]
        if has_fct:
            dl = c.get("deadline_meet_rate")
            row += [_ms(c.get("mean_fct_ns")), _ms(c.get("p99_fct_ns")), "" if dl is None else f"{dl:.0%}"]
        cons.add_row(t, *row)
    con = cons.console()
    con.print(t)
    if not has_fct:
        cons.echo("long-lived flows: they run to the end, so none finishes and no FCT is measured", con=con)
    cons.echo(f"wrote {out} (summary.json, flows.parquet, rate_<class>.png; paccp report {out})", con=con)


def reproduce(
    experiments: list[str] = typer.Argument(
        ..., help="experiment ids (listed above), or all / paccp / softbw / mptcp / compare / ablation"
    ),
    out: Path = typer.Option(..., "--out", help="output directory; each experiment writes DIR/<id>/"),
    duration: str | None = typer.Option(None, "--duration", help="simulated time per run, e.g. 200ms"),
    seed: int = typer.Option(1, "--seed", help="random seed"),
    quick: bool = typer.Option(False, "--quick", help="scaled-down runs, seconds each (what the tests run)"),
    transport: list[str] = typer.Option(
        [],
        "--transport",
        help="a key=value of the scenarios' [transport] table for every run (repeatable), e.g. sack=true",
    ),
    seeds: int | None = typer.Option(
        None, "--seeds", help="workload experiments: number of seeds (--seed .. --seed + N - 1; default 3)"
    ),
    loads: str | None = typer.Option(
        None,
        "--loads",
        help="workload experiments: loads to run, comma-separated fractions, e.g. 0.3,0.5,0.8",
    ),
    drain: str | None = typer.Option(
        None,
        "--drain",
        help="workload experiments: simulated time after the last arrival, e.g. 3s (default 100ms)",
    ),
    from_cache: bool = typer.Option(
        False,
        "--from-cache",
        help="workload experiments: write the summary of the points already finished (e.g. of a long run"
        " still going), run nothing",
    ),
    workers: int = typer.Option(2, "--workers", help="with all or a group: experiments run at once"),
    shortest_first: bool = typer.Option(
        False, "--shortest-first", help="with all or a group: start the short jobs first (default: longest)"
    ),
) -> None:
    """Reproduce paper experiments and compare with the paper's numbers and the optimum.

    \b
    Experiments: fig4a fig4c fig5 (long-lived flows, PACCP paper Fig. 4-5); rcos fig8 fig9 fig10 fig11
    (workloads); softbw-oc softbw-price softbw-short softbw-converge softbw-share (SoftBW); mptcp-bg
    mptcp-table3 mptcp-fair mptcp-sched mptcp-rcvbuf mptcp-cc mptcp-wc mptcp-clos (MPTCP BG/WC).

    \b
    Groups: all, paccp, softbw, mptcp, compare (every scheme comparison, compare-<name> for one),
    ablation (not in all: paccp-host and each of its ablations on every comparison file): each
    experiment a child process, --workers at a time, complete ones skipped (rerun to resume), logs in
    DIR/logs, then DIR/report.html and DIR/reproduce-all.json (wall time, load, commit).
    """
    import dataclasses

    if not any(is_group(e) for e in experiments) and shortest_first:
        raise UserError("--shortest-first applies to all and the groups, not to experiment ids")
    if any(is_group(e) for e in experiments):
        if duration is not None or transport or seed != 1 or seeds or loads or drain or from_cache:
            raise UserError(
                "--duration, --transport, --seed, --seeds, --loads, --drain and --from-cache apply to"
                " experiment ids, not to groups"
            )
        reproduce_all(
            experiments, out, workers=workers, quick=quick, shortest_first=shortest_first, echo=typer.echo
        )
        return

    from paccp.common.outdir import check_out_dir, staged_parent
    from paccp.experiments import ExperimentOptions, load_all
    from paccp.units import parse_duration_ns

    registry = load_all()
    unknown = [e for e in experiments if e not in registry]
    if unknown:
        raise UserError(f"unknown experiment {unknown[0]!r} (known: {', '.join(sorted(registry))})")
    if not 0 <= seed <= INT64_MAX:
        raise UserError(f"--seed must be 0..{INT64_MAX}, got {seed}")
    fixed = [e for e in experiments if not registry[e].takes_transport]
    if transport and fixed:
        takes = ", ".join(sorted(e for e, x in registry.items() if x.takes_transport))
        raise UserError(
            f"--transport: experiment {fixed[0]!r} sets its own transport (its testbed's) and would"
            f" ignore it; it applies to {takes}"
        )
    untimed = [e for e in experiments if not registry[e].takes_duration]
    if duration is not None and untimed:
        takes = ", ".join(sorted(e for e, x in registry.items() if x.takes_duration))
        raise UserError(
            f"--duration: experiment {untimed[0]!r} sets its own run lengths and would ignore it; it"
            f" applies to {takes}"
        )
    ungridded = [e for e in experiments if not registry[e].takes_grid]
    grid = (("--seeds", seeds), ("--loads", loads), ("--drain", drain), ("--from-cache", from_cache or None))
    grid_given = [n for n, v in grid if v is not None]
    if grid_given and ungridded:
        takes = ", ".join(sorted(e for e, x in registry.items() if x.takes_grid))
        raise UserError(
            f"{grid_given[0]}: experiment {ungridded[0]!r} is not a workload grid and would ignore it; it"
            f" applies to {takes}"
        )
    check_out_dir(out)
    for exp_id in experiments:  # every experiment's directory, before the first one runs
        x = registry[exp_id]
        check_out_dir(out / exp_id, f"--out (experiment {exp_id})", replace=not x.resumable)
    dur = parse_duration_ns(duration) if duration is not None else None
    if dur is not None and dur < 10_000_000:
        raise UserError(
            f"--duration must be at least 10ms (rates are measured after a warm-up), got {duration}"
        )
    opts = ExperimentOptions(
        out_dir=out,
        seed=seed,
        quick=quick,
        duration_ns=dur,
        transport=parse_assignments(transport),
        seeds=_check_seeds(seeds, seed),
        loads=None if loads is None else parse_loads(loads),
        drain_ns=None if drain is None else _check_drain(drain),
        from_cache=from_cache,
    )
    prepared: dict[str, Any] = {}  # every experiment validated and resolved before the first runs
    for exp_id in experiments:
        prep = registry[exp_id].prepare
        if prep is not None:
            prepared[exp_id] = prep(opts)
    for exp_id in experiments:
        x = registry[exp_id]
        if exp_id in prepared:
            prepared[exp_id]()
        elif x.replaces_dir or x.resumable:  # stages its own directory, or resumes from its cache
            x.run(opts)
        else:  # built beside DIR/<id>/ and moved into place: a kill leaves nothing half-written there
            with staged_parent(out / exp_id, f"--out (experiment {exp_id})") as parent:
                x.run(dataclasses.replace(opts, out_dir=parent))


MAX_SEEDS = 1000
MAX_DRAIN_NS = 600 * 1_000_000_000


def _check_seeds(seeds: int | None, first: int) -> int | None:
    if seeds is not None and not 1 <= seeds <= MAX_SEEDS:
        raise UserError(f"--seeds must be 1..{MAX_SEEDS}, got {seeds}")
    if seeds is not None and first + seeds - 1 > INT64_MAX:
        raise UserError(f"--seed {first} with --seeds {seeds} runs past the largest seed {INT64_MAX}")
    return seeds


def _check_drain(text: str) -> int:
    from paccp.units import parse_duration_ns

    try:
        ns = parse_duration_ns(text)
    except UserError as exc:
        raise UserError(f"--drain: {exc.message}") from None
    if not 0 <= ns <= MAX_DRAIN_NS:
        raise UserError(f"--drain must be 0..600s, got {text[:40]}")
    return ns


def parse_loads(text: str) -> tuple[float, ...]:
    """``"0.3,0.5,0.8"`` -> ``(0.3, 0.5, 0.8)``: distinct fractions in (0, 1], in the order given."""
    out: list[float] = []
    for item in text.split(","):
        try:
            v = float(item.strip())
        except ValueError:
            raise UserError(f"--loads expects comma-separated numbers, got {item.strip()[:40]!r}") from None
        if not 0 < v <= 1:
            raise UserError(f"--loads: a load is a fraction in (0, 1], got {item.strip()[:40]}")
        if v in out:
            raise UserError(f"--loads: {v:g} given twice")
        out.append(v)
    return tuple(out)


def parse_assignments(items: list[str]) -> dict[str, Any]:
    """``["sack=true", "min_rto=200us"]`` -> ``{"sack": True, "min_rto": "200us"}`` (TOML or text)."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UserError(f"--transport expects KEY=VALUE, got {item!r}")
        try:
            out[key.strip()] = tomllib.loads(f"v = {value.strip()}")["v"]
        except tomllib.TOMLDecodeError:
            out[key.strip()] = value.strip()
    return out


def register(app: typer.Typer) -> None:
    """Add the simulator commands to the root app."""
    app.command("run")(run)
    app.command("reproduce")(reproduce)
    app.command("optimum")(optimum)
