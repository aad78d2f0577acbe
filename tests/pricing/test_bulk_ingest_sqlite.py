"""The SQLite bulk insert (one driver executemany) stores exactly what the SQLAlchemy Core insert stored."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from pricing_fixtures import BOOK, T0, H, rec
from sqlalchemy.dialects import sqlite as sqlite_dialect

from paccp.common.usage import UsageRecord
from paccp.pricing import schema
from paccp.pricing.ledger import Ledger, _content_hash

RECS = [
    rec(record_id="a", omega="2.50", cos="ds", theta_bps=0),
    rec(record_id="b", cos="mrg", theta_bps=7, omega="1E+1", flow_id=None),
    rec(record_id="c", deadline_ns=T0 + H, deadline_met=True, guarantee="dynamic"),
    rec(record_id="d", deadline_ns=T0 + H, deadline_met=False, start_ns=T0 + 5, end_ns=T0 + 5, bytes=0),
    rec(record_id="e", omega="0.000000001", vm="vm\u00e9 2", bytes=10**12),
]


def _row(r: UsageRecord, content_sha256: str, batch_id: int) -> dict[str, object]:
    d = r.model_dump()
    d.pop("schema_version")
    return {**d, "batch_id": batch_id, "content_sha256": content_sha256}


def _rows(path: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(path) as c:
        rows = c.execute("SELECT * FROM usage ORDER BY record_id").fetchall()
    return [tuple((type(v).__name__, v) for v in r) for r in rows]


def test_bulk_rows_equal_core_insert_rows(tmp_path: Path) -> None:
    bulk, core = tmp_path / "bulk.sqlite", tmp_path / "core.sqlite"
    led = Ledger(str(bulk))
    led.add_tenant("acme", "softbw", BOOK)
    res = led.ingest([r for r in RECS if r.record_id != "e"], "f", tenant="acme")
    res2 = led.ingest(RECS, "f2", tenant="acme")  # one new, the rest already there: a no-op for them
    assert (res.new, res2.new, res2.unchanged) == (4, 1, 4)
    ref = Ledger(str(core))
    ref.add_tenant("acme", "softbw", BOOK)
    with ref._write() as conn:  # the former path: SQLAlchemy Core executemany with type processing
        for batch, part in ((1, RECS[:4]), (2, RECS[4:])):
            conn.execute(
                schema.ingest_batch.insert(),
                {"tenant": "acme", "source_file": "f", "file_sha256": "", "n_new": 0, "n_same": 0,
                 "ingested_at": "x"},
            )  # fmt: skip
            ins = sqlite_dialect.insert(schema.usage).on_conflict_do_nothing(
                index_elements=["tenant", "record_id"]
            )
            conn.execute(ins, [_row(r, _content_hash(r), batch) for r in part])
    assert _rows(bulk) == _rows(core)
    assert (
        led.usage("acme", 0, 2**62)
        == ref.usage("acme", 0, 2**62)
        == sorted(RECS, key=lambda r: (r.start_ns, r.record_id))
    )
