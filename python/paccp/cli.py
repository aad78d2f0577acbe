"""The ``paccp`` command: one entry point, sub-commands contributed by each area.

Areas own their own command modules; this file only wires them together and turns user errors into
one line on stderr with exit code 2.

- simulator: ``run``, ``reproduce``, ``optimum``, ``bench`` (``paccp.simcli``, ``paccp.simbench``)
- workload experiments: ``sweep``, ``report`` (``paccp.workcli``)
- pricing and billing: ``price ...``, ``bill ...`` (``paccp.pricing.cli``)
- Linux datapath: ``datapath ...``, ``testbed ...``, ``bench datapath`` (``paccp.datapath.cli``)
"""

from __future__ import annotations

import sys

import pydantic
import typer

from paccp import benchcli, simcli, workcli
from paccp.datapath import cli as datapath_cli
from paccp.errors import UserError
from paccp.pricing import cli as pricing_cli

app = typer.Typer(
    name="paccp",
    help="PACCP: price-aware congestion control — simulator, Linux datapath, pricing and billing.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

simcli.register(app)
workcli.register(app)
app.add_typer(benchcli.bench_app, name="bench")
pricing_cli.register(app, benchcli.bench_app)
datapath_cli.register(app, benchcli.bench_app)


def _one_line(message: str) -> str:
    return " ".join(str(message).split())


def main(argv: list[str] | None = None) -> None:
    """Run the CLI; bad input exits 2 with a one-line message."""
    try:
        app(args=argv, prog_name="paccp")
    except UserError as exc:
        print(f"paccp: error: {_one_line(exc.message)}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except pydantic.ValidationError as exc:  # safety net: areas should convert these themselves
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err.get("loc", ())) or "input"
        print(f"paccp: error: {loc}: {_one_line(err.get('msg', 'invalid'))}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":  # pragma: no cover
    main()
