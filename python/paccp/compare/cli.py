"""``paccp compare SCENARIO.toml --schemes ... --out DIR``."""

from __future__ import annotations

from pathlib import Path

import typer

from paccp.compare.schemes import SCHEME_SETS, SCHEMES
from paccp.errors import UserError

DEFAULT_SCHEMES = "paccp-vbp,paccp-fbp,softbw,mptcp-bgwc,ratelimit,tcp,paccp-host"
"""The schemes run when ``--schemes`` is not given: every scheme but paccp-host's ablations and variants and
the diagnostic ``mptcp-bgwc-shared``."""


def compare(
    scenario: Path = typer.Argument(..., help="comparison file (scenarios/compare-*.toml)"),
    out: Path = typer.Option(..., "--out", help="output directory (compare.json, table.md, PNGs, cache/)"),
    schemes: str = typer.Option(
        DEFAULT_SCHEMES,
        "--schemes",
        help="comma-separated, any of: "
        + ", ".join(SCHEMES)
        + "; or "
        + ", ".join(SCHEME_SETS)
        + " (paccp-host and each of its ablations; default: all but the ablations, the variants and"
        + " mptcp-bgwc-shared)",
    ),
    quick: bool = typer.Option(
        False, "--quick", help="scaled down as the file's [compare.quick] table says (what the tests run)"
    ),
    seed: int | None = typer.Option(
        None, "--seed", help="first seed (default: the file's first); runs seeds --seed .. --seed + N - 1"
    ),
    seeds: int | None = typer.Option(
        None, "--seeds", help="number of seeds N (default: as many as the file has), e.g. --seed 4 --seeds 8"
    ),
    executor: str = typer.Option("local", "--executor", help="local (process pool) or ray"),
    workers: int = typer.Option(2, "--workers", help="parallel runs"),
    address: str | None = typer.Option(None, "--address", help="Ray cluster address (with --executor ray)"),
) -> None:
    """Run PACCP, SoftBW, MPTCP BG/WC, a rate limiter and TCP on the same tenants, traffic and prices."""
    from paccp.compare.run import run_compare
    from paccp.compare.schemes import parse_schemes
    from paccp.report.tables import markdown

    chosen = parse_schemes(schemes)
    if not scenario.is_file():
        raise UserError(f"{scenario}: no such comparison file")
    doc = run_compare(
        scenario,
        chosen,
        out,
        quick=quick,
        seeds=(seed, seeds),
        executor=executor,
        workers=workers,
        address=address,
    )
    typer.echo(markdown(doc))
    typer.echo(f"wrote {out}/compare.json, table.md, *.png ({doc['runs']} runs, {doc['wall_s']} s)")


def register(app: typer.Typer) -> None:
    """Add ``compare`` to the root app."""
    app.command("compare")(compare)
