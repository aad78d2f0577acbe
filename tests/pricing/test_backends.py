"""The same usage on SQLite and on PostgreSQL gives byte-identical invoices (JSON, CSV, table, issued)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from pricing_fixtures import BOOK, T0, H, rec
from sqlalchemy import select

from paccp.cli import main
from paccp.pricing import schema
from paccp.pricing.ledger import Ledger
from paccp.pricing.pgtemp import TempPostgres
from paccp.usage import write_usage

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
