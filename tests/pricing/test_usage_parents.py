"""usage's parents: a usage row names an existing tenant and ingest batch, and a parent with usage rows
cannot be deleted, re-keyed or truncated away. SQLite: declared foreign keys. PostgreSQL: the statement-level
triggers of migration 0004 (the declared keys were a per-row trigger each).

Each violation is tried on both backends; on PostgreSQL the last test drops the triggers and checks that
every one of those statements then goes through, so each refusal here is the guard's doing.
"""

from __future__ import annotations

import threading
import time

from pricing_fixtures import BOOK, rec
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from paccp.pricing.ledger import Ledger
from paccp.pricing.pgtemp import TempPostgres

_COLS = (
    "tenant, record_id, batch_id, content_sha256, source, vm, flow_id, cos, theta_bps, omega, start_ns,"
    " end_ns, bytes, guarantee"
)


def _row(tenant: str, record_id: str, batch: int) -> str:
    return (
        f"INSERT INTO usage ({_COLS}) VALUES ('{tenant}', '{record_id}', {batch}, '{'0' * 64}', 'manual',"
        " 'vm1', 'f1', 'be', 0, '1', 0, 1, 0, 'none')"
    )


#: (what, statement): each must be refused while tenant acme has usage in batch 1.
VIOLATIONS = [
    ("usage row of an unknown tenant", _row("nobody", "x1", 1)),
    ("usage row of an unknown batch", _row("acme", "x2", 999)),
    ("usage rows, one of them of an unknown tenant", None),  # several rows in one statement, see below
    ("delete a tenant with usage", "DELETE FROM tenant WHERE name = 'acme'"),
    ("re-key a tenant with usage", "UPDATE tenant SET name = 'acme2' WHERE name = 'acme'"),
    ("delete a batch with usage", "DELETE FROM ingest_batch WHERE id = 1"),
    ("re-key a batch with usage", "UPDATE ingest_batch SET id = 77 WHERE id = 1"),
]
#: What the refusals say: SQLite's foreign keys, the PostgreSQL triggers of migration 0004.
REFUSALS = ("FOREIGN KEY constraint failed", "usage rows refer", "is not in")
PG_ONLY = [
    ("truncate the tenants", "TRUNCATE tenant CASCADE"),
    ("truncate the batches", "TRUNCATE ingest_batch"),
]


def _multi_row() -> str:
    one, two = _row("acme", "m1", 1), _row("nobody", "m2", 1)
    return one + ", " + two.split(" VALUES ", 1)[1]


def _ledger(db: str) -> Ledger:
    led = Ledger(db)
    led.add_tenant("acme", "vbp", BOOK)
    led.add_tenant("idle", "vbp", BOOK)  # no usage: may go
    res = led.ingest([rec(record_id="r1"), rec(record_id="r2", vm="vm2")], tenant="acme")
    assert res.batch_id == 1 and res.new == 2
    return led


def _statements(dialect: str) -> list[tuple[str, str]]:
    out = [(w, s if s is not None else _multi_row()) for w, s in VIOLATIONS]
    return out + (PG_ONLY if dialect == "postgresql" else [])


def test_every_violation_is_refused(db: str) -> None:
    led = _ledger(db)
    for what, sql in _statements(led.dialect):
        try:
            with led.engine.begin() as conn:
                conn.execute(text(sql))
        except DBAPIError as exc:
            assert any(m in str(exc.orig) for m in REFUSALS), f"{what}: {exc.orig}"
        else:
            raise AssertionError(f"{what}: went through")
        assert led.count_usage() == 2, what
    with led.engine.begin() as conn:  # not too strict: a parent nothing refers to may go
        conn.execute(text("DELETE FROM tenant WHERE name = 'idle'"))
        conn.execute(text(_row("acme", "ok", 1)))
    assert led.count_usage() == 3
    led.close()


def _waits_for_a_lock(query: str, led: Ledger, timeout_s: float = 20.0) -> bool:
    """Whether a backend running ``query`` is seen waiting for a lock (polled from a third connection)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with led.engine.connect() as conn:
            n = conn.execute(
                text(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE :q"
                ),
                {"q": query + "%"},
            ).scalar()
        if n:
            return True
        time.sleep(0.05)
    return False


def test_a_delete_racing_an_ingest_waits_for_it_then_is_refused(pg: TempPostgres) -> None:
    """The ingest locks the parents FOR KEY SHARE: a DELETE of its tenant waits for it, then sees its rows."""
    led = _ledger(pg.create_database("race", "paccp_template"))
    led.add_tenant("late", "vbp", BOOK)
    other = Ledger(led.url)
    started, errors = threading.Event(), []
    with led.engine.begin() as ingest:
        ingest.execute(text(_row("late", "l1", 1)))  # uncommitted: its statement trigger locked 'late'

        def delete() -> None:
            try:
                with other.engine.begin() as conn:
                    started.set()
                    conn.execute(text("DELETE FROM tenant WHERE name = 'late'"))
            except DBAPIError as exc:
                errors.append(str(exc.orig))

        t = threading.Thread(target=delete)
        t.start()
        started.wait(10)
        assert _waits_for_a_lock("DELETE FROM tenant", other), "the DELETE did not wait for the ingest"
        assert t.is_alive()
    t.join(20)
    assert errors and "usage rows refer" in errors[0], errors
    assert led.count_usage() == 3
    other.close()
    led.close()


def test_without_the_triggers_every_violation_goes_through(pg: TempPostgres) -> None:
    """The refusals above are the triggers' (PostgreSQL has no declared foreign key on usage)."""
    led = _ledger(pg.create_database("unguarded", "paccp_template"))
    with led.engine.begin() as conn:
        conn.execute(text("DROP TRIGGER usage_parents ON usage"))
        for table in ("tenant", "ingest_batch"):
            conn.execute(text(f"DROP TRIGGER {table}_usage_ref ON {table}"))
            conn.execute(text(f"DROP TRIGGER {table}_usage_truncate ON {table}"))
        for table in ("usage", "invoice"):  # TRUNCATE tenant CASCADE reaches invoice (and usage, with FKs)
            conn.execute(text(f"DROP TRIGGER {table}_guard_truncate ON {table}"))
    for what, sql in _statements("postgresql"):
        with led.engine.begin() as conn:
            conn.execute(text("SAVEPOINT s"))
            conn.execute(text(sql))  # goes through
            conn.execute(text("ROLLBACK TO SAVEPOINT s"))
        assert what
    led.close()
