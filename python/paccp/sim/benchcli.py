"""``paccp bench``: speed figures as JSON.

``paccp bench`` runs the simulator benchmarks (owned by the simulator area, ``paccp.sim.bench``);
``paccp bench datapath`` is added by the datapath area.
"""

from __future__ import annotations

import typer

bench_app = typer.Typer(
    help="Speed figures as JSON (events/s, simulated s per wall s, peak RSS; datapath overhead).",
    invoke_without_command=True,
)


@bench_app.callback()
def bench(
    ctx: typer.Context,
    only: str = typer.Option("", help="comma-separated subset of simulator benchmarks to run"),
    out: str = typer.Option("", help="also write the JSON to this file"),
    plot: str = typer.Option(
        "",
        help="write a PNG of events per loop CPU s against peak packets in flight (e.g. --only workingset)",
    ),
    rounds: int = typer.Option(
        1, help="run every benchmark this many times, interleaved, and report medians (for a shared machine)"
    ),
) -> None:
    """Run the simulator benchmarks (when no sub-command is given)."""
    if ctx.invoked_subcommand is not None:
        return
    from paccp.sim import bench as simbench

    simbench.run_cli(only=only, out=out, plot=plot, rounds=rounds)
