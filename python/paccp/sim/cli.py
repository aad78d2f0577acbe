"""Simulator commands: ``run``, ``reproduce``, ``optimum``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import tomllib
import typer

from paccp.errors import UserError
from paccp.limits import INT64_MAX


def optimum(
    problem: Path = typer.Argument(..., help="problem JSON: {links: {name: bps}, flows: [...]}"),
) -> None:
    """Solve max sum omega*log(x) s.t. link capacities and x >= theta; print rates, utility, bottlenecks."""
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
    typer.echo(f"wrote {out} ({summary['n_flows']} flows, {summary['n_finished']} finished)")


def reproduce(
    experiments: list[str] = typer.Argument(..., help="experiment ids, e.g. fig4a fig4c fig5"),
    out: Path = typer.Option(..., "--out", help="output directory; each experiment writes DIR/<id>/"),
    duration: str | None = typer.Option(None, "--duration", help="simulated time per run, e.g. 200ms"),
    seed: int = typer.Option(1, "--seed", help="random seed"),
    quick: bool = typer.Option(False, "--quick", help="scaled-down run (for tests; see the README)"),
    transport: list[str] = typer.Option(
        [],
        "--transport",
        help="[transport] key=value for every run (repeatable), e.g. --transport sack=true",
    ),
) -> None:
    """Reproduce paper experiments and compare with the paper's numbers and the optimum."""
    import dataclasses

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
        out_dir=out, seed=seed, quick=quick, duration_ns=dur, transport=parse_assignments(transport)
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
