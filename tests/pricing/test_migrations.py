"""Alembic migrations: a fresh ledger and a ledger written by the pre-Alembic code end in the declared schema.

``data/ledger-v3.sqlite`` was written by main's code before this change (``data/make_v3_ledger.py`` says
how); it is upgraded in place here and must keep its tenants, usage, issued invoice and invoice amounts.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from pricing_fixtures import BOOK
from sqlalchemy import create_engine, text
from sqlalchemy.exc import DatabaseError, DBAPIError

from paccp.pricing.charging import build_invoice, parse_period
from paccp.pricing.ledger import Ledger, _head_revision
from paccp.pricing.pgtemp import TempPostgres
from paccp.pricing.schema import metadata, usage

DATA = Path(__file__).parent / "data"


def schema_diff(led: Ledger) -> list[object]:
    """Differences between the database and ``schema.metadata`` (tables, columns, types, keys, indexes).

    usage's foreign keys are declared for SQLite only (``ddl_if``); on PostgreSQL triggers keep the rule
    (migration 0004, ``test_usage_parents.py``), so there they are not expected."""

    def declared_here(obj: object, _name: object, type_: str, reflected: bool, _other: object) -> bool:
        if type_ != "foreign_key_constraint" or reflected or led.dialect == "sqlite":
            return True
        return getattr(obj, "table", None) is not usage

    with led.engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"include_object": declared_here})
        return list(compare_metadata(ctx, metadata))


def invoice(led: Ledger, tenant: str, period: str) -> dict[str, object]:
    t = led.tenant(tenant)
    s, e = parse_period(period)
    return build_invoice(t.name, t.model, t.book, led.usage(tenant, s, e), period).to_json()


def test_fresh_ledger_is_the_declared_schema(new_db: Callable[..., str]) -> None:
    led = Ledger(new_db(empty=True))
    assert led.revision() == _head_revision() == "0004"
    assert schema_diff(led) == []
    assert Ledger(led.url).migrate() == "0004"  # re-opening applies nothing


def legacy_copy(tmp_path: Path) -> Path:
    path = tmp_path / "old.sqlite"
    shutil.copy(DATA / "ledger-v3.sqlite", path)
    return path


def test_pre_alembic_ledger_upgrades_in_place(tmp_path: Path) -> None:
    path = legacy_copy(tmp_path)
    before = json.loads((DATA / "ledger-v3-invoices.json").read_text())
    led = Ledger(str(path))
    assert led.revision() == "0004" and schema_diff(led) == []
    with led.engine.connect() as conn:
        tables = {r[0] for r in conn.execute(text("SELECT name FROM sqlite_master WHERE type = 'table'"))}
    assert "schema_version" not in tables and not any(t.endswith("_v3") for t in tables)
    assert [t.name for t in led.tenants()] == ["acme", "beta", "gamma"]
    assert led.count_usage() == 7 and led.quarantined() == []
    # the invoices are the ones the old code computed; only omega's spelling became canonical ("2.0" -> "2")
    for key, old in before.items():
        new = invoice(led, *key.split())
        for line in old["lines"]:
            line["omega"] = format(Decimal(line["omega"]).normalize(), "f")
        assert new == old, key
    # the issued invoice is kept as issued, and still immutable; usage is still append-only
    assert [(r, tot) for r, tot, _ in led.issued("acme", "2026-11")] == [(1, before["acme 2026-11"]["total"])]
    for stmt in ("UPDATE invoice SET total = '0'", "DELETE FROM usage", "UPDATE usage SET bytes = 1"):
        with pytest.raises(DatabaseError, match=r"immutable|append-only"), led.engine.begin() as conn:
            conn.execute(text(stmt))
    # re-ingesting the file the old code ingested is a no-op (content re-hashed canonically, omega "2.0")
    again = led.ingest_file(DATA / "ledger-v3-usage.jsonl", tenant=None)
    assert (again.new, again.unchanged) == (0, 7)
    # and new batches get new ids (the identity continues after the copied ones)
    from pricing_fixtures import rec

    res = led.ingest([rec(record_id="new", vm="vm9")], tenant="acme")
    assert res.new == 1 and res.batch_id == 2


def test_out_of_bounds_legacy_rows_are_quarantined(tmp_path: Path) -> None:
    """An omega of 1e999999 stored by the old code broke its month's invoices; the upgrade sets it aside."""
    path = legacy_copy(tmp_path)
    con = sqlite3.connect(path)
    con.execute("DROP TRIGGER usage_no_update")
    con.execute("UPDATE usage SET omega = '1E+999999' WHERE record_id = 'a1'")
    con.commit()
    con.close()
    led = Ledger(str(path))
    (q,) = led.quarantined()
    assert q[:2] == ("acme", "a1") and "omega" in q[2]
    assert led.count_usage() == 6
    assert invoice(led, "acme", "2026-11")["total"] != ""  # the month can be invoiced again


def test_a_ledger_from_a_newer_paccp_is_refused(tmp_path: Path) -> None:
    from paccp.errors import UserError

    path = tmp_path / "l.sqlite"
    led = Ledger(str(path))
    with led.engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    with pytest.raises(UserError, match="schema revision 9999 is newer"):
        Ledger(str(path))


def test_pre_alembic_postgresql_ledger_is_repaired(pg: TempPostgres) -> None:
    """The old code created its schema on PostgreSQL too (tenant add worked), but its ingest failed: the batch
    id relied on SQLite's rowid ("null value in column id"). Such a ledger converts and then ingests."""
    from pricing_fixtures import BOOK, rec

    url = pg.create_database("legacy_pg", "template0")
    old = sqlite3.connect(DATA / "ledger-v3.sqlite")
    query = "SELECT sql FROM sqlite_master WHERE type IN ('table', 'index') AND sql IS NOT NULL"
    ddl = [r[0] for r in old.execute(query)]
    old.close()
    led_engine = create_engine(url)
    with led_engine.begin() as conn:
        for stmt in ddl:  # the old DDL, as the old code ran it on PostgreSQL
            conn.execute(text(stmt))
        conn.execute(text("INSERT INTO schema_version VALUES (1, 'then'), (2, 'then'), (3, 'then')"))
        conn.execute(text("INSERT INTO tenant VALUES ('acme', 'vbp', :b, 'x', 'then')"), {"b": BOOK})
        batch = "INSERT INTO ingest_batch (source_file, file_sha256, n_new, n_same, ingested_at)"
        with pytest.raises(DBAPIError, match="null value in column"), conn.begin_nested():
            conn.execute(text(batch + " VALUES ('f', 'h', 1, 0, 'now')"))
    led_engine.dispose()
    led = Ledger(url)
    assert led.revision() == "0004" and schema_diff(led) == []
    assert led.ingest([rec(record_id="a")], tenant="acme").new == 1
    assert invoice(led, "acme", "2026-11")["total"] == "0.10"
    with pytest.raises(DatabaseError, match="append-only"), led.engine.begin() as conn:
        conn.execute(text("DELETE FROM usage"))
    led.close()


#: ``svc_purchase`` as ``paccp serve`` created it itself before migration 0003 (no scheme, no SoftBW terms).
OLD_SVC_PURCHASE = (
    "CREATE TABLE svc_purchase (id INTEGER NOT NULL PRIMARY KEY, tenant VARCHAR(128) NOT NULL,"
    " vm VARCHAR(128) NOT NULL, port INTEGER, model VARCHAR(16) NOT NULL, cos VARCHAR(8) NOT NULL,"
    " theta_bps BIGINT NOT NULL, omega VARCHAR(80) NOT NULL, per_hour VARCHAR(80) NOT NULL,"
    " currency VARCHAR(3) NOT NULL, state VARCHAR(16) NOT NULL, replaces BIGINT, created_at VARCHAR(40)"
    " NOT NULL, ended_at VARCHAR(40), FOREIGN KEY(tenant) REFERENCES tenant (name),"
    " FOREIGN KEY(vm) REFERENCES svc_vm (name))"
)


def test_controller_tables_of_an_older_serve_are_kept_and_completed(tmp_path: Path) -> None:
    """A ledger at 0002 on which an older ``paccp serve`` created its tables: 0003 keeps their rows, adds
    the purchase's new columns, keeps the generation counter, and ends in the declared schema."""
    path = tmp_path / "old-serve.sqlite"
    led = Ledger(str(path))
    led.add_tenant("acme", "vbp", BOOK)
    with led._write() as conn:  # back to 0002, then the older controller's purchase table and one row
        conn.exec_driver_sql("DROP TABLE svc_purchase")
        conn.exec_driver_sql("DROP INDEX svc_host_session")
        conn.exec_driver_sql("UPDATE alembic_version SET version_num = '0002'")
        conn.exec_driver_sql("UPDATE svc_meta SET value = 5 WHERE key = 'generation'")
        conn.exec_driver_sql("INSERT INTO svc_vm VALUES ('vm1', 'acme', 'h1', '/vm1', 'x')")
        conn.exec_driver_sql(OLD_SVC_PURCHASE)
        conn.exec_driver_sql("CREATE INDEX svc_purchase_vm ON svc_purchase (vm, state)")
        conn.exec_driver_sql(
            "INSERT INTO svc_purchase VALUES (7, 'acme', 'vm1', NULL, 'vbp', 'mrg', 200000000, '2',"
            " '0.1616', 'USD', 'active', NULL, 'x', NULL)"
        )
    led.close()
    assert Ledger(str(path), create=False).revision() == "0004"
    led = Ledger(str(path), create=False)
    assert schema_diff(led) == []
    with led.engine.connect() as conn:
        row = conn.execute(text("SELECT id, scheme, omega, guarantee FROM svc_purchase")).one()
        gen = conn.execute(text("SELECT value FROM svc_meta WHERE key = 'generation'")).scalar()
    assert tuple(row) == (7, "paccp", "2", None) and gen == 5
