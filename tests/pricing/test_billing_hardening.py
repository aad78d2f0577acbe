"""Hostile and careless input to pricing and billing: one line on stderr and exit 2, never a traceback,
nothing left behind; exact money for any quantum; tenants isolated; private default ledger."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
from decimal import Decimal
from pathlib import Path

import pytest
from pricing_fixtures import BOOK, T0, H, rec

from paccp.cli import main
from paccp.common.usage import parse_record, write_usage
from paccp.errors import UserError
from paccp.pricing.book import parse_book
from paccp.pricing.ledger import Ledger
from paccp.pricing.quote import quote


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run ``paccp ARGS`` in-process; return (exit code, stdout, stderr)."""
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def one_line_error(code: int, err: str) -> bool:
    lines = err.strip().splitlines()
    return code == 2 and len(lines) == 1 and lines[0].startswith("paccp: error: ") and "Traceback" not in err


# --- money -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["half_even", "half_up", "up", "down", "floor"])
def test_quantum_0_05_gives_0_05_steps_and_parts_add_up(mode: str) -> None:
    bk = parse_book(BOOK.replace('quantum = "0.01"', 'quantum = "0.05"').replace("half_even", mode))
    for minutes in (7, 13, 61, 95, 1000):
        q = quote("vbp", "mrg", 3_000_000_000, Decimal("1.7"), minutes * 60 * 10**9, bk)
        assert q.total % Decimal("0.05") == 0, q.total
        assert all(c.amount % Decimal("0.05") == 0 for c in q.components)
        assert sum(c.amount for c in q.components) == q.total
        assert str(q.total).count(".") == 1 and len(str(q.total).split(".")[1]) == 2


def test_invoice_with_a_coarse_quantum_adds_up(tmp_path: Path) -> None:
    from paccp.pricing.charging import build_invoice

    bk = parse_book(BOOK.replace('quantum = "0.01"', 'quantum = "0.25"'))
    recs = [
        rec(record_id=f"r{i}", vm=f"vm{i}", cos="ds", omega="2", end_ns=T0 + (i + 1) * H // 7)
        for i in range(9)
    ]
    inv = build_invoice("acme", "vbp", bk, recs, "2026-11")
    amounts = [ln.amount for ln in inv.lines]
    assert all(a % Decimal("0.25") == 0 for a in amounts) and sum(amounts) == inv.total
    assert sum(inv.subtotals.values()) == inv.total


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["price", "buy", "--budget", "1e26"], "budget must be a finite amount"),
        (["price", "buy", "--budget", "nan"], "finite"),
        (["price", "buy", "--budget", "inf"], "finite"),
        (["price", "quote", "--cos", "ds", "--omega", "nan"], "finite"),
        (["price", "quote", "--cos", "ds", "--omega", "1e999999"], "omega"),
        (["price", "quote", "--cos", "mrg", "--theta", "1e30Gbit"], "too large"),
        (["price", "quote", "--cos", "mrg", "--theta", "2000Tbit"], "theta must be between"),
        (["price", "quote", "--duration", "1000000000h"], "duration"),
        (["price", "quote", "--model", "softbw", "--guarantee", "fair", "--rate", "inf"], "rate"),
    ],
)
def test_quote_arguments_out_of_bounds(
    capsys: pytest.CaptureFixture[str], book_file: Path, args: list[str], needle: str
) -> None:
    code, _, err = cli(capsys, *args, "--book", str(book_file))
    assert one_line_error(code, err) and needle in err, err


def test_amount_beyond_the_limit_is_an_error(book_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    huge = book_file.parent / "huge.toml"
    huge.write_text(BOOK.replace('p1 = "0.06"', 'p1 = "1000000000"'))  # 1e12 per hour at omega 1001
    args = ["price", "quote", "--cos", "ds", "--omega", "1001", "--duration", "365d", "--book", str(huge)]
    code, _, err = cli(capsys, *args)
    assert one_line_error(code, err) and "beyond the limit" in err


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (('p0 = "0.10"', "p0 = nan"), "vbp.p0"),
        (('p0 = "0.10"', "p0 = inf"), "vbp.p0"),
        (('p0 = "0.10"', "p0 = 1e26"), "vbp.p0"),
        (('quantum = "0.01"', "quantum = 0"), "rounding.quantum"),
        (('quantum = "0.01"', 'quantum = "1e-40"'), "rounding.quantum"),
        (('quantum = "0.01"', "quantum = nan"), "rounding.quantum"),
        (('capacity = "10Gbit"', 'capacity = "1e400Gbit"'), "capacity"),
        (('capacity = "10Gbit"', 'capacity = "2000Tbit"'), "capacity"),
        (('beta = "0.6"', "beta = nan"), "softbw.beta"),
    ],
)
def test_book_values_out_of_bounds(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, edit: tuple[str, str], needle: str
) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(BOOK.replace(*edit, 1))
    code, _, err = cli(capsys, "price", "check", str(bad))
    assert one_line_error(code, err) and needle in err, err


@pytest.mark.parametrize("period", ["0000-01", "1969-12", "2262-05", "9999-12"])
def test_periods_outside_int64_time(capsys: pytest.CaptureFixture[str], tmp_path: Path, period: str) -> None:
    db = str(tmp_path / "l.sqlite")
    Ledger(db).add_tenant("acme", "vbp", BOOK)
    code, _, err = cli(capsys, "bill", "invoice", "--tenant", "acme", "--period", period, "--db", db)
    assert one_line_error(code, err) and "year must be between 1970 and 2261" in err


# --- files -----------------------------------------------------------------------------------------


def test_unreadable_inputs_are_one_line_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    db = str(tmp_path / "l.sqlite")
    book = tmp_path / "latin1.toml"
    book.write_bytes(BOOK.replace('name = "test"', 'name = "caf\xe9"').encode("latin-1"))
    code, _, err = cli(capsys, "price", "check", str(book))
    assert one_line_error(code, err) and "not UTF-8" in err and "line 2" in err
    assert (
        cli(capsys, "bill", "tenant", "add", "acme", "--book", str(tmp_path / "nope.toml"), "--db", db)[0]
        == 2
    )
    assert not Path(db).exists()  # a failed tenant add creates no ledger
    Ledger(db).add_tenant("acme", "vbp", BOOK)
    usage = tmp_path / "u.jsonl"
    usage.write_bytes(rec().to_json_line().encode() + b"\n" + b'{"vm": "\xff"}\n')
    parquet = tmp_path / "corrupt.parquet"
    parquet.write_bytes(b"PAR1 this is not parquet PAR1")
    cases = [
        (usage, "line 2: not UTF-8"),
        (tmp_path, "not a usage file"),
        (parquet, "not a readable Parquet usage file"),
    ]
    for path, needle in cases:
        code, _, err = cli(capsys, "bill", "ingest", str(path), "--tenant", "acme", "--db", db)
        assert one_line_error(code, err) and needle in err, err
    assert Ledger(db).count_usage() == 0


def test_a_file_that_is_not_a_ledger(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    notdb = tmp_path / "notes.txt"
    notdb.write_text("hello, I am not a database\n" * 50)
    code, _, err = cli(capsys, "bill", "tenant", "list", "--db", str(notdb))
    assert one_line_error(code, err) and "not an SQLite database" in err
    assert notdb.read_text().startswith("hello")  # untouched
    other = tmp_path / "other.sqlite"  # an SQLite database of another program: not ours to change
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE photos (id INTEGER PRIMARY KEY)")
    con.commit()
    con.close()
    before = other.read_bytes()
    code, _, err = cli(capsys, "bill", "tenant", "add", "x", "--db", str(other))
    assert one_line_error(code, err) and "not a paccp ledger (it has tables photos)" in err
    assert other.read_bytes() == before
    code, _, err = cli(capsys, "bill", "tenant", "list", "--db", str(tmp_path))
    assert one_line_error(code, err) and "directory" in err
    code, _, err = cli(capsys, "bill", "tenant", "list", "--db", "mysql://x@y/z")
    assert one_line_error(code, err)
    code, _, err = cli(capsys, "bill", "tenant", "list", "--db", str(tmp_path / "missing.sqlite"))
    assert (
        one_line_error(code, err) and "does not exist" in err and not (tmp_path / "missing.sqlite").exists()
    )


# --- usage values ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"bytes": True}, "bytes"),
        ({"bytes": 2**63}, "bytes"),
        ({"start_ns": 2**64}, "start_ns"),
        ({"omega": "1e999999"}, "omega"),
        ({"omega": "NaN"}, "omega"),
        ({"omega": 0}, "omega"),
        ({"theta_bps": 10**15 + 1, "cos": "mrg"}, "theta_bps"),
        ({"bytes": 10**15 * 3600 // 8 + 65_537}, "more than a 1000000 Gb/s link carries"),
        ({"bytes": 65_537, "end_ns": T0}, "more than a 1000000 Gb/s link carries"),
        ({"tenant": "ac\x00me"}, "control characters"),
        ({"vm": "\ud800"}, "unicode"),
        ({"deadline_met": 1, "deadline_ns": T0}, "deadline_met"),
    ],
)
def test_physical_bounds(change: dict[str, object], needle: str) -> None:
    d = json.loads(rec().to_json_line())
    d.update(change)
    with pytest.raises(UserError, match=needle.replace("(", r"\(")):
        parse_record(d)


def test_canonical_omega() -> None:
    spellings = ["2", "2.0", "2.000", "2E+0", "0.2e1"]
    lines = {
        parse_record({**json.loads(rec().to_json_line()), "omega": s, "cos": "ds"}).to_json_line()
        for s in spellings
    }
    assert len(lines) == 1 and '"omega":"2"' in lines.pop()


# --- tenants and display ---------------------------------------------------------------------------


def test_one_tenant_cannot_bill_another(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, book_file: Path
) -> None:
    db = str(tmp_path / "l.sqlite")
    for t in ("acme", "victim"):
        assert cli(capsys, "bill", "tenant", "add", t, "--book", str(book_file), "--db", db)[0] == 0
    evil = tmp_path / "evil.jsonl"
    write_usage(
        [rec(record_id="x", tenant="acme"), rec(record_id="y", tenant="victim", end_ns=T0 + 30 * H)], evil
    )
    code, _, err = cli(capsys, "bill", "ingest", str(evil), "--tenant", "acme", "--db", db)
    assert one_line_error(code, err) and "belongs to tenant 'victim', not 'acme'" in err
    code, _, err = cli(capsys, "bill", "ingest", str(evil), "--db", db)
    assert one_line_error(code, err) and "--tenant" in err
    assert Ledger(db).count_usage() == 0
    code, out, _ = cli(
        capsys, "bill", "invoice", "--tenant", "victim", "--period", "2026-11", "--json", "--db", db
    )
    assert code == 0 and json.loads(out)["total"] == "0.00"


@pytest.mark.parametrize("name", ["[red]x[/]", "[/]", "[bold]", "a]b[c"])
def test_names_are_printed_literally(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    book_file: Path,
    name: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # no wrapping inside a cell
    db = str(tmp_path / "l.sqlite")
    assert cli(capsys, "bill", "tenant", "add", name, "--book", str(book_file), "--db", db)[0] == 0
    usage = tmp_path / "u.jsonl"
    write_usage([rec(tenant=name, vm=f"vm{name}", flow_id=name)], usage)
    assert cli(capsys, "bill", "ingest", str(usage), "--tenant", name, "--db", db)[0] == 0
    code, out, err = cli(capsys, "bill", "invoice", "--tenant", name, "--period", "2026-11", "--db", db)
    assert code == 0, err
    assert f"invoice {name} 2026-11" in out and f"vm{name}" in out


def test_default_ledger_is_private_and_per_user(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, book_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PACCP_LEDGER", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)
    assert cli(capsys, "bill", "tenant", "add", "acme", "--book", str(book_file))[0] == 0
    path = tmp_path / "data" / "paccp" / "ledger.sqlite"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert not list(tmp_path.glob("*.sqlite"))  # nothing in the current directory
    usage = tmp_path / "u.jsonl"
    write_usage([rec()], usage)
    assert cli(capsys, "bill", "ingest", str(usage), "--tenant", "acme")[0] == 0
    for f in path.parent.iterdir():  # journals too
        assert stat.S_IMODE(f.stat().st_mode) & 0o077 == 0, f
    other = tmp_path / "explicit.sqlite"
    monkeypatch.setenv("PACCP_LEDGER", str(other))
    assert cli(capsys, "bill", "tenant", "add", "acme", "--book", str(book_file))[0] == 0
    assert stat.S_IMODE(other.stat().st_mode) == 0o600
    assert os.environ["PACCP_LEDGER"] == str(other)


# --- one period type, one spelling per month (issue 30) ---------------------------------------------


FULL_WIDTH = "\uff12\uff10\uff12\uff16-\uff11\uff11"  # 2026-11 in full-width digits
ARABIC_INDIC = "\u0662\u0660\u0662\u0666-\u0661\u0661"


@pytest.mark.parametrize(
    "period",
    [" 2026-11", "2026-11\n", "2026-11 ", FULL_WIDTH, ARABIC_INDIC, "2026-1", "26-11", "2026/11",
     "2026-11-01", "+2026-11", ""],
)  # fmt: skip
def test_period_is_strict_yyyy_mm(capsys: pytest.CaptureFixture[str], tmp_path: Path, period: str) -> None:
    """Whitespace, a newline, full-width or Arabic-Indic digits: not a second spelling of 2026-11."""
    db = str(tmp_path / "l.sqlite")
    Ledger(db).add_tenant("acme", "vbp", BOOK)
    args = ["bill", "invoice", "--tenant", "acme", "--period", period, "--db", db, "--issue"]
    code, _, err = cli(capsys, *args)
    assert one_line_error(code, err) and "--period" in err and "YYYY-MM" in err, err
    with pytest.raises(UserError, match="YYYY-MM"):
        Ledger(db).issue("acme", period, "USD", "0", {})
    assert Ledger(db).issued("acme", "2026-11") == []


def test_a_month_is_issued_once_whatever_the_spelling(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db = str(tmp_path / "l.sqlite")
    Ledger(db).add_tenant("acme", "vbp", BOOK)
    inv = ["bill", "invoice", "--tenant", "acme", "--db", db, "--issue", "--period"]
    assert "issued revision 1" in cli(capsys, *inv, "2026-11")[1]
    for other in (" 2026-11", "2026-11\n", FULL_WIDTH, ARABIC_INDIC):
        assert cli(capsys, *inv, other)[0] == 2
    assert "unchanged since issued revision 1" in cli(capsys, *inv, "2026-11")[1]
    assert len(Ledger(db).issued("acme", "2026-11")) == 1


@pytest.mark.parametrize("period", [" 2026-11", "2026-11\n", FULL_WIDTH, "2026-13"])
def test_the_database_refuses_another_spelling(db: str, period: str) -> None:
    """The constraint holds below the application too (trigger on SQLite, CHECK on PostgreSQL)."""
    from sqlalchemy import text
    from sqlalchemy.exc import DatabaseError

    led = Ledger(db)
    led.add_tenant("acme", "vbp", BOOK)
    ins = (
        "INSERT INTO invoice (tenant, period, revision, currency, total, body_json, body_sha256, issued_at)"
        " VALUES ('acme', :p, 1, 'USD', '0', '{}', 'x', 'now')"
    )
    with pytest.raises(DatabaseError, match="period"), led.engine.begin() as conn:
        conn.execute(text(ins), {"p": period})
    with led.engine.begin() as conn:
        conn.execute(text(ins), {"p": "2026-11"})
    assert len(led.issued("acme", "2026-11")) == 1


def test_migration_sets_aside_invoices_of_other_spellings(tmp_path: Path) -> None:
    """A ledger that issued 2026-11 twice (as '2026-11' and ' 2026-11') keeps the canonical one; the other
    goes to invoice_quarantine with the reason."""
    import shutil

    path = tmp_path / "old.sqlite"
    shutil.copy(Path(__file__).parent / "data" / "ledger-v3.sqlite", path)
    con = sqlite3.connect(path)
    con.execute(
        "INSERT INTO invoice (tenant, period, revision, currency, total, body_json, body_sha256, issued_at)"
        " VALUES ('acme', ' 2026-11', 1, 'USD', '0.10', '{}', 'x', 'then')"
    )
    con.commit()
    con.close()
    led = Ledger(str(path))
    assert [r for r, _, _ in led.issued("acme", "2026-11")] == [1]
    with led.engine.connect() as conn:
        from sqlalchemy import text

        rows = conn.execute(text("SELECT tenant, reason FROM invoice_quarantine")).all()
        periods = [r[0] for r in conn.execute(text("SELECT period FROM invoice"))]
    assert rows == [("acme", "period ' 2026-11' is not YYYY-MM in ASCII digits")]
    assert periods == ["2026-11"]
