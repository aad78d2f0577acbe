"""The billing ledger: tenants (with a snapshot of their price book) and append-only usage.

Storage is any SQLAlchemy URL; a plain path means an SQLite file (the default is ``$PACCP_LEDGER`` or
``paccp-ledger.sqlite``). The tool creates and migrates the schema itself (table ``schema_version`` and the
ordered list :data:`MIGRATIONS`). Invariants:

- usage rows are never updated or deleted (on SQLite, triggers abort any UPDATE/DELETE of ``usage``);
- ingestion is idempotent on ``record_id``: same id and same content is a no-op, same id and different
  content is rejected;
- a file is ingested in ONE transaction (on SQLite ``BEGIN IMMEDIATE`` with a busy timeout, so concurrent
  ingesters queue instead of failing); a killed process leaves nothing, and re-running completes it.

Charges are not stored: an invoice is computed from the usage rows and the tenant's stored book snapshot,
so the same usage always gives the same invoice (see :mod:`paccp.pricing.charging`). An invoice can be
*issued* (table ``invoice``): stored immutably with its money as decimal text; if usage for the period
arrives later, issuing again stores a new revision and never changes the earlier one.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.exc import OperationalError

from paccp.errors import UserError
from paccp.pricing.book import MODELS, PriceBook, book_digest, parse_book
from paccp.usage import UsageRecord, read_usage

DEFAULT_DB = "paccp-ledger.sqlite"
BUSY_TIMEOUT_S = 60.0
#: Test hook: seconds to sleep inside the ingest transaction after half the rows are written.
SLEEP_ENV = "PACCP_TEST_INGEST_SLEEP"


def _m1(conn: Connection) -> None:
    conn.exec_driver_sql(
        "CREATE TABLE tenant (name VARCHAR(128) PRIMARY KEY, model VARCHAR(16) NOT NULL,"
        " book_toml TEXT NOT NULL, book_sha256 CHAR(64) NOT NULL, created_at VARCHAR(40) NOT NULL)"
    )
    conn.exec_driver_sql(
        "CREATE TABLE ingest_batch (id INTEGER PRIMARY KEY, source_file TEXT NOT NULL,"
        " file_sha256 CHAR(64) NOT NULL, n_new INTEGER NOT NULL, n_same INTEGER NOT NULL,"
        " ingested_at VARCHAR(40) NOT NULL)"
    )
    conn.exec_driver_sql(
        "CREATE TABLE usage (record_id VARCHAR(256) PRIMARY KEY,"
        " tenant VARCHAR(128) NOT NULL REFERENCES tenant(name),"
        " batch_id INTEGER NOT NULL REFERENCES ingest_batch(id),"
        " content_sha256 CHAR(64) NOT NULL, source VARCHAR(16) NOT NULL, vm VARCHAR(256) NOT NULL,"
        " flow_id VARCHAR(256), cos VARCHAR(8) NOT NULL, theta_bps BIGINT NOT NULL,"
        " omega VARCHAR(64) NOT NULL, start_ns BIGINT NOT NULL, end_ns BIGINT NOT NULL,"
        " bytes BIGINT NOT NULL, deadline_ns BIGINT, deadline_met BOOLEAN,"
        " guarantee VARCHAR(16) NOT NULL)"
    )
    conn.exec_driver_sql("CREATE INDEX usage_tenant_time ON usage (tenant, start_ns)")


def _m2(conn: Connection) -> None:
    """Append-only usage, enforced by the database where we know how (SQLite triggers)."""
    if conn.dialect.name != "sqlite":
        return
    for op in ("UPDATE", "DELETE"):
        conn.exec_driver_sql(
            f"CREATE TRIGGER usage_no_{op.lower()} BEFORE {op} ON usage"
            f" BEGIN SELECT RAISE(ABORT, 'usage rows are append-only'); END"
        )


def _m3(conn: Connection) -> None:
    """Issued invoices: immutable revisions per (tenant, period); money as decimal text."""
    conn.exec_driver_sql(
        "CREATE TABLE invoice (id INTEGER PRIMARY KEY, tenant VARCHAR(128) NOT NULL REFERENCES tenant(name),"
        " period CHAR(7) NOT NULL, revision INTEGER NOT NULL, currency CHAR(3) NOT NULL,"
        " total VARCHAR(40) NOT NULL, body_json TEXT NOT NULL, body_sha256 CHAR(64) NOT NULL,"
        " issued_at VARCHAR(40) NOT NULL, UNIQUE (tenant, period, revision))"
    )
    if conn.dialect.name == "sqlite":
        for op in ("UPDATE", "DELETE"):
            conn.exec_driver_sql(
                f"CREATE TRIGGER invoice_no_{op.lower()} BEFORE {op} ON invoice"
                f" BEGIN SELECT RAISE(ABORT, 'issued invoices are immutable'); END"
            )


#: Ordered migrations; version N is the state after MIGRATIONS[N-1] ran.
MIGRATIONS: list[Callable[[Connection], None]] = [_m1, _m2, _m3]


def db_url(db: str | None) -> str:
    """``--db`` value (or ``$PACCP_LEDGER``, or the default file) as an SQLAlchemy URL."""
    value = db or os.environ.get("PACCP_LEDGER") or DEFAULT_DB
    return value if "://" in value else f"sqlite:///{Path(value)}"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass(frozen=True)
class Tenant:
    """A tenant: its pricing model and the exact text of the book it was enrolled with."""

    name: str
    model: str
    book_toml: str
    book_sha256: str

    @property
    def book(self) -> PriceBook:
        """The parsed book snapshot."""
        return parse_book(self.book_toml, f"tenant {self.name} book")


@dataclass(frozen=True)
class IngestResult:
    """What one ingest did."""

    file: str
    new: int
    unchanged: int
    batch_id: int | None


class Ledger:
    """A connection to one ledger database, migrated to the latest schema on open."""

    def __init__(self, db: str | None = None) -> None:
        self.url = db_url(db)
        try:
            self.engine: Engine = create_engine(self.url, future=True)
        except Exception as exc:  # bad URL, missing driver
            raise UserError(f"cannot open ledger {self.url!r}: {exc}") from None
        if self.engine.dialect.name == "sqlite":
            self._sqlite_setup(self.engine)
        self.migrate()

    @staticmethod
    def _sqlite_setup(engine: Engine) -> None:
        @event.listens_for(engine, "connect")
        def _connect(dbapi_conn: Any, _rec: Any) -> None:
            dbapi_conn.isolation_level = None  # we issue BEGIN ourselves
            dbapi_conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            dbapi_conn.execute("PRAGMA foreign_keys = ON")

        @event.listens_for(engine, "begin")
        def _begin(conn: Connection) -> None:
            # Writers take the write lock up front (no lock-upgrade deadlock between two ingesters); readers
            # (SQLAlchemy autobegins on every connection) start a plain deferred transaction and never wait.
            write = conn.get_execution_options().get("paccp_write", False)
            conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

    def _begin_retry(self) -> Any:
        deadline = time.monotonic() + BUSY_TIMEOUT_S
        while True:
            try:
                return self.engine.execution_options(paccp_write=True).begin()
            except OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise UserError(f"ledger {self.url}: {exc.orig}") from None
                time.sleep(0.05)

    def schema_version(self) -> int:
        """Current schema version (0 for an empty database)."""
        with self.engine.connect() as conn:
            if not self.engine.dialect.has_table(conn, "schema_version"):
                return 0
            row = conn.exec_driver_sql("SELECT MAX(version) FROM schema_version").scalar()
            return int(row or 0)

    def migrate(self) -> int:
        """Apply the pending migrations, each in its own transaction; return the final version."""
        try:
            if self.schema_version() >= len(MIGRATIONS):  # up to date: no write lock, so readers never wait
                return len(MIGRATIONS)
            with self._begin_retry() as conn:
                conn.exec_driver_sql(
                    "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY,"
                    " applied_at VARCHAR(40) NOT NULL)"
                )
            for version, step in enumerate(MIGRATIONS, start=1):
                with self._begin_retry() as conn:
                    have = conn.exec_driver_sql("SELECT MAX(version) FROM schema_version").scalar() or 0
                    if have >= version:
                        continue
                    step(conn)
                    conn.execute(
                        text("INSERT INTO schema_version (version, applied_at) VALUES (:v, :t)"),
                        {"v": version, "t": _now()},
                    )
        except OperationalError as exc:
            raise UserError(f"ledger {self.url}: {exc.orig}") from None
        return len(MIGRATIONS)

    # --- tenants -------------------------------------------------------------------------------
    def add_tenant(self, name: str, model: str, book_toml: str) -> bool:
        """Enrol a tenant; True if added, False if it already exists identically (else UserError)."""
        if model not in MODELS:
            raise UserError(f"unknown pricing model {model!r} (expected vbp, fbp or softbw)")
        if not name or len(name) > 128:
            raise UserError("tenant name must be 1..128 characters")
        parse_book(book_toml).section(model)  # the book must price this model
        digest = book_digest(book_toml)
        with self._begin_retry() as conn:
            row = conn.execute(
                text("SELECT model, book_sha256 FROM tenant WHERE name = :n"), {"n": name}
            ).first()
            if row is not None:
                if row[0] == model and row[1] == digest:
                    return False
                raise UserError(f"tenant {name!r} already exists with a different model or book")
            conn.execute(
                text(
                    "INSERT INTO tenant (name, model, book_toml, book_sha256, created_at)"
                    " VALUES (:n, :m, :b, :h, :t)"
                ),
                {"n": name, "m": model, "b": book_toml, "h": digest, "t": _now()},
            )
        return True

    def tenants(self) -> list[Tenant]:
        """All tenants, by name."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                text("SELECT name, model, book_toml, book_sha256 FROM tenant ORDER BY name")
            ).all()
        return [Tenant(*r) for r in rows]

    def tenant(self, name: str) -> Tenant:
        """One tenant; UserError if unknown."""
        for t in self.tenants():
            if t.name == name:
                return t
        raise UserError(f"unknown tenant {name!r} (add it with: paccp bill tenant add {name} ...)")

    # --- usage ---------------------------------------------------------------------------------
    def ingest_file(self, path: str | Path, progress: Callable[[int], None] | None = None) -> IngestResult:
        """Ingest a ``.jsonl``/``.parquet`` usage file in one transaction (all or nothing).

        ``progress(n)`` is called with the number of records read and validated so far, every 2000 records.
        """
        p = Path(path)
        records: list[UsageRecord] = []
        for r in read_usage(p):  # validates every record before anything is written
            records.append(r)
            if progress is not None and len(records) % 2000 == 0:
                progress(len(records))
        file_sha = hashlib.sha256(p.read_bytes()).hexdigest()
        return self.ingest(records, str(p), file_sha)

    def ingest(
        self, records: Iterable[UsageRecord], where: str = "records", file_sha: str = ""
    ) -> IngestResult:
        """Ingest validated records in ONE transaction; see the module docstring for the rules."""
        from paccp.pricing.charging import check_chargeable

        recs = list(records)
        seen: dict[str, str] = {}
        tenants = {t.name: t for t in self.tenants()}
        books: dict[str, PriceBook] = {}
        for i, r in enumerate(recs, start=1):
            t = tenants.get(r.tenant)
            if t is None:
                raise UserError(f"{where} record {i} ({r.record_id}): unknown tenant {r.tenant!r}")
            bk = books.get(t.name)
            if bk is None:
                bk = books[t.name] = t.book
            check_chargeable(r, t.model, bk, f"{where} record {i} ({r.record_id})")
            h = _content_hash(r)
            if seen.get(r.record_id, h) != h:
                raise UserError(f"{where}: record_id {r.record_id!r} appears twice with different content")
            seen[r.record_id] = h
        sleep_s = float(os.environ.get(SLEEP_ENV, "0") or 0)
        try:
            with self._begin_retry() as conn:
                existing: dict[str, str] = {}
                ids = list(seen)
                for k in range(0, len(ids), 500):
                    chunk = ids[k : k + 500]
                    params = {f"i{j}": v for j, v in enumerate(chunk)}
                    marks = ", ".join(f":i{j}" for j in range(len(chunk)))
                    rows = conn.execute(
                        text(f"SELECT record_id, content_sha256 FROM usage WHERE record_id IN ({marks})"),
                        params,
                    ).all()
                    existing.update({a: b for a, b in rows})
                for rid, h in seen.items():
                    if rid in existing and existing[rid] != h:
                        raise UserError(
                            f"{where}: record_id {rid!r} was already ingested with different content"
                        )
                fresh: list[UsageRecord] = []
                done: set[str] = set()
                for r in recs:
                    if r.record_id not in existing and r.record_id not in done:
                        fresh.append(r)
                        done.add(r.record_id)
                if not fresh:
                    return IngestResult(where, 0, len(seen), None)
                res = conn.execute(
                    text(
                        "INSERT INTO ingest_batch (source_file, file_sha256, n_new, n_same, ingested_at)"
                        " VALUES (:f, :h, :n, :s, :t)"
                    ),
                    {"f": where, "h": file_sha, "n": len(fresh), "s": len(seen) - len(fresh), "t": _now()},
                )
                batch_id = int(res.lastrowid) if res.lastrowid is not None else 0
                half = len(fresh) // 2
                for part_no, part in enumerate((fresh[:half], fresh[half:])):
                    if part:
                        conn.execute(_INSERT, [_row(r, batch_id) for r in part])
                    if part_no == 0 and sleep_s > 0:
                        print(f"INGEST-MIDWAY {half}", file=sys.stderr, flush=True)
                        time.sleep(sleep_s)
                return IngestResult(where, len(fresh), len(seen) - len(fresh), batch_id)
        except OperationalError as exc:
            raise UserError(f"ledger {self.url}: {exc.orig}") from None

    def usage(self, tenant: str, start_ns: int, end_ns: int) -> list[UsageRecord]:
        """A tenant's records overlapping [start_ns, end_ns) (zero-length ones starting inside it)."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                text(
                    "SELECT record_id, source, tenant, vm, flow_id, cos, theta_bps, omega, start_ns, end_ns,"
                    " bytes, deadline_ns, deadline_met, guarantee FROM usage WHERE tenant = :t"
                    " AND start_ns < :e AND (end_ns > :s OR (end_ns = start_ns AND start_ns >= :s))"
                    " ORDER BY start_ns, record_id"
                ),
                {"t": tenant, "s": start_ns, "e": end_ns},
            ).all()
        cols = _USAGE_COLS
        out = []
        for r in rows:
            d = dict(zip(cols, r, strict=True))
            d["omega"] = Decimal(d["omega"])
            d["deadline_met"] = None if d["deadline_met"] is None else bool(d["deadline_met"])
            out.append(UsageRecord.model_validate(d))
        return out

    def issue(
        self, tenant: str, period: str, currency: str, total: str, body: dict[str, Any]
    ) -> tuple[int, bool]:
        """Store an invoice as issued; return (revision, newly issued).

        Issuing the same content again is a no-op returning the latest revision; if usage arrived for the
        period since, the new content becomes the next revision (earlier revisions are never changed).
        """
        body_json = json.dumps(body, sort_keys=True, separators=(",", ":"))
        digest = hashlib.sha256(body_json.encode("utf-8")).hexdigest()
        with self._begin_retry() as conn:
            row = conn.execute(
                text(
                    "SELECT revision, body_sha256 FROM invoice WHERE tenant = :t AND period = :p"
                    " ORDER BY revision DESC LIMIT 1"
                ),
                {"t": tenant, "p": period},
            ).first()
            if row is not None and row[1] == digest:
                return int(row[0]), False
            rev = 1 if row is None else int(row[0]) + 1
            conn.execute(
                text(
                    "INSERT INTO invoice (tenant, period, revision, currency, total, body_json, body_sha256,"
                    " issued_at) VALUES (:t, :p, :r, :c, :tot, :b, :h, :at)"
                ),
                {"t": tenant, "p": period, "r": rev, "c": currency, "tot": total, "b": body_json, "h": digest,
                 "at": _now()},
            )  # fmt: skip
        return rev, True

    def issued(self, tenant: str, period: str) -> list[tuple[int, str, str]]:
        """Issued revisions of a tenant's invoice for a period: (revision, total, issued_at)."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                text(
                    "SELECT revision, total, issued_at FROM invoice WHERE tenant = :t AND period = :p"
                    " ORDER BY revision"
                ),
                {"t": tenant, "p": period},
            ).all()
        return [(int(a), str(b), str(c)) for a, b, c in rows]

    def count_usage(self) -> int:
        """Number of usage rows."""
        with self.engine.connect() as conn:
            return int(conn.exec_driver_sql("SELECT COUNT(*) FROM usage").scalar() or 0)


_USAGE_COLS = [
    "record_id",
    "source",
    "tenant",
    "vm",
    "flow_id",
    "cos",
    "theta_bps",
    "omega",
    "start_ns",
    "end_ns",
    "bytes",
    "deadline_ns",
    "deadline_met",
    "guarantee",
]

_INSERT = text(
    "INSERT INTO usage (record_id, tenant, batch_id, content_sha256, source, vm, flow_id, cos, theta_bps,"
    " omega, start_ns, end_ns, bytes, deadline_ns, deadline_met, guarantee) VALUES (:record_id, :tenant,"
    " :batch_id, :content_sha256, :source, :vm, :flow_id, :cos, :theta_bps, :omega, :start_ns, :end_ns,"
    " :bytes, :deadline_ns, :deadline_met, :guarantee)"
)


def _content_hash(r: UsageRecord) -> str:
    return hashlib.sha256(r.to_json_line().encode("utf-8")).hexdigest()


def _row(r: UsageRecord, batch_id: int) -> dict[str, Any]:
    d = r.model_dump(mode="json")
    d.pop("schema_version")
    d["batch_id"] = batch_id
    d["content_sha256"] = _content_hash(r)
    return d
