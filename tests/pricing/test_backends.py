"""The same usage on SQLite and on PostgreSQL gives byte-identical invoices (JSON, CSV, table, issued)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from pricing_fixtures import BOOK, T0, H, rec
from sqlalchemy import select, text
from sqlalchemy.exc import DBAPIError

from paccp.cli import main
from paccp.common.usage import write_usage
from paccp.pricing import schema
from paccp.pricing.ledger import Ledger
from paccp.pricing.pgtemp import TempPostgres

G = 1_000_000_000


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """Run ``paccp ARGS`` in-process; return stdout (exit code must be 0)."""
    try:
        main(list(args))
    except SystemExit as exc:
        assert not exc.code, capsys.readouterr().err
    return capsys.readouterr().out


def usage_files(tmp_path: Path) -> dict[str, Path]:
    """Random usage of three tenants (VBP, FBP, SoftBW), with awkward omegas and month boundaries."""
    rng = random.Random(11)
    files: dict[str, Path] = {}
    for tenant in ("acme", "beta", "gamma"):
        recs = []
        for i in range(300):
            a = T0 - 2 * H + rng.randrange(0, 40 * H)
            b = a + rng.randrange(1, 3 * H)
            kind = rng.choice(["be", "ds", "mrg"])
            om = {"be": "1", "ds": rng.choice(["2", "2.50", "1.333333333333333333"]), "mrg": "1.5"}[kind]
            th = 3 * G if kind == "mrg" else 0
            extra: dict[str, object] = {}
            if tenant == "gamma":
                extra = {"guarantee": {"be": "none", "ds": "fair", "mrg": "strict"}[kind],
                         "bytes": rng.randrange(0, (b - a) // 8)}  # fmt: skip
            recs.append(rec(record_id=f"{tenant}-{i}", tenant=tenant, vm=f"vm{rng.randrange(9)}",
                            flow_id=f"f{i}", cos=kind, omega=om, theta_bps=th, start_ns=a, end_ns=b,
                            **extra))  # fmt: skip
        files[tenant] = tmp_path / f"{tenant}.jsonl"
        write_usage(recs, files[tenant])
    return files


def test_same_usage_gives_byte_identical_invoices(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, book_file: Path, pg: TempPostgres
) -> None:
    files = usage_files(tmp_path)
    dbs = {"sqlite": str(tmp_path / "l.sqlite"), "postgresql": pg.create_database("identical")}
    outputs: dict[str, list[bytes]] = {}
    for backend, db in dbs.items():
        got: list[bytes] = []
        for tenant, model in (("acme", "vbp"), ("beta", "fbp"), ("gamma", "softbw")):
            cli(
                capsys,
                "bill",
                "tenant",
                "add",
                tenant,
                "--model",
                model,
                "--book",
                str(book_file),
                "--db",
                db,
            )
            cli(capsys, "bill", "ingest", str(files[tenant]), "--tenant", tenant, "--db", db)
            for period in ("2026-10", "2026-11"):
                inv = ["bill", "invoice", "--tenant", tenant, "--period", period, "--db", db]
                csv = tmp_path / f"{backend}-{tenant}-{period}.csv"
                got.append(cli(capsys, *inv, "--json", "--csv", str(csv)).encode())
                got.append(csv.read_bytes())
                got.append(cli(capsys, *inv).encode())
                got.append(cli(capsys, *inv, "--issue", "--json").encode())
        inv_t = schema.invoice
        cols = [inv_t.c[c] for c in ("tenant", "period", "revision", "total", "body_json", "body_sha256")]
        with Ledger(db).engine.connect() as conn:
            rows = conn.execute(select(*cols)).all()
        got.extend(repr(tuple(map(str, r))).encode() for r in sorted(rows))
        outputs[backend] = got
    assert len(outputs["sqlite"]) == len(outputs["postgresql"]) == 3 * 2 * 4 + 6
    for a, b in zip(outputs["sqlite"], outputs["postgresql"], strict=True):
        assert a == b
    assert b'"total": "0.00"' not in outputs["sqlite"][0]  # the comparison is over real amounts
    assert BOOK  # the book both ledgers snapshot


def test_postgresql_roles(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, book_file: Path, pg: TempPostgres
) -> None:
    """The owner migrates and enrols; the ingest role ingests and issues; the reader only reads invoices.
    Neither can change a usage row even without the triggers' help (no UPDATE privilege)."""
    owner = pg.create_database("roles", "template0")
    cli(
        capsys, "bill", "tenant", "add", "acme", "--book", str(book_file), "--db", owner
    )  # creates the schema
    for role in ("paccp_ingest", "paccp_reader", "paccp_controller"):
        pg.execute(f"DO $$ BEGIN CREATE ROLE {role} LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$")
    for stmt in cli(capsys, "bill", "grants").strip().splitlines():
        pg.execute(stmt, dbname="roles")
    ingest, reader = pg.url("roles", "paccp_ingest"), pg.url("roles", "paccp_reader")
    usage = tmp_path / "u.jsonl"
    write_usage([rec(record_id="a"), rec(record_id="b", vm="vm2")], usage)
    assert "2 new" in cli(capsys, "bill", "ingest", str(usage), "--tenant", "acme", "--db", ingest)
    inv = ["bill", "invoice", "--tenant", "acme", "--period", "2026-11", "--json"]
    assert '"total": "0.20"' in cli(capsys, *inv, "--db", reader)
    assert "issued revision 1" in cli(capsys, *inv, "--issue", "--db", ingest)
    write_usage([rec(record_id="c", vm="vm3")], usage)
    assert "1 new" in cli(capsys, "bill", "ingest", str(usage), "--tenant", "acme", "--db", ingest)
    fresh = tmp_path / "fresh.jsonl"
    write_usage([rec(record_id="d", vm="vm4")], fresh)
    for args in (["bill", "ingest", str(fresh), "--tenant", "acme"], [*inv, "--issue"]):
        try:
            main([*args, "--db", reader])
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
        err = capsys.readouterr().err
        assert code == 2 and "permission denied" in err and len(err.strip().splitlines()) == 1, err
    led = Ledger(ingest)
    with pytest.raises(DBAPIError, match="permission denied"), led.engine.begin() as conn:
        conn.execute(text("UPDATE usage SET bytes = 0"))
    with pytest.raises(DBAPIError, match="permission denied"), led.engine.begin() as conn:
        conn.execute(text("UPDATE svc_meta SET value = value + 1"))  # the controller's tables are not its
    led.close()
    ctl = Ledger(pg.url("roles", "paccp_controller"))  # paccp serve's role: its tables, never usage
    with ctl.engine.begin() as conn:
        conn.execute(text("UPDATE svc_meta SET value = value + 1 WHERE key = 'generation'"))
        conn.execute(text("DELETE FROM svc_rate"))
    with pytest.raises(DBAPIError, match="permission denied"), ctl.engine.begin() as conn:
        conn.execute(text("DELETE FROM usage"))
    ctl.close()
