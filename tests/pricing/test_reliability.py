"""Reliability of ingestion with real processes: concurrency, SIGKILL mid-transaction, bad CLI input."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from pricing_fixtures import T0, H, rec

from paccp.common.usage import write_usage
from paccp.pricing.charging import build_invoice, parse_period
from paccp.pricing.ledger import SLEEP_ENV, Ledger

N = 400


def paccp(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run the real CLI in a fresh process."""
    return subprocess.run(
        [sys.executable, "-m", "paccp.cli", *args], capture_output=True, text=True, env=env, timeout=120
    )


def start(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "paccp.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


@pytest.fixture()
def setup(tmp_path: Path, book_file: Path, db: str) -> tuple[str, Path, Path]:
    """A ledger (SQLite, then PostgreSQL) with tenant acme (VBP) and two overlapping usage files (records
    0..N-1 and N/2..3N/2-1)."""
    Ledger(db).add_tenant("acme", "vbp", book_file.read_text())
    recs = [
        rec(record_id=f"r{i}", vm=f"vm{i % 7}", flow_id=f"f{i}", cos="ds", omega="2",
            start_ns=T0 + i * H // 10, end_ns=T0 + i * H // 10 + H // 4)
        for i in range(3 * N // 2)
    ]  # fmt: skip
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    write_usage(recs[:N], a)
    write_usage(recs[N // 2 :], b)
    return db, a, b


def invoice(db: str) -> dict[str, object]:
    """The tenant's November invoice (in this process)."""
    led = Ledger(db)
    t = led.tenant("acme")
    s, e = parse_period("2026-11")
    return build_invoice("acme", t.model, t.book, led.usage("acme", s, e), "2026-11").to_json()


def reference_invoice(tmp_path: Path, book_file: Path, *files: Path) -> dict[str, object]:
    """The invoice of a clean, single-process, one-at-a-time ingestion."""
    ref = str(tmp_path / "ref.sqlite")
    led = Ledger(ref)
    led.add_tenant("acme", "vbp", book_file.read_text())
    for f in files:
        led.ingest_file(f, tenant="acme")
    return invoice(ref)


def test_two_concurrent_ingesters_lose_nothing_double_charge_nothing(
    tmp_path: Path, book_file: Path, setup: tuple[str, Path, Path]
) -> None:
    db, a, b = setup
    procs = [
        start("bill", "ingest", str(f), "--tenant", "acme", "--db", db) for f in (a, b)
    ]  # overlapping files, at once
    results = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], results
    assert Ledger(db).count_usage() == 3 * N // 2
    news = sorted(int(out.split(": ")[1].split()[0]) for out, _err in results)
    assert sum(news) == 3 * N // 2  # every record written by exactly one of them
    out = paccp("bill", "invoice", "--tenant", "acme", "--period", "2026-11", "--json", "--db", db)
    assert out.returncode == 0, out.stderr
    inv = json.loads(out.stdout)
    assert inv == invoice(db) == reference_invoice(tmp_path, book_file, a, b)
    assert inv["total"] != "0.00"


def test_sigkill_mid_ingest_leaves_nothing_and_rerun_completes(
    tmp_path: Path, book_file: Path, setup: tuple[str, Path, Path], new_db: Callable[..., str]
) -> None:
    db, a, _b = setup
    env = {**os.environ, SLEEP_ENV: "60"}
    victim = start("bill", "ingest", str(a), "--tenant", "acme", "--db", db, env=env)
    assert victim.stderr is not None
    line = victim.stderr.readline()  # the hook prints this after half the rows are inserted, inside the txn
    assert line.startswith("INGEST-MIDWAY"), line
    # meanwhile readers are not blocked and see none of the uncommitted rows
    assert invoice(db)["total"] == "0.00" and Ledger(db).count_usage() == 0
    # a second ingester started now must wait for the lock, then do the whole file itself
    waiter = start("bill", "ingest", str(a), "--tenant", "acme", "--db", db)
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait(timeout=30)
    assert victim.returncode == -signal.SIGKILL
    out, err = waiter.communicate(timeout=120)
    assert waiter.returncode == 0, err
    assert f"{N} new" in out
    assert Ledger(db).count_usage() == N
    # and the plain case: kill, nothing is left, re-running completes it
    db2 = new_db()
    Ledger(db2).add_tenant("acme", "vbp", book_file.read_text())
    victim = start("bill", "ingest", str(a), "--tenant", "acme", "--db", db2, env=env)
    assert victim.stderr is not None and victim.stderr.readline().startswith("INGEST-MIDWAY")
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait(timeout=30)
    led = Ledger(db2)
    assert led.count_usage() == 0
    with led.engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT COUNT(*) FROM ingest_batch").scalar() == 0
    assert paccp("bill", "ingest", str(a), "--tenant", "acme", "--db", db2).returncode == 0
    Ledger(db2).ingest_file(a, tenant="acme")  # twice = once
    assert invoice(db2) == reference_invoice(tmp_path, book_file, a)


BAD_LINES = [
    ('{"record_id": "x"', "not valid JSON"),
    (json.dumps({**json.loads(rec().to_json_line()), "cos": "gold"}), "cos"),
    (json.dumps({**json.loads(rec().to_json_line()), "bytes": -5}), "bytes"),
    (json.dumps({**json.loads(rec().to_json_line()), "end_ns": T0 - 1}), "before start_ns"),
    (json.dumps({**json.loads(rec().to_json_line()), "tenant": "nobody"}), "unknown tenant 'nobody'"),
    (json.dumps({**json.loads(rec().to_json_line()), "record_id": None}), "record_id"),
]


@pytest.mark.parametrize(("bad", "needle"), BAD_LINES)
def test_bad_records_rejected_one_line_exit_2_nothing_written(
    tmp_path: Path, book_file: Path, bad: str, needle: str
) -> None:
    """Records are checked before the database is touched: one backend (SQLite) is enough here."""
    db = str(tmp_path / "ledger.sqlite")
    Ledger(db).add_tenant("acme", "vbp", book_file.read_text())
    path = tmp_path / "bad.jsonl"
    good = [rec(record_id=f"g{i}").to_json_line() for i in range(5)]
    path.write_text("\n".join([*good, bad, *good[:1]]) + "\n")
    out = paccp("bill", "ingest", str(path), "--all-tenants", "--db", db)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("paccp: error: ") and needle in lines[0], out.stderr
    assert "Traceback" not in out.stderr
    assert Ledger(db).count_usage() == 0
