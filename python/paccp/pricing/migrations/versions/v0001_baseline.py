"""Baseline: the ledger on SQLite and PostgreSQL, usage ids per tenant, database-enforced guards.

Revision ID: 0001
Revises: (none)

On an empty database it creates the tables. On a ledger written before Alembic (table ``schema_version``,
versions 1 to 3 of the hand-kept migration list) it converts in place, in the same transaction:

- ``usage`` gets the key (tenant, record_id) instead of a global record_id, and every row's content hash is
  recomputed canonically (omega "2.0" and "2" hash the same); a row that fails today's bounds (an omega of
  1e999999, bytes beyond int64 or beyond what a link carries) is moved to ``usage_quarantine`` with the
  reason, so it can no longer break invoices and is not lost;
- ``ingest_batch`` and ``invoice`` get identity keys (their ids are kept), omega and totals exact decimals;
  every table is rebuilt to exactly the declared shape (rows copied, then the old table dropped);
- the append-only and immutability triggers are (re)installed; ``schema_version`` is dropped.

The tables are written out here as they are at this revision (a migration must not change when
``schema.py`` changes later); ``tests/pricing/test_migrations.py`` checks they equal ``schema.metadata``.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from alembic import op

from paccp.pricing.schema import ExactDecimal, IdKey, guard_ddl

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def _tables(md: sa.MetaData) -> dict[str, sa.Table]:
    t = {}
    t["tenant"] = sa.Table(
        "tenant", md,
        sa.Column("name", sa.String(128), primary_key=True),
        sa.Column("model", sa.String(16), nullable=False),
        sa.Column("book_toml", sa.Text, nullable=False),
        sa.Column("book_sha256", sa.String(64), nullable=False),
        sa.Column("created_at", sa.String(40), nullable=False),
    )  # fmt: skip
    t["ingest_batch"] = sa.Table(
        "ingest_batch", md,
        sa.Column("id", IdKey, sa.Identity(), primary_key=True),
        sa.Column("tenant", sa.String(128), nullable=True,
                  comment="the tenant the ingest was scoped to; NULL: all"),
        sa.Column("source_file", sa.Text, nullable=False),
        sa.Column("file_sha256", sa.String(64), nullable=False),
        sa.Column("n_new", sa.Integer, nullable=False),
        sa.Column("n_same", sa.Integer, nullable=False),
        sa.Column("ingested_at", sa.String(40), nullable=False),
    )  # fmt: skip
    t["usage"] = sa.Table(
        "usage", md,
        sa.Column("tenant", sa.String(128), sa.ForeignKey("tenant.name"), nullable=False),
        sa.Column("record_id", sa.String(256), nullable=False),
        sa.Column("batch_id", sa.BigInteger, sa.ForeignKey("ingest_batch.id"), nullable=False),
        sa.Column("content_sha256", sa.String(64), nullable=False),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("vm", sa.String(256), nullable=False),
        sa.Column("flow_id", sa.String(256), nullable=True),
        sa.Column("cos", sa.String(8), nullable=False),
        sa.Column("theta_bps", sa.BigInteger, nullable=False),
        sa.Column("omega", ExactDecimal, nullable=False),
        sa.Column("start_ns", sa.BigInteger, nullable=False),
        sa.Column("end_ns", sa.BigInteger, nullable=False),
        sa.Column("bytes", sa.BigInteger, nullable=False),
        sa.Column("deadline_ns", sa.BigInteger, nullable=True),
        sa.Column("deadline_met", sa.Boolean(create_constraint=False), nullable=True),
        sa.Column("guarantee", sa.String(16), nullable=False),
        sa.PrimaryKeyConstraint("tenant", "record_id", name="usage_pkey"),
        sa.CheckConstraint("end_ns >= start_ns", name="usage_interval"),
        sa.Index("usage_tenant_time", "tenant", "start_ns"),
    )  # fmt: skip
    t["invoice"] = sa.Table(
        "invoice", md,
        sa.Column("id", IdKey, sa.Identity(), primary_key=True),
        sa.Column("tenant", sa.String(128), sa.ForeignKey("tenant.name"), nullable=False),
        sa.Column("period", sa.String(7), nullable=False),
        sa.Column("revision", sa.Integer, nullable=False),
        sa.Column("currency", sa.String(3), nullable=False),
        sa.Column("total", ExactDecimal, nullable=False),
        sa.Column("body_json", sa.Text, nullable=False),
        sa.Column("body_sha256", sa.String(64), nullable=False),
        sa.Column("issued_at", sa.String(40), nullable=False),
        sa.UniqueConstraint("tenant", "period", "revision", name="invoice_revision"),
    )  # fmt: skip
    t["usage_quarantine"] = sa.Table(
        "usage_quarantine", md,
        sa.Column("id", IdKey, sa.Identity(), primary_key=True),
        sa.Column("tenant", sa.String(128), nullable=False),
        sa.Column("record_id", sa.String(256), nullable=False),
        sa.Column("row_json", sa.Text, nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("moved_at", sa.String(40), nullable=False),
        comment="rows of an older ledger that fail today's bounds, set aside by a migration (never charged)",
    )  # fmt: skip
    return t


def upgrade() -> None:
    conn = op.get_bind()
    insp = sa.inspect(conn)
    legacy = insp.has_table("schema_version")
    old = set(insp.get_table_names())
    dialect = conn.dialect.name
    if legacy:
        for stmt in _legacy_drop_guards(dialect):
            conn.exec_driver_sql(stmt)
        if "usage" in old:
            conn.exec_driver_sql("DROP INDEX IF EXISTS usage_tenant_time")
        for name in ("usage", "ingest_batch", "invoice", "tenant"):
            if name in old:
                conn.exec_driver_sql(f"ALTER TABLE {name} RENAME TO {name}_v3")
                if dialect == "postgresql":  # constraint and index names are per schema there: free them
                    names = conn.execute(
                        sa.text("SELECT conname FROM pg_constraint WHERE conrelid = CAST(:t AS regclass)"),
                        {"t": f"{name}_v3"},
                    ).scalars()
                    for cn in list(names):
                        conn.exec_driver_sql(f'ALTER TABLE {name}_v3 RENAME CONSTRAINT "{cn}" TO "{cn}_v3"')
    md = sa.MetaData()
    tables = _tables(md)
    for table in tables.values():
        table.create(conn)
    if legacy:
        _copy_legacy(conn, tables, old)
        conn.exec_driver_sql("DROP TABLE schema_version")
    for stmt in guard_ddl(dialect):
        conn.execute(sa.text(stmt))  # text(): the '%' of plpgsql is escaped for psycopg


def downgrade() -> None:
    raise NotImplementedError("the ledger is not downgraded")


def _legacy_drop_guards(dialect: str) -> list[str]:
    if dialect != "sqlite":
        return []  # the pre-Alembic code installed triggers on SQLite only
    return [
        f"DROP TRIGGER IF EXISTS {t}_no_{op_}" for t in ("usage", "invoice") for op_ in ("update", "delete")
    ]


def _copy_legacy(conn: sa.Connection, tables: dict[str, sa.Table], old: set[str]) -> None:
    from paccp.common.usage import parse_record
    from paccp.errors import UserError

    now = datetime.now(UTC).isoformat(timespec="seconds")
    if "tenant" in old:
        rows = (
            conn.exec_driver_sql("SELECT name, model, book_toml, book_sha256, created_at FROM tenant_v3")
            .mappings()
            .all()
        )
        if rows:
            conn.execute(tables["tenant"].insert(), [dict(r) for r in rows])
    if "ingest_batch" in old:
        rows = (
            conn.exec_driver_sql(
                "SELECT id, source_file, file_sha256, n_new, n_same, ingested_at FROM ingest_batch_v3"
            )
            .mappings()
            .all()
        )
        if rows:
            conn.execute(tables["ingest_batch"].insert(), [dict(r) for r in rows])
    if "usage" in old:
        cols = ("record_id", "source", "tenant", "vm", "flow_id", "cos", "theta_bps", "omega", "start_ns",
                "end_ns", "bytes", "deadline_ns", "deadline_met", "guarantee")  # fmt: skip
        result = conn.exec_driver_sql(f"SELECT batch_id, {', '.join(cols)} FROM usage_v3 ORDER BY record_id")
        good: list[dict[str, Any]] = []
        bad: list[dict[str, Any]] = []
        for r in result.mappings():
            d = {c: r[c] for c in cols}
            if d["deadline_met"] is not None:
                d["deadline_met"] = bool(d["deadline_met"])
            d["omega"] = str(d["omega"])
            try:
                rec = parse_record(d, f"usage row {d['record_id']!r}")
            except UserError as exc:
                bad.append({"tenant": d["tenant"], "record_id": d["record_id"],
                            "row_json": json.dumps(d, sort_keys=True, default=str), "reason": exc.message,
                            "moved_at": now})  # fmt: skip
                continue
            line = rec.to_json_line()
            row = rec.model_dump(mode="json")
            row.pop("schema_version")
            row["omega"] = rec.omega
            row["batch_id"] = r["batch_id"]
            row["content_sha256"] = hashlib.sha256(line.encode("utf-8")).hexdigest()
            good.append(row)
        if good:
            conn.execute(tables["usage"].insert(), good)
        if bad:
            conn.execute(tables["usage_quarantine"].insert(), bad)
        conn.exec_driver_sql("DROP TABLE usage_v3")
    if "invoice" in old:
        rows = (
            conn.exec_driver_sql(
                "SELECT id, tenant, period, revision, currency, total, body_json, body_sha256, issued_at"
                " FROM invoice_v3"
            )
            .mappings()
            .all()
        )
        if rows:
            conn.execute(tables["invoice"].insert(), [dict(r) for r in rows])
        conn.exec_driver_sql("DROP TABLE invoice_v3")
    if "ingest_batch" in old:
        conn.exec_driver_sql("DROP TABLE ingest_batch_v3")
    if "tenant" in old:
        conn.exec_driver_sql("DROP TABLE tenant_v3")
    if conn.dialect.name == "postgresql":  # explicit ids were copied: move the identities past them
        for name in ("ingest_batch", "invoice"):
            conn.exec_driver_sql(
                f"SELECT setval(pg_get_serial_sequence('{name}', 'id'),"
                f" COALESCE((SELECT MAX(id) FROM {name}), 0) + 1, false)"
            )
