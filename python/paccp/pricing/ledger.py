"""The billing ledger: tenants (with a snapshot of their price book), append-only usage, issued invoices.

Storage: an SQLite file or a PostgreSQL database (``--db``, else ``$PACCP_LEDGER``, else
``ledger.sqlite`` in the per-user data directory, created with mode 0600). The schema is declared once in
:mod:`paccp.pricing.schema` and migrated by Alembic (``pricing/migrations``) on open; a ledger written
before Alembic is converted in place. Guarantees, on both backends (``docs/pricing.md``):

- usage rows are never updated or deleted, issued invoices never changed: database triggers abort it;
- ingestion is scoped to one tenant (or an explicit multi-tenant import), record ids are per tenant, and it
  is idempotent: same (tenant, record_id) and same content is a no-op (``INSERT ... ON CONFLICT DO
  NOTHING``), different content rejects the whole file;
- a file is ingested in ONE transaction; writers take the ledger's write lock up front (SQLite
  ``BEGIN IMMEDIATE`` with a busy timeout, PostgreSQL a transaction-scoped advisory lock with a lock
  timeout), so concurrent ingesters queue instead of failing, and readers are never blocked (they read the
  last committed state); a killed process leaves nothing, re-running completes it.

Charges are not stored: an invoice is computed from the usage rows and the tenant's book snapshot, so the
same usage gives the same invoice on either backend (see :mod:`paccp.pricing.charging`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from sqlalchemy import Connection, Engine, create_engine, event, func, inspect, select
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, OperationalError, SQLAlchemyError

from paccp.common.usage import UsageRecord, _no_control, read_usage
from paccp.errors import UserError
from paccp.pricing import schema
from paccp.pricing.book import MODELS, PriceBook, book_digest, parse_book
from paccp.pricing.bulk import SLEEP_ENV as SLEEP_ENV
from paccp.pricing.bulk import pg_text_array as pg_text_array
from paccp.pricing.bulk import store
from paccp.pricing.ledger_db import _prepare_sqlite_file, db_url
from paccp.pricing.period import Period

BUSY_TIMEOUT_S = 60.0
SQLITE_CACHE_KIB = 64 * 1024
SQLITE_PAGE_SIZE = 16 * 1024
#: Key of the PostgreSQL advisory lock that serialises the ledger's writers ("PACCPLDG").
PG_LOCK_KEY = 0x5041_4343_504C_4447 - 2**63
MIGRATIONS_DIR = Path(__file__).with_name("migrations")
#: Where paccp before the per-user default kept its ledger (the current directory).

P = ParamSpec("P")
R = TypeVar("R")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _db_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Turn database errors (server down, locked too long, not a database) into one-line UserErrors."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except SQLAlchemyError as exc:
            orig = getattr(exc, "orig", None) or exc
            first = (str(orig).strip().splitlines() or [type(orig).__name__])[0]
            led = args[0] if args else None
            where = getattr(led, "display_url", "ledger")
            raise UserError(f"ledger {where}: {first}") from None

    return wrapper


def _head_revision() -> str:
    from alembic.script import ScriptDirectory

    return str(ScriptDirectory(str(MIGRATIONS_DIR)).get_current_head())


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


def check_name(name: str, what: str = "tenant name") -> str:
    """A tenant name: 1..128 printable characters."""
    if not 1 <= len(name) <= 128:
        raise UserError(f"{what} must be 1..128 characters")
    try:
        return _no_control(name)
    except ValueError as exc:
        raise UserError(f"{what} {name!r}: {exc}") from None


class Ledger:
    """A connection to one ledger database, migrated to the latest schema on open."""

    def __init__(self, db: str | None = None, *, create: bool = True) -> None:
        """Open (``create``: or create) the ledger ``db`` and migrate it to the newest schema."""
        self.url = db_url(db)
        self.display_url = self.url
        try:
            self.engine: Engine = create_engine(self.url)
        except (ArgumentError, NoSuchModuleError, ImportError, ValueError) as exc:  # bad URL or driver
            raise UserError(f"cannot open ledger {self.url!r}: {exc}") from None
        self.display_url = self.engine.url.render_as_string(hide_password=True)
        self.dialect = self.engine.dialect.name
        if self.dialect == "sqlite":
            _prepare_sqlite_file(self.url, not (db or os.environ.get("PACCP_LEDGER")), create)
            self._sqlite_setup(self.engine)
        elif self.dialect != "postgresql":
            raise UserError(f"ledger {self.display_url}: only SQLite and PostgreSQL are supported")
        self.migrate(create=create)

    @staticmethod
    def _sqlite_setup(engine: Engine) -> None:
        @event.listens_for(engine, "connect")
        def _connect(dbapi_conn: Any, _rec: Any) -> None:
            dbapi_conn.isolation_level = None  # we issue BEGIN ourselves
            dbapi_conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            dbapi_conn.execute("PRAGMA foreign_keys = ON")
            # A page cache that holds a large ingest (64 MiB, the default is 2 MiB): a transaction that
            # outgrows the cache spills pages into the file mid-transaction, each spill an extra journal
            # sync. Durability is unchanged (rollback journal, synchronous=FULL, SQLite's defaults).
            dbapi_conn.execute(f"PRAGMA cache_size = -{SQLITE_CACHE_KIB}")
            # 16 KiB pages for a new ledger file (no effect on one that has tables): fewer, larger B-tree
            # pages to insert into; 10 % less CPU in the ingest's inserts (docs/pricing.md, Scale)
            dbapi_conn.execute(f"PRAGMA page_size = {SQLITE_PAGE_SIZE}")

        @event.listens_for(engine, "begin")
        def _begin(conn: Connection) -> None:
            # Writers take the write lock up front (no lock-upgrade deadlock between two ingesters); readers
            # (SQLAlchemy autobegins on every connection) start a plain deferred transaction and never wait.
            write = conn.get_execution_options().get("paccp_write", False)
            conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        """A writer transaction holding the ledger's write lock (writers queue; readers never wait)."""
        if self.dialect == "postgresql":
            with self.engine.begin() as conn:
                conn.exec_driver_sql(f"SET LOCAL lock_timeout = '{int(BUSY_TIMEOUT_S * 1000)}ms'")
                conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({PG_LOCK_KEY})")
                yield conn
            return
        deadline = time.monotonic() + BUSY_TIMEOUT_S
        while True:
            try:
                ctx = self.engine.execution_options(paccp_write=True).begin()
                conn = ctx.__enter__()
                break
            except OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        try:
            yield conn
        except BaseException:
            if not ctx.__exit__(*sys.exc_info()):
                raise
        else:
            ctx.__exit__(None, None, None)

    # --- schema --------------------------------------------------------------------------------
    @_db_errors
    def revision(self) -> str | None:
        """The Alembic revision the database is at (None: empty or written before Alembic)."""
        from alembic.runtime.migration import MigrationContext

        with self.engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()

    @_db_errors
    def migrate(self, create: bool = True) -> str:
        """Bring the schema to the newest revision (one writer transaction); return the revision.

        A database with other tables and no ledger is refused (it is not ours to change); an empty one
        becomes a ledger only with ``create``.
        """
        from alembic import command
        from alembic.config import Config
        from alembic.runtime.migration import MigrationContext
        from alembic.script import ScriptDirectory

        head = _head_revision()
        if self.revision() == head:  # up to date: no write lock, so readers never wait
            return head
        with self._write() as conn:
            have = MigrationContext.configure(conn).get_current_revision()
            tables = set(inspect(conn).get_table_names())
            if have is None and "schema_version" not in tables:  # neither ours nor a pre-Alembic ledger
                if tables:
                    shown = ", ".join(sorted(tables)[:5])
                    raise UserError(f"ledger {self.display_url}: not a paccp ledger (it has tables {shown})")
                if not create:
                    raise UserError(
                        f"ledger {self.display_url}: no ledger in this database yet"
                        " (a ledger is created by: paccp bill tenant add ...)"
                    )
            script = ScriptDirectory(str(MIGRATIONS_DIR))
            if (
                have is not None
                and have != head
                and have not in {s.revision for s in script.walk_revisions()}
            ):
                raise UserError(
                    f"ledger {self.display_url}: schema revision {have} is newer than this paccp knows"
                    f" ({head})"
                )
            cfg = Config()
            cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "head")
        return head

    # --- tenants -------------------------------------------------------------------------------
    @_db_errors
    def add_tenant(self, name: str, model: str, book_toml: str) -> bool:
        """Enrol a tenant; True if added, False if it already exists identically (else UserError)."""
        if model not in MODELS:
            raise UserError(f"unknown pricing model {model!r} (expected vbp, fbp or softbw)")
        check_name(name)
        parse_book(book_toml).section(model)  # the book must price this model
        digest = book_digest(book_toml)
        t = schema.tenant
        with self._write() as conn:
            row = conn.execute(select(t.c.model, t.c.book_sha256).where(t.c.name == name)).first()
            if row is not None:
                if row[0] == model and row[1] == digest:
                    return False
                raise UserError(f"tenant {name!r} already exists with a different model or book")
            conn.execute(
                t.insert(),
                {"name": name, "model": model, "book_toml": book_toml, "book_sha256": digest,
                 "created_at": _now()},
            )  # fmt: skip
        return True

    @_db_errors
    def tenants(self) -> list[Tenant]:
        """All tenants, by name (code-point order, the same on every backend)."""
        t = schema.tenant
        with self.engine.connect() as conn:
            rows = conn.execute(select(t.c.name, t.c.model, t.c.book_toml, t.c.book_sha256)).all()
        return sorted((Tenant(*r) for r in rows), key=lambda x: x.name)

    @_db_errors
    def tenants_named(self, names: Iterable[str]) -> dict[str, Tenant]:
        """The tenants among ``names`` that exist (one query; unknown names are left out)."""
        want = sorted(set(names))
        t = schema.tenant
        out: dict[str, Tenant] = {}
        with self.engine.connect() as conn:
            for k in range(0, len(want), 1000):
                q = select(t.c.name, t.c.model, t.c.book_toml, t.c.book_sha256).where(
                    t.c.name.in_(want[k : k + 1000])
                )
                out.update({r[0]: Tenant(*r) for r in conn.execute(q).all()})
        return out

    def _models(self, names: Iterable[str]) -> dict[str, str]:
        return {n: t.model for n, t in self.tenants_named(names).items()}

    def tenant(self, name: str) -> Tenant:
        """One tenant; UserError if unknown."""
        got = self.tenants_named([name]).get(name)
        if got is None:
            raise UserError(f"unknown tenant {name!r} (add it with: paccp bill tenant add NAME ...)")
        return got

    # --- usage ---------------------------------------------------------------------------------
    def ingest_file(
        self,
        path: str | Path,
        progress: Callable[[int], None] | None = None,
        *,
        tenant: str | None,
    ) -> IngestResult:
        """Ingest a ``.jsonl``/``.parquet`` usage file in one transaction (all or nothing).

        ``tenant``: every record must belong to it; None is the operator's explicit multi-tenant import.
        ``progress(n)`` is called with the number of records read and validated so far, every 2000 records.
        A plain JSON Lines file is read column-wise (:mod:`paccp.pricing.columnar`); any other file, or one
        that reader leaves alone, record by record (the same rows, hashes and errors).
        """
        p = Path(path)
        if tenant is not None:
            self.tenant(tenant)  # unknown tenant: say so before reading a large file
        if p.suffix != ".parquet" and p.is_file():
            try:
                data = p.read_bytes()
            except OSError as exc:
                raise UserError(f"{p}: cannot read ({exc.strerror})") from None
            res = self.ingest_jsonl(data, str(p), tenant=tenant, progress=progress)
            if res is not None:
                return res
            del data
        records: list[UsageRecord] = []
        digest = hashlib.sha256()
        for r in read_usage(p):  # validates every record before anything is written
            records.append(r)
            if progress is not None and len(records) % 2000 == 0:
                progress(len(records))
        with p.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
        return self.ingest(records, str(p), digest.hexdigest(), tenant=tenant)

    def ingest_jsonl(
        self,
        data: bytes,
        where: str,
        *,
        tenant: str | None,
        progress: Callable[[int], None] | None = None,
        check: Callable[[list[str], list[str]], None] | None = None,
    ) -> IngestResult | None:
        """Ingest the records of plain JSON Lines ``data`` column-wise (:mod:`paccp.pricing.columnar`), in
        ONE transaction; None if the reader leaves them to the record path (nothing written).

        ``check(tenants, vms)`` (one entry per record) may refuse the records before anything is written.
        """
        from paccp.pricing.columnar import read_plain

        plain = read_plain(data, self._models)
        if plain is None or (tenant is not None and plain.tenant_names() != {tenant}):
            return None
        if progress is not None:
            progress(len(plain))
        if check is not None:
            check(plain.keys()[0], plain.values["vm"].to_pylist())
        return self._store(plain, where, hashlib.sha256(data).hexdigest(), tenant)

    def ingest(
        self,
        records: Iterable[UsageRecord],
        where: str = "records",
        file_sha: str = "",
        *,
        tenant: str | None,
    ) -> IngestResult:
        """Ingest validated records in ONE transaction; see the module docstring for the rules."""
        from paccp.pricing.charging import check_chargeable

        seen: dict[tuple[str, str], str] = {}
        records = list(records)
        tenants = self.tenants_named({r.tenant for r in records} | ({tenant} if tenant else set()))
        if tenant is not None and tenant not in tenants:
            raise UserError(f"unknown tenant {tenant!r} (add it with: paccp bill tenant add NAME ...)")
        books: dict[str, PriceBook] = {}
        data: dict[str, list[Any]] = {c: [] for c in _USAGE_COLS}
        hashes: list[str] = []
        for i, r in enumerate(records, start=1):
            at = f"{where} record {i} ({r.record_id})"
            if tenant is not None and r.tenant != tenant:
                raise UserError(
                    f"{at}: belongs to tenant {r.tenant!r}, not {tenant!r} (this ingest is for {tenant!r};"
                    " an operator importing several tenants uses --all-tenants)"
                )
            t = tenants.get(r.tenant)
            if t is None:
                raise UserError(f"{at}: unknown tenant {r.tenant!r}")
            bk = books.get(t.name)
            if bk is None:
                bk = books[t.name] = t.book
            check_chargeable(r, t.model, bk, at)
            h = _content_hash(r)
            key = (r.tenant, r.record_id)
            if key in seen:  # the same record twice in one ingest counts once
                if seen[key] != h:
                    raise UserError(
                        f"{where}: record_id {r.record_id!r} appears twice with different content"
                    )
            else:
                seen[key] = h
                hashes.append(h)
                for c, v in zip(_USAGE_COLS, _values(r), strict=True):
                    data[c].append(v)
        from paccp.pricing.columnar import Columns

        return self._store(Columns(data, hashes), where, file_sha, tenant)

    @_db_errors
    def _store(self, src: Any, where: str, file_sha: str, tenant: str | None) -> IngestResult:
        """Write validated, distinct records (:class:`~paccp.pricing.columnar.Columns` or
        :class:`~paccp.pricing.columnar.PlainUsage`) in ONE transaction under the write lock
        (:func:`paccp.pricing.bulk.store`)."""
        with self._write() as conn:
            new, same, batch_id = store(conn, self.dialect, src, where, file_sha, tenant, _now())
        return IngestResult(where, new, same, batch_id)

    @_db_errors
    def usage(self, tenant: str, start_ns: int, end_ns: int) -> list[UsageRecord]:
        """A tenant's records overlapping [start_ns, end_ns) (zero-length ones starting inside it).

        Sorted by (start_ns, record_id) in code-point order, the same on every backend.
        """
        u = schema.usage
        cols = [u.c[c] for c in _USAGE_COLS]
        cond = (u.c.tenant == tenant) & (u.c.start_ns < end_ns)
        cond &= (u.c.end_ns > start_ns) | ((u.c.end_ns == u.c.start_ns) & (u.c.start_ns >= start_ns))
        with self.engine.connect() as conn:
            rows = conn.execute(select(*cols).where(cond)).all()
        out = [UsageRecord.model_validate(dict(zip(_USAGE_COLS, r, strict=True))) for r in rows]
        out.sort(key=lambda r: (r.start_ns, r.record_id))
        return out

    @_db_errors
    def issue(
        self, tenant: str, period: str | Period, currency: str, total: str, body: dict[str, Any]
    ) -> tuple[int, bool]:
        """Store an invoice as issued; return (revision, newly issued).

        Issuing the same content again is a no-op returning the latest revision; if usage arrived for the
        period since, the new content becomes the next revision (earlier revisions are never changed).
        ``period`` is parsed strictly (:class:`Period`) and stored in its one canonical spelling.
        """
        period = str(Period.parse(period))
        body_json = json.dumps(body, sort_keys=True, separators=(",", ":"))
        digest = hashlib.sha256(body_json.encode("utf-8")).hexdigest()
        inv = schema.invoice
        with self._write() as conn:
            row = conn.execute(
                select(inv.c.revision, inv.c.body_sha256)
                .where(inv.c.tenant == tenant, inv.c.period == period)
                .order_by(inv.c.revision.desc())
                .limit(1)
            ).first()
            if row is not None and row[1] == digest:
                return int(row[0]), False
            rev = 1 if row is None else int(row[0]) + 1
            conn.execute(
                inv.insert(),
                {"tenant": tenant, "period": period, "revision": rev, "currency": currency,
                 "total": Decimal(total), "body_json": body_json, "body_sha256": digest, "issued_at": _now()},
            )  # fmt: skip
        return rev, True

    @_db_errors
    def issued(self, tenant: str, period: str | Period) -> list[tuple[int, str, str]]:
        """Issued revisions of a tenant's invoice for a period: (revision, total, issued_at)."""
        period = str(Period.parse(period))
        inv = schema.invoice
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(inv.c.revision, inv.c.total, inv.c.issued_at)
                .where(inv.c.tenant == tenant, inv.c.period == period)
                .order_by(inv.c.revision)
            ).all()
        return [(int(a), str(b), str(c)) for a, b, c in rows]

    @_db_errors
    def count_usage(self) -> int:
        """Number of usage rows."""
        with self.engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(schema.usage)).scalar() or 0)

    @_db_errors
    def quarantined(self) -> list[tuple[str, str, str]]:
        """Rows a migration set aside as out of bounds: (tenant, record_id, reason)."""
        q = schema.usage_quarantine
        with self.engine.connect() as conn:
            rows = conn.execute(select(q.c.tenant, q.c.record_id, q.c.reason).order_by(q.c.id)).all()
        return [(str(a), str(b), str(c)) for a, b, c in rows]

    def close(self) -> None:
        """Release the connection pool."""
        self.engine.dispose()


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


def _content_hash(r: UsageRecord) -> str:
    """SHA-256 of the record's canonical JSON line (omega "2.0" and "2" hash the same)."""
    return hashlib.sha256(r.to_json_line().encode("utf-8")).hexdigest()


def _values(r: UsageRecord) -> tuple[Any, ...]:
    """A record's column values in :data:`_USAGE_COLS` order, omega as its canonical decimal text."""
    return tuple(format(r.omega, "f") if c == "omega" else getattr(r, c) for c in _USAGE_COLS)
