"""The controller's tables (``paccp serve``): tokens, price books, hosts, VMs, purchases, rates, generation.

Revision ID: 0003
Revises: 0002

Before this, ``paccp serve`` created its ``svc_*`` tables itself (SQLAlchemy ``create_all``) on its first
start, outside the ledger's migrations: a PostgreSQL role without CREATE could not run the controller, and
nothing would change those tables in step with the ledger. This revision creates them, and on a ledger
where an older controller already did, keeps them and adds what purchases now record: the ``scheme``
(``paccp``: a VBP/FBP pair; ``softbw``: a SoftBW guarantee; ``mptcp_bgwc``: a BG guarantee and a WC
competition level) and the SoftBW terms of the quote (guarantee kind, assumed rate, size and deadline), and
an index on the hosts' session digests (every agent request looks its session up; it was a full scan).
``svc_meta`` gets its ``generation`` counter (what agents watch) at 0.

The tables are written out here as they are at this revision (``schema.py`` declares the same tables;
``tests/pricing/test_migrations.py`` checks they agree).
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

from paccp.pricing.schema import ExactDecimal, IdKey

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def _purchase_new() -> list[sa.Column[Any]]:
    """Columns this revision adds to an older controller's ``svc_purchase`` (new objects each call)."""
    return [
        sa.Column("scheme", sa.String(16), nullable=False, server_default="paccp",
                  comment="what is bought: paccp (a VBP/FBP pair), softbw (a guarantee),"
                  " mptcp_bgwc (B_g and A_l)"),
        sa.Column("guarantee", sa.String(16), nullable=True, comment="SoftBW: strict, dynamic, fair or none"),
        sa.Column("rate_bps", sa.BigInteger, nullable=True,
                  comment="SoftBW: the rate the price per hour assumes"),
        sa.Column("size_bytes", sa.BigInteger, nullable=True, comment="SoftBW dynamic: the flow size S"),
        sa.Column("deadline_ns", sa.BigInteger, nullable=True,
                  comment="SoftBW dynamic: the deadline T after start"),
    ]  # fmt: skip


def _tables(md: sa.MetaData) -> list[sa.Table]:
    purchase_new = _purchase_new()
    return [
        sa.Table(
            "svc_token", md,
            sa.Column("sha256", sa.String(64), primary_key=True,
                      comment="SHA-256 of the token; the token is never stored"),
            sa.Column("tenant", sa.String(128), sa.ForeignKey("tenant.name"), nullable=False),
            sa.Column("created_at", sa.String(40), nullable=False),
        ),
        sa.Table(
            "svc_pricebook", md,
            sa.Column("name", sa.String(128), primary_key=True),
            sa.Column("book_toml", sa.Text, nullable=False),
            sa.Column("created_at", sa.String(40), nullable=False),
        ),
        sa.Table(
            "svc_host", md,
            sa.Column("name", sa.String(128), primary_key=True),
            sa.Column("instance_id", sa.String(64), nullable=False, comment="the agent that holds the host"),
            sa.Column("session_sha256", sa.String(64), nullable=False),
            sa.Column("registered_at", sa.String(40), nullable=False),
            sa.Column("last_seen_ns", sa.BigInteger, nullable=False),
            sa.Index("svc_host_session", "session_sha256", unique=True),
        ),
        sa.Table(
            "svc_vm", md,
            sa.Column("name", sa.String(128), primary_key=True),
            sa.Column("tenant", sa.String(128), sa.ForeignKey("tenant.name"), nullable=False),
            sa.Column("host", sa.String(128), nullable=False),
            sa.Column("cgroup", sa.String(256), nullable=False),
            sa.Column("created_at", sa.String(40), nullable=False),
            sa.UniqueConstraint("host", "cgroup", name="svc_vm_host_cgroup"),
        ),
        sa.Table(
            "svc_purchase", md,
            sa.Column("id", IdKey, primary_key=True, autoincrement=True),
            sa.Column("tenant", sa.String(128), sa.ForeignKey("tenant.name"), nullable=False),
            sa.Column("vm", sa.String(128), sa.ForeignKey("svc_vm.name"), nullable=False),
            sa.Column("port", sa.Integer, nullable=True,
                      comment="FBP: the port rule; NULL: the VM's pair (VBP)"),
            sa.Column("model", sa.String(16), nullable=False),
            purchase_new[0],
            sa.Column("cos", sa.String(8), nullable=False),
            sa.Column("theta_bps", sa.BigInteger, nullable=False,
                      comment="theta; SoftBW strict: B; MPTCP: B_g"),
            sa.Column("omega", ExactDecimal, nullable=False,
                      comment="omega; MPTCP: the competition level A_l"),
            *purchase_new[1:],
            sa.Column("per_hour", ExactDecimal, nullable=False, comment="the quote's exact price per hour"),
            sa.Column("currency", sa.String(3), nullable=False),
            sa.Column("state", sa.String(16), nullable=False, comment="active, replaced or cancelled"),
            sa.Column("replaces", sa.BigInteger, nullable=True),
            sa.Column("created_at", sa.String(40), nullable=False),
            sa.Column("ended_at", sa.String(40), nullable=True),
            sa.Index("svc_purchase_vm", "vm", "state"),
        ),
        sa.Table(
            "svc_rate", md,
            sa.Column("vm", sa.String(128), primary_key=True),
            sa.Column("rate_bps", sa.BigInteger, nullable=False),
            sa.Column("at_ns", sa.BigInteger, nullable=False),
        ),
        sa.Table(
            "svc_meta", md,
            sa.Column("key", sa.String(64), primary_key=True),
            sa.Column("value", sa.BigInteger, nullable=False),
        ),
    ]  # fmt: skip


def upgrade() -> None:
    conn = op.get_bind()
    have = set(sa.inspect(conn).get_table_names())
    md = sa.MetaData()
    sa.Table("tenant", md, autoload_with=conn)  # the foreign keys' target
    for table in _tables(md):
        if table.name not in have:
            table.create(conn)
        elif table.name == "svc_host":  # an older controller's: the session lookup was a full scan
            if "svc_host_session" not in {i["name"] for i in sa.inspect(conn).get_indexes("svc_host")}:
                op.create_index("svc_host_session", "svc_host", ["session_sha256"], unique=True)
        elif table.name == "svc_purchase":  # created by an older controller: add what it lacks
            cols = {c["name"] for c in sa.inspect(conn).get_columns("svc_purchase")}
            for col in _purchase_new():
                if col.name not in cols:
                    op.add_column("svc_purchase", col)
    if conn.execute(sa.text("SELECT 1 FROM svc_meta WHERE key = 'generation'")).first() is None:
        conn.execute(sa.text("INSERT INTO svc_meta (key, value) VALUES ('generation', 0)"))


def downgrade() -> None:
    raise NotImplementedError("the ledger is not downgraded")
