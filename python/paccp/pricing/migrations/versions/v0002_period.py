"""One spelling per billing month: issued invoices' periods must be ``YYYY-MM`` in ASCII digits.

Revision ID: 0002
Revises: 0001

Before this, ``bill invoice --issue`` took ``2026-11``, `` 2026-11``, ``2026-11\\n`` and the month in
full-width or Arabic-Indic digits as five months, so one month could be issued five times (each "revision
1"). The application now parses periods strictly (:class:`paccp.pricing.period.Period`); this revision makes
the database refuse any other spelling, so the unique key (tenant, period, revision) is a unique key on
(tenant, month, revision) and a month has one revision 1:

- a table ``invoice_quarantine``: an issued invoice of an older ledger whose period is not canonical is
  moved there with the reason (never lost, never counted as a month's invoice again);
- a check on ``invoice.period`` at insert: a trigger on SQLite (``GLOB '[0-9]...'``, which compares code
  points, so no other digits), a CHECK constraint with an ASCII regular expression on PostgreSQL.

The table and the SQL are written out here as they are at this revision (``schema.py`` declares the same
table; ``tests/pricing/test_migrations.py`` checks they agree).
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

from paccp.pricing.schema import IdKey, guard_ddl

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

_CANONICAL = re.compile(r"[0-9]{4}-(0[1-9]|1[0-2])")

SQLITE_CHECK = (
    "CREATE TRIGGER invoice_period_check BEFORE INSERT ON invoice"
    " WHEN NOT (NEW.period GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]'"
    " AND substr(NEW.period, 6, 2) BETWEEN '01' AND '12')"
    " BEGIN SELECT RAISE(ABORT, 'invoice period must be YYYY-MM in ASCII digits'); END"
)
PG_CHECK = (
    "ALTER TABLE invoice ADD CONSTRAINT invoice_period_check CHECK (period ~ '^[0-9]{4}-(0[1-9]|1[0-2])$')"
)


def upgrade() -> None:
    conn = op.get_bind()
    dialect = conn.dialect.name
    quarantine = sa.Table(
        "invoice_quarantine", sa.MetaData(),
        sa.Column("id", IdKey, sa.Identity(), primary_key=True),
        sa.Column("tenant", sa.String(128), nullable=False),
        sa.Column("invoice_id", sa.BigInteger, nullable=False),
        sa.Column("row_json", sa.Text, nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("moved_at", sa.String(40), nullable=False),
        comment="issued invoices of an older ledger whose period is not YYYY-MM, set aside by migration 0002",
    )  # fmt: skip
    quarantine.create(conn)
    rows = (
        conn.exec_driver_sql(
            "SELECT id, tenant, period, revision, currency, total, body_json, body_sha256, issued_at"
            " FROM invoice ORDER BY id"
        )
        .mappings()
        .all()
    )
    bad = [dict(r) for r in rows if not _CANONICAL.fullmatch(str(r["period"]))]
    if bad:
        now = datetime.now(UTC).isoformat(timespec="seconds")
        conn.execute(
            quarantine.insert(),
            [{"tenant": r["tenant"], "invoice_id": r["id"],
              "row_json": json.dumps(r, sort_keys=True, default=str),
              "reason": f"period {r['period']!r} is not YYYY-MM in ASCII digits", "moved_at": now}
             for r in bad],
        )  # fmt: skip
        for stmt in guard_ddl(dialect, create=False):
            conn.execute(sa.text(stmt))
        conn.execute(sa.text("DELETE FROM invoice WHERE id = :id"), [{"id": r["id"]} for r in bad])
        for stmt in guard_ddl(dialect):
            conn.execute(sa.text(stmt))
    conn.exec_driver_sql(PG_CHECK if dialect == "postgresql" else SQLITE_CHECK)


def downgrade() -> None:
    raise NotImplementedError("the ledger is not downgraded")
