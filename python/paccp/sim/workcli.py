"""Workload-area commands: ``paccp sweep`` (grids of runs, local or Ray, cached) and ``paccp report``."""

from __future__ import annotations

from pathlib import Path

import typer

from paccp.errors import UserError


def sweep(
    sweep_file: Path = typer.Argument(..., help="sweep TOML (docs/howto/workloads.md)"),
    out: Path = typer.Option(..., "--out", help="output directory (results and the cache live there)"),
    executor: str = typer.Option("local", "--executor", help="local (process pool) or ray"),
    address: str | None = typer.Option(None, "--address", help="Ray cluster address (default: local Ray)"),
    workers: int = typer.Option(2, "--workers", help="parallel points (local pool size / local Ray CPUs)"),
) -> None:
    """Run every point of a sweep; finished points are cached in OUT/cache and never recomputed."""
    from paccp.common.outdir import check_out_dir
    from paccp.sim import sweep as sw

    if executor not in ("local", "ray"):
        raise UserError(f"--executor must be 'local' or 'ray', got {executor!r}")
    if address is not None and executor != "ray":
        raise UserError("--address needs --executor ray")
    check_out_dir(out)
    if workers < 1:
        raise UserError(f"--workers must be >= 1, got {workers}")
    name, points = sw.load_sweep(sweep_file)
    out.mkdir(parents=True, exist_ok=True)
    results = sw.run_points(points, out, executor=executor, workers=workers, address=address)
    sw.write_sweep_outputs(name, results, out)
    cached = sum(1 for r in results if r.get("cached"))
    typer.echo(f"wrote {out}/summary.json and sweep.csv ({len(results)} points, {cached} from the cache)")


def report(directory: Path = typer.Argument(..., help="directory of runs / experiments / sweeps")) -> None:
    """Write DIR/report.html (self-contained: images embedded) from every summary.json under DIR."""
    from paccp.report.html import write_report

    path, skipped = write_report(directory)
    for p, why in skipped:
        typer.echo(f"paccp: warning: skipped {p}: {' '.join(why.split())}", err=True)
    typer.echo(f"wrote {path}" + (f" ({len(skipped)} summary.json skipped, listed in it)" if skipped else ""))


docs_app = typer.Typer(
    help="The documentation site's generated pages.", no_args_is_help=True, rich_markup_mode=None
)


@docs_app.command("results")
def docs_results(
    reproduction: Path = typer.Argument(
        ..., help="a directory of paccp reproduce all, or the copy of one in docs/results/data"
    ),
    out: Path = typer.Option(
        Path("docs/results"), "--out", help="where the pages go (data/ is copied there)"
    ),
    replace: bool = typer.Option(
        False, "--replace", help="drop the pages of jobs the reproduction does not have (else an error)"
    ),
) -> None:
    """Write the results pages (index.md and one page per experiment and comparison) from a reproduction."""
    from paccp.report.results_pages import write_pages

    pages = write_pages(reproduction, out, replace=replace)
    typer.echo(f"wrote {len(pages)} pages in {out}")


def register(app: typer.Typer) -> None:
    """Add ``sweep``, ``report`` and ``docs`` to the root app."""
    app.command("sweep")(sweep)
    app.command("report")(report)
    app.add_typer(docs_app, name="docs")
