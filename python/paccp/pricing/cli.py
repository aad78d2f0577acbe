"""``paccp price ...`` (quotes, budgets, consistency, calibration) and ``paccp bill ...`` (the ledger)."""

from __future__ import annotations

import json
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from paccp.common import console as cons
from paccp.errors import UserError
from paccp.units import format_rate, parse_duration_ns, parse_rate_bps, parse_size_bytes

price_app = typer.Typer(help="Price books: quotes, what a budget buys, price-performance consistency.")
bill_app = typer.Typer(help="The billing ledger: tenants, usage ingestion, invoices.")
tenant_app = typer.Typer(help="Tenants of the ledger.")
bill_app.add_typer(tenant_app, name="tenant")

BookOpt = Annotated[
    Path | None, typer.Option("--book", help="price book TOML (default pricebooks/default.toml)")
]
DbOpt = Annotated[
    str | None,
    typer.Option(
        "--db",
        help="ledger: SQLite file or postgresql:// URL (default $PACCP_LEDGER, else the per-user ledger)",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="print JSON instead of a table")]


def register(app: typer.Typer, bench_app: typer.Typer | None = None) -> None:
    """Add ``price`` and ``bill`` to the root app, and ``ledger`` to ``bench``."""
    app.add_typer(price_app, name="price")
    app.add_typer(bill_app, name="bill")
    if bench_app is not None:
        bench_app.command("ledger")(bench_ledger_cmd)


def bench_ledger_cmd(
    records: Annotated[int, typer.Option("--records", help="usage records to ingest")] = 200_000,
    out: Annotated[str, typer.Option("--out", help="also write the JSON to this file")] = "",
) -> None:
    """Ingest speed of the ledger on SQLite and on a throwaway PostgreSQL server (records/s, JSON)."""
    from paccp.pricing.ledgerbench import run_cli

    run_cli(records, out)


def _out() -> Console:
    return cons.console()


def _lit(value: object) -> Text:
    """A table cell printed literally: tenant, VM and flow names are data, never terminal markup."""
    return cons.literal(value)


def _decimal(text: str, what: str) -> Decimal:
    try:
        v = Decimal(text)
    except InvalidOperation:
        raise UserError(f"cannot parse {what} {text!r} (expected a decimal number)") from None
    if not v.is_finite():
        raise UserError(f"{what} must be finite")
    return v


def _model(model: str) -> str:
    if model not in ("vbp", "fbp", "softbw"):
        raise UserError(f"unknown --model {model!r} (expected vbp, fbp or softbw)")
    return model


@price_app.command("quote")
def quote_cmd(
    model: Annotated[str, typer.Option("--model", help="vbp, fbp or softbw")] = "vbp",
    cos: Annotated[str, typer.Option("--cos", help="be, ds or mrg")] = "be",
    theta: Annotated[str, typer.Option("--theta", help="minimum rate, e.g. 5Gbit (SoftBW strict: B)")] = "0",
    omega: Annotated[str, typer.Option("--omega", help="utility weight")] = "1",
    duration: Annotated[
        str | None, typer.Option("--duration", help="e.g. 1h, 30min (default 1h; dynamic: the deadline)")
    ] = None,
    book: BookOpt = None,
    guarantee: Annotated[
        str | None, typer.Option("--guarantee", help="SoftBW: strict, dynamic, fair or none")
    ] = None,
    rate: Annotated[str | None, typer.Option("--rate", help="SoftBW: achieved rate r")] = None,
    size: Annotated[str | None, typer.Option("--size", help="SoftBW dynamic: size S, e.g. 10GB")] = None,
    deadline: Annotated[str | None, typer.Option("--deadline", help="SoftBW dynamic: T, e.g. 10s")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Price a purchase, with its breakdown."""
    from paccp.pricing.book import load_book
    from paccp.pricing.quote import quote

    bk, _ = load_book(book)
    q = quote(
        _model(model),
        cos,
        parse_rate_bps(theta),
        _decimal(omega, "omega"),
        parse_duration_ns(duration) if duration is not None else None,
        bk,
        guarantee=guarantee,
        rate_bps=parse_rate_bps(rate) if rate is not None else None,
        size_bytes=parse_size_bytes(size) if size is not None else None,
        deadline_ns=parse_duration_ns(deadline) if deadline is not None else None,
    )
    if as_json:
        print(json.dumps(q.to_json(), indent=2))
        return
    what = f"{model.upper()} {cos.upper()} theta={format_rate(q.theta_bps)} omega={q.omega}"
    if q.guarantee:
        what = f"SoftBW {q.guarantee} B={format_rate(q.theta_bps)} r={format_rate(q.rate_bps or 0)}"
    per_hour, amount = f"per hour ({bk.currency})", f"amount ({bk.currency})"
    t = cons.table(
        "component",
        "formula",
        per_hour,
        amount,
        title=f"{what} for {duration or f'{q.duration_ns / 1e9:g} s'} ({bk.name} book)",
        right=(per_hour, amount),
    )
    for c in q.components:
        cons.add_row(t, c.name, c.formula, format(c.per_hour.normalize(), "f"), c.amount)
    bold = "bold"
    cons.add_row(
        t, cons.styled("total", bold), "", format(q.per_hour.normalize(), "f"), cons.styled(q.total, bold)
    )
    con = _out()
    con.print(t)
    for n in q.notes:
        con.print(_lit(f"note: {n}"))


@price_app.command("buy")
def buy_cmd(
    budget: Annotated[str, typer.Option("--budget", help="money to spend, e.g. 12.50")],
    model: Annotated[str, typer.Option("--model", help="vbp, fbp or softbw")] = "vbp",
    duration: Annotated[str, typer.Option("--duration", help="e.g. 1h")] = "1h",
    cos: Annotated[str | None, typer.Option("--cos", help="be, ds or mrg (default: all)")] = None,
    theta: Annotated[
        str | None, typer.Option("--theta", help="MRG: fix theta, spend the rest on omega")
    ] = None,
    book: BookOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """What (theta, omega) a budget buys: max omega for DS, max theta then omega for MRG."""
    from paccp.pricing.book import load_book
    from paccp.pricing.quote import buy

    bk, _ = load_book(book)
    got = buy(
        _model(model),
        _decimal(budget, "budget"),
        parse_duration_ns(duration),
        cos,
        bk,
        parse_rate_bps(theta) if theta is not None else None,
    )
    if as_json:
        print(json.dumps([p.to_json() for p in got], indent=2))
        return
    t = cons.table(
        "cos",
        "buys",
        f"price ({bk.currency})",
        f"left ({bk.currency})",
        title=f"{model.upper()}: {budget} {bk.currency} for {duration}",
    )
    for p in got:
        cons.add_row(t, p.cos, p.describe(), p.quote.total, p.leftover)
    con = _out()
    con.print(t)
    if not got:
        con.print(_lit("the budget buys nothing for this duration"))


@price_app.command("check")
def check_cmd(book: Annotated[Path, typer.Argument(help="price book TOML")]) -> None:
    """Validate a price book; print its models."""
    from paccp.pricing.book import load_book

    bk, _ = load_book(book)
    models = [m for m in ("vbp", "fbp", "softbw") if getattr(bk, m) is not None]
    print(f"{book}: ok: {bk.name}, {bk.currency}, rounding {bk.rounding.quantum} {bk.rounding.mode}, "
          f"models {', '.join(models)}")  # fmt: skip


def _ratio_table(rep: object, currency: str) -> Table:
    from paccp.pricing.consistency import Consistency

    assert isinstance(rep, Consistency)
    cols = ["cos", "theta", "omega", "n", "performance", "price/BE", "perf/BE", "verdict"]
    if rep.metric == "fct":
        cols.insert(7, "perf/BE by size")
    t = cons.table(
        *cols,
        title=f"price vs performance, {rep.model.upper()}, per {rep.unit}, metric {rep.metric}",
        right=tuple(c for c in cols if c not in ("cos", "verdict", "perf/BE by size")),
    )
    for g in rep.groups:
        perf = format_rate(g.performance) if rep.metric == "rate" else f"{g.performance / 1e6:.3f} ms FCT"
        verdict: object = cons.styled("pays more than it gets", "red") if g.flagged else "ok"
        row = [
            g.cos, format_rate(g.theta_bps), str(g.omega), str(g.n), perf,
            f"{g.price_ratio:.3f}", f"{g.perf_ratio:.3f}", verdict,
        ]  # fmt: skip
        if rep.metric == "fct":
            row.insert(7, " ".join(f"{k} {v:.2f}" for k, v in g.by_size.items()))
        cons.add_row(t, *row)
    return t


@price_app.command("consistency")
def consistency_cmd(
    run_dir: Annotated[Path, typer.Argument(help="a run directory (flows.parquet) from `paccp run`")],
    book: BookOpt = None,
    model: Annotated[str, typer.Option("--model", help="vbp, fbp or softbw (a SoftBW run, per VM)")] = "vbp",
    tolerance: Annotated[float, typer.Option("--tolerance", help="flag if price > perf x (1+tol)")] = 0.05,
    metric: Annotated[str, typer.Option("--metric", help="auto, rate (long-lived) or fct (finite)")] = "auto",
    as_json: JsonOpt = False,
) -> None:
    """Per CoS: price ratio to BE vs achieved performance ratio to BE; flag who pays more than it gets."""
    from paccp.pricing.book import load_book
    from paccp.pricing.consistency import consistency

    bk, _ = load_book(book)
    if _model(model) == "softbw":  # per VM, from usage.jsonl + softbw_cycles.parquet (a SoftBW run)
        from paccp.pricing import softbw_consistency as sbw

        vms = sbw.softbw_consistency(run_dir, bk, tolerance)
        if as_json:
            print(
                json.dumps(
                    {"model": "softbw", "tolerance": tolerance, "vms": [v.to_json() for v in vms]}, indent=2
                )
            )
        else:
            sbw.print_table(vms, bk.currency, tolerance)
        return
    rep = consistency(run_dir, bk, _model(model), tolerance, metric)
    if as_json:
        print(json.dumps(rep.to_json(), indent=2))
        return
    con = _out()
    con.print(_ratio_table(rep, bk.currency))
    flagged = sum(g.flagged for g in rep.groups)
    con.print(_lit(f"tolerance {tolerance:.0%}: {flagged} group(s) pay more than they get"))


@price_app.command("calibrate")
def calibrate_cmd(
    run_dir: Annotated[Path, typer.Argument(help="a run directory (flows.parquet) from `paccp run`")],
    book: BookOpt = None,
    model: Annotated[str, typer.Option("--model", help="vbp or fbp")] = "vbp",
    metric: Annotated[str, typer.Option("--metric", help="auto, rate or fct")] = "auto",
    as_json: JsonOpt = False,
) -> None:
    """Propose the P1 (and P2) that make price and measured performance consistent for this run."""
    from paccp.pricing.book import load_book
    from paccp.pricing.consistency import calibrate, consistency

    bk, _ = load_book(book)
    rep = consistency(run_dir, bk, _model(model), DEFAULT_TOL, metric)
    cal = calibrate(rep, bk)
    if as_json:
        print(json.dumps({"consistency": rep.to_json(), "calibration": cal.to_json()}, indent=2))
        return
    con = _out()
    con.print(_ratio_table(rep, bk.currency))
    names = ("p1", "p2") if model == "vbp" else ("p1s", "p2s")
    base = "p0" if model == "vbp" else "p0s"
    if cal.k is not None:
        con.print(
            _lit(f"k = {names[0]}/{base} = {cal.k:.4f} -> {names[0]} = {cal.p1} (book: {cal.current_p1})")
        )
    if cal.m is not None:
        con.print(_lit(f"m = {names[1]}/{base} per Gb/s = {cal.m:.4f} -> {names[1]} = {cal.p2} per Gb/s-hour "
                       f"(book: {cal.current_p2} per Gb/s-hour)"))  # fmt: skip
    for n in cal.notes:
        con.print(_lit(f"note: {n}"))


DEFAULT_TOL = 0.05


@tenant_app.command("add")
def tenant_add(
    name: Annotated[str, typer.Argument(help="tenant name, as in usage records")],
    model: Annotated[str, typer.Option("--model", help="vbp, fbp or softbw")] = "vbp",
    book: BookOpt = None,
    db: DbOpt = None,
) -> None:
    """Enrol a tenant with a pricing model and a snapshot of a price book."""
    from paccp.pricing.book import load_book, parse_book
    from paccp.pricing.ledger import Ledger, check_name

    _, text = load_book(book)
    check_name(name)
    parse_book(text, str(book or "price book")).section(_model(model))  # all checked before the ledger opens
    added = Ledger(db).add_tenant(name, model, text)
    print(f"tenant {name}: {'added' if added else 'already present, unchanged'} ({model})")


@tenant_app.command("list")
def tenant_list(db: DbOpt = None) -> None:
    """List tenants."""
    from paccp.pricing.ledger import Ledger

    for t in Ledger(db, create=False).tenants():
        print(f"{t.name}\t{t.model}\t{t.book.name}\t{t.book_sha256[:12]}")


@bill_app.command("grants")
def grants_cmd(
    ingest_role: Annotated[
        str, typer.Option("--ingest-role", help="role that ingests and issues")
    ] = "paccp_ingest",
    reader_role: Annotated[
        str, typer.Option("--reader-role", help="read-only role for invoices")
    ] = "paccp_reader",
    controller_role: Annotated[
        str, typer.Option("--controller-role", help="role of paccp serve (the svc_* tables too)")
    ] = "paccp_controller",
) -> None:
    """Print the PostgreSQL GRANTs for an ingest role, a read-only invoice role and the controller's role
    (run them as the owner, after the owner has created or migrated the ledger)."""
    from paccp.pricing.schema import pg_grants

    try:
        stmts = pg_grants(ingest_role, reader_role, controller_role)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    for stmt in stmts:
        print(stmt + ";")


@bill_app.command("ingest")
def ingest_cmd(
    files: Annotated[list[Path], typer.Argument(help="usage files (.jsonl or .parquet)")],
    tenant: Annotated[
        str | None, typer.Option("--tenant", help="the tenant these files bill (every record must name it)")
    ] = None,
    all_tenants: Annotated[
        bool,
        typer.Option("--all-tenants", help="operator's multi-tenant import: records may name any tenant"),
    ] = False,
    db: DbOpt = None,
) -> None:
    """Ingest usage files for one tenant; each file all-or-nothing, idempotent on (tenant, record_id)."""
    from paccp.common.console import progress
    from paccp.pricing.ledger import Ledger

    if (tenant is None) == (not all_tenants):
        raise UserError(
            "name the tenant these files bill with --tenant NAME (or, as the operator importing several"
            " tenants at once, --all-tenants)"
        )
    for f in files:  # a missing or unreadable file is reported before the ledger is opened
        if not f.is_file():
            raise UserError(f"{f}: no such usage file" if not f.exists() else f"{f}: not a usage file")
    led = Ledger(db, create=False)
    with progress() as prog:
        for f in files:
            task = prog.add_task(cons.literal(f"reading {f.name}").markup, total=_count_records(f))
            r = led.ingest_file(f, lambda n, task=task: prog.update(task, completed=n), tenant=tenant)  # type: ignore[misc]
            prog.remove_task(task)
            print(f"{f}: {r.new} new, {r.unchanged} already ingested", flush=True)


def _count_records(path: Path) -> int | None:
    """Records in a usage file, for the progress bar (None if unknown)."""
    try:
        if not path.is_file():
            return None
        if path.suffix == ".parquet":
            import pyarrow.parquet as pq

            return int(pq.ParquetFile(path).metadata.num_rows)
        with path.open("rb") as fh:
            return sum(1 for line in fh if line.strip())
    except Exception:  # the ingest itself reports unreadable files properly
        return None


@bill_app.command("invoice")
def invoice_cmd(
    tenant: Annotated[str, typer.Option("--tenant", help="tenant name")],
    period: Annotated[str, typer.Option("--period", help="UTC month, YYYY-MM")],
    db: DbOpt = None,
    as_json: JsonOpt = False,
    csv_file: Annotated[Path | None, typer.Option("--csv", help="also write the invoice as CSV")] = None,
    issue: Annotated[
        bool, typer.Option("--issue", help="store it as issued (a new revision if changed)")
    ] = False,
) -> None:
    """A tenant's invoice for a month: line items per VM/flow and CoS, totals."""
    from paccp.pricing.charging import build_invoice
    from paccp.pricing.ledger import Ledger
    from paccp.pricing.period import Period

    month = Period.parse(period, "--period")
    period = str(month)
    s, e = month.bounds_ns()
    led = Ledger(db, create=False)
    t = led.tenant(tenant)
    inv = build_invoice(t.name, t.model, t.book, led.usage(t.name, s, e), period)
    if csv_file is not None:
        try:
            csv_file.write_text(inv.to_csv(), encoding="utf-8")
        except OSError as exc:
            raise UserError(f"{csv_file}: cannot write ({exc.strerror})") from None
    note = None
    if issue:
        rev, new = led.issue(t.name, period, inv.currency, str(inv.total), inv.to_json())
        note = f"issued revision {rev}" if new else f"unchanged since issued revision {rev}"
    if as_json:
        body = inv.to_json()
        if note is not None:
            body["issued"] = note
        print(json.dumps(body, indent=2))
        return
    from paccp.pricing.render import invoice_table

    tab = invoice_table(inv, tenant, period, t.model)
    con = _out()
    con.print(tab)
    if note is not None:
        con.print(_lit(note))
