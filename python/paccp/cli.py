"""The ``paccp`` command: one entry point, sub-commands contributed by each area.

Areas own their own command modules; this file only wires them together and turns user errors into
one line on stderr with exit code 2.

- simulator: ``run``, ``reproduce``, ``optimum``, ``bench`` (``paccp.sim.cli``, ``paccp.sim.bench``)
- workload experiments: ``sweep``, ``report``, ``docs results`` (``paccp.sim.workcli``)
- pricing and billing: ``price ...``, ``bill ...`` (``paccp.pricing.cli``)
- Linux datapath: ``datapath ...``, ``testbed ...``, ``bench datapath`` (``paccp.datapath.cli``)
- cross-check against ns-3 and the kernel: ``crosscheck`` (``paccp.crosscheck.cli``)
- scheme comparison: ``compare`` (``paccp.compare.cli``)
- the running service: ``serve``, ``agent``, ``relay`` (``paccp.service.cli``)
"""

from __future__ import annotations

import sys

import pydantic
import typer

from paccp.compare import cli as compare_cli
from paccp.crosscheck import cli as crosscheck_cli
from paccp.datapath import cli as datapath_cli
from paccp.errors import UserError, validation_error
from paccp.sim import benchcli, workcli
from paccp.sim import cli as simcli

try:  # typer >= 0.2x carries its own copy of click
    from typer._click.exceptions import ClickException, NoArgsIsHelpError
except ImportError:  # pragma: no cover - older typer with click as a dependency
    from click.exceptions import ClickException, NoArgsIsHelpError  # type: ignore[assignment]
from paccp.pricing import cli as pricing_cli
from paccp.service import cli as service_cli

app = typer.Typer(
    name="paccp",
    help="PACCP: price-aware congestion control — simulator, Linux datapath, pricing and billing.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    # plain help: rich's read "[transport]" in an option's help as markup and printed "--help <bool>"
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            v = version("paccp")
        except PackageNotFoundError:  # pragma: no cover - run from a source tree without installing
            v = "unknown (not installed)"
        typer.echo(f"paccp {v}")
        raise typer.Exit()


@app.callback()
def _root(
    show_version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="print the version and exit"
    ),
) -> None:
    """PACCP: price-aware congestion control — simulator, Linux datapath, pricing and billing."""


simcli.register(app)
workcli.register(app)
app.add_typer(benchcli.bench_app, name="bench")
pricing_cli.register(app, benchcli.bench_app)
datapath_cli.register(app, benchcli.bench_app)
crosscheck_cli.register(app)
compare_cli.register(app)
service_cli.register(app, benchcli.bench_app)


def _one_line(message: str) -> str:
    return " ".join(str(message).split())


def main(argv: list[str] | None = None) -> None:
    """Run the CLI; bad input exits 2 with a one-line message (usage errors too)."""
    try:
        rv = app(args=argv, prog_name="paccp", standalone_mode=False)
    except NoArgsIsHelpError as exc:  # `paccp` or a group alone: the help text is the answer
        exc.show()
        sys.exit(exc.exit_code)
    except ClickException as exc:  # unknown option or command, missing argument, bad value
        ctx = getattr(exc, "ctx", None)  # usage errors carry the command they were raised in
        where = ctx.command_path if ctx is not None else "paccp"
        msg = _one_line(exc.format_message())
        print(f"paccp: error: {msg} (see '{where} --help')", file=sys.stderr)
        sys.exit(exc.exit_code)
    except typer.Abort:
        print("paccp: aborted", file=sys.stderr)
        sys.exit(130)
    except UserError as exc:
        print(f"paccp: error: {_one_line(exc.message)}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except pydantic.ValidationError as exc:  # safety net: areas should convert these themselves
        loc, msg = validation_error(exc, "input")
        print(f"paccp: error: {loc}: {_one_line(msg)}", file=sys.stderr)
        sys.exit(2)
    if isinstance(rv, int) and rv:  # typer.Exit(code) comes back as the code outside standalone mode
        sys.exit(rv)


if __name__ == "__main__":  # pragma: no cover
    main()
