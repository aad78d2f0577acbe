"""The ledger's bulk write of usage rows (:func:`store`): first as all new, else what is missing.

A file's records are validated before anything is written (:mod:`paccp.pricing.columnar` or the record
path); what is left per record is its content hash, its row values and the write. They go in slices of
:data:`SLICE` records, all in the caller's ONE transaction, so a failure in any slice (a record stored
earlier with other content, a database error) rolls back the whole ingest. SQLite: ``executemany`` of
``INSERT ... ON CONFLICT DO NOTHING``, slices made and written in the caller's thread. PostgreSQL: ``COPY
usage FROM STDIN``; a worker thread makes slice k+1 while slice k is written (Arrow kernels and psycopg work
outside the interpreter lock); a plain file's slices are written by Arrow as CSV (no Python object per
value), the record path's row by row.
"""

from __future__ import annotations

import gc
import io
import itertools
import json
import os
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection

from paccp.errors import UserError
from paccp.pricing import schema
from paccp.pricing.columnar import Columns, PlainUsage

#: Records per slice: large enough that a slice's fixed costs vanish, small enough to overlap well.
SLICE = 25_000
#: Test hook: seconds to sleep inside the ingest transaction after half the rows are written.
SLEEP_ENV = "PACCP_TEST_INGEST_SLEEP"


def store(
    conn: Connection, dialect: str, src: Columns | PlainUsage, where: str, file_sha: str,
    tenant: str | None, now: str,
) -> tuple[int, int, int | None]:  # fmt: skip
    """Write validated, distinct records in the caller's write transaction ``conn``: (new, already
    stored, batch id or None).

    The records are first written as all new, inside a savepoint: a file of fresh records (what agents and
    relays send) then needs no look-up of the stored ids. If one of them is stored already (SQLite: a slice
    inserting fewer rows than it has; PostgreSQL: COPY's unique violation of the usage key), that attempt is
    rolled back, the ids already stored are looked up (one query per tenant), and the batch row and the
    missing rows go in; a stored id with other content refuses the whole ingest (nothing is committed).
    """
    n = len(src)
    if n:
        savepoint = conn.begin_nested()
        try:
            batch_id = _batch_row(conn, tenant, where, file_sha, n, 0, now)
            made, stored = _write_rows(conn, dialect, src, None, where, batch_id)
        except AlreadyStored:
            savepoint.rollback()
        else:
            if made != n or stored != n:  # AlreadyStored covers it; never commit a short write
                raise UserError(f"{where}: {n - stored} records conflicted while writing")
            savepoint.commit()
            return stored, 0, batch_id
    tn_col, id_col = src.keys()
    existing = stored_hashes(conn.connection.dbapi_connection, dialect, tn_col, id_col)
    n_same = sum(1 for key in zip(tn_col, id_col, strict=True) if key in existing) if existing else 0
    batch: int | None = None
    if n_same < n:
        batch = _batch_row(conn, tenant, where, file_sha, n - n_same, n_same, now)
    made, stored = _write_rows(conn, dialect, src, existing, where, batch)
    if made != n - n_same or stored != made:  # cannot happen under the write lock; never commit
        raise UserError(f"{where}: {n - n_same - stored} records conflicted while writing")
    return stored, n_same, batch


def _batch_row(
    conn: Connection, tenant: str | None, where: str, file_sha: str, n_new: int, n_same: int, now: str
) -> int:
    """Insert the ingest's batch row; its id."""
    res = conn.execute(
        schema.ingest_batch.insert(),
        {"tenant": tenant, "source_file": where, "file_sha256": file_sha, "n_new": n_new, "n_same": n_same,
         "ingested_at": now},
    )  # fmt: skip
    return int(res.inserted_primary_key[0])  # type: ignore[index]


def _write_rows(
    conn: Connection,
    dialect: str,
    src: Columns | PlainUsage,
    existing: dict[tuple[str, str], str] | None,
    where: str,
    batch_id: int | None,
) -> tuple[int, int]:
    """The rows of ``src`` missing from ``existing``, slice by slice (:class:`UsageWriter`); with
    ``existing`` None every row must be new (else :class:`AlreadyStored`)."""
    sleep_s = float(os.environ.get(SLEEP_ENV, "0") or 0)
    half = len(src) // 2

    def after(hi: int) -> None:
        if hi == half and sleep_s > 0 and batch_id is not None:
            print(f"INGEST-MIDWAY {half}", file=sys.stderr, flush=True)
            time.sleep(sleep_s)

    writer = UsageWriter(conn.connection.dbapi_connection, dialect, src, existing, where)
    return writer.run(slices(len(src), half if sleep_s > 0 else None), batch_id, after)


def stored_hashes(dbapi: Any, dialect: str, tenants: list[str], ids: list[str]) -> dict[tuple[str, str], str]:
    """Content hashes of the (tenant, record_id)s already in the ledger: one query per tenant."""
    names = set(tenants)
    by_tenant: dict[str, list[str]] = {}
    if len(names) == 1:
        by_tenant[names.pop()] = ids
    else:
        for tn, rid in zip(tenants, ids, strict=True):
            by_tenant.setdefault(tn, []).append(rid)
    if dialect == "sqlite":
        sql = (
            "SELECT record_id, content_sha256 FROM usage WHERE tenant = ?"
            " AND record_id IN (SELECT value FROM json_each(?))"
        )
    else:
        sql = "SELECT record_id, content_sha256 FROM usage WHERE tenant = %s AND record_id = ANY(%s::text[])"
    out: dict[tuple[str, str], str] = {}
    cur = dbapi.cursor()
    try:
        for tn, rids in by_tenant.items():
            cur.execute(sql, (tn, json.dumps(rids) if dialect == "sqlite" else pg_text_array(rids)))
            out.update({(tn, a): b for a, b in cur.fetchall()})
    finally:
        cur.close()
    return out


def pg_text_array(values: list[str]) -> str:
    """``values`` as one PostgreSQL array literal (``{"a","b"}``) for a ``%s::text[]`` parameter: psycopg
    dumps a Python list of strings element by element in Python, several times slower for large lists."""
    return "{" + ",".join('"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"' for v in values) + "}"


def slices(n: int, cut: int | None = None) -> list[tuple[int, int]]:
    """[lo, hi) bounds covering ``n`` records in :data:`SLICE`-sized steps, one bound also at ``cut``."""
    bounds = sorted({*range(0, n, SLICE), n, *([cut] if cut is not None and 0 < cut < n else [])})
    return list(itertools.pairwise(bounds))


class AlreadyStored(Exception):
    """A record written as new is stored already (only raised when no stored ids were given)."""


@contextmanager
def _no_gc() -> Iterator[None]:
    """The cyclic garbage collector paused while a file's rows are made and written: the rows are hundreds
    of thousands of tuples without cycles, and each collection would walk them all (7 % of the SQLite
    ingest's CPU, profiled). Restored afterwards, also on error."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class UsageWriter:
    """Writes the records of ``src`` missing from ``existing`` ((tenant, record_id) -> content hash) with
    ``batch_id``; a record present with another hash refuses the ingest (:class:`UserError`). With
    ``existing`` None every record must be new: one stored already raises :class:`AlreadyStored`."""

    def __init__(
        self,
        dbapi: Any,
        dialect: str,
        src: Columns | PlainUsage,
        existing: dict[tuple[str, str], str] | None,
        where: str,
    ) -> None:
        """``dbapi``: the driver's connection, inside the caller's write transaction."""
        self.all_new = existing is None
        self.existing = existing or {}
        self.dbapi, self.dialect, self.src, self.where = dbapi, dialect, src, where
        self.names = [c.name for c in schema.usage.columns]
        self.keys = src.keys() if existing else ([], [])

    def _keep(self, lo: int, hashes: list[str]) -> list[int] | None:
        """Offsets (in the slice at ``lo``) of the records to write; None: all of them."""
        if not self.existing:
            return None
        tn, ids = self.keys
        keep: list[int] = []
        for i, h in enumerate(hashes):
            had = self.existing.get((tn[lo + i], ids[lo + i]))
            if had is None:
                keep.append(i)
            elif had != h:
                raise UserError(
                    f"{self.where}: record_id {ids[lo + i]!r} was already ingested with different content"
                )
        return keep

    def make(self, lo: int, hi: int, batch_id: int | None) -> tuple[Any, int]:
        """The payload of records [lo, hi) and its number of rows (worker thread)."""
        if self.dialect == "postgresql" and isinstance(self.src, PlainUsage):
            import pyarrow as pa
            import pyarrow.csv as pcsv

            hashes = self.src.hashes(lo, hi)
            keep = self._keep(lo, hashes)
            if batch_id is None or keep == []:
                return b"", 0
            extra = {"batch_id": pa.array([batch_id] * (hi - lo), pa.int64()),
                     "content_sha256": pa.array(hashes, pa.string())}  # fmt: skip
            table = self.src.table(lo, hi, self.names, extra)
            if keep is not None:
                table = table.take(pa.array(keep, pa.int64()))
            buf = io.BytesIO()
            # every value quoted, NULL unquoted and empty: PostgreSQL's CSV reads exactly that back
            opts = pcsv.WriteOptions(include_header=False, quoting_style="all_valid")
            pcsv.write_csv(table, buf, opts)
            return buf.getvalue(), table.num_rows
        cols = self.src.columns(lo, hi)
        keep = self._keep(lo, cols.hashes)
        if batch_id is None or keep == []:
            return ([], []), 0
        extra = {"content_sha256": cols.hashes}
        names = [c for c in self.names if c != "batch_id"]
        if self.dialect == "sqlite":
            # a column NULL in every row of the slice is left to its default (NULL): the sqlite3 module
            # binds each None through its adapter lookup, a large part of the bind time
            names = [c for c in names if c in extra or any(v is not None for v in cols.data[c])]
        rows = list(zip(*[extra[c] if c in extra else cols.data[c] for c in names], strict=True))
        if keep is not None:
            rows = [rows[i] for i in keep]
        return (names, rows), len(rows)

    def write(self, payload: Any, batch_id: int) -> int:
        """Write one payload; return the rows that went in."""
        if self.dialect == "sqlite":
            names, rows = payload
            # batch_id is this ingest's own integer key, the same in every row: a literal, not a parameter
            sql = (
                f"INSERT INTO usage (batch_id, {', '.join(names)}) VALUES ({int(batch_id)}, "
                f"{', '.join('?' * len(names))}) ON CONFLICT (tenant, record_id) DO NOTHING"
            )
            cur = self.dbapi.cursor()
            try:
                cur.executemany(sql, rows)
                written = int(cur.rowcount)  # sqlite3: the rows executemany inserted
            finally:
                cur.close()
            if written != len(rows) and self.all_new:
                raise AlreadyStored
            return written
        # the rows were checked to be new under the write lock (or are written as all new); one that was
        # not aborts the statement (a unique violation), never half-writes it
        from psycopg.errors import UniqueViolation

        with self.dbapi.cursor() as cur:
            try:
                if isinstance(payload, bytes):
                    cols = ", ".join(self.names)
                    with cur.copy(f"COPY usage ({cols}) FROM STDIN (FORMAT csv)") as cp:
                        cp.write(payload)
                else:
                    names, rows = payload
                    with cur.copy(f"COPY usage (batch_id, {', '.join(names)}) FROM STDIN") as cp:
                        for r in rows:
                            cp.write_row((batch_id, *r))
            except UniqueViolation as exc:
                if exc.diag.constraint_name == "usage_pkey" and self.all_new:
                    raise AlreadyStored from None
                raise
            return int(cur.rowcount)

    def run(
        self, bounds: Sequence[tuple[int, int]], batch_id: int | None, after: Callable[[int], None]
    ) -> tuple[int, int]:
        """Make and write every slice; ``after(hi)`` is called after each slice is written. Returns (rows
        made, rows written)."""
        made = written = 0
        with _no_gc():
            for hi, (payload, rows) in self._made(bounds, batch_id):
                made += rows
                if rows and batch_id is not None:
                    written += self.write(payload, batch_id)
                after(hi)
        return made, written

    def _made(
        self, bounds: Sequence[tuple[int, int]], batch_id: int | None
    ) -> Iterator[tuple[int, tuple[Any, int]]]:
        """(hi, made slice) in order. PostgreSQL: two slices made ahead by a worker thread while the
        caller writes (the server works on the last COPY meanwhile). SQLite: in the caller's thread; its
        ``executemany`` holds the interpreter lock while binding, so a worker only contended with it
        (measured: 15 % more CPU and slower, docs/pricing.md)."""
        if self.dialect == "sqlite":
            for lo, hi in bounds:
                yield hi, self.make(lo, hi, batch_id)
            return
        with ThreadPoolExecutor(1, thread_name_prefix="paccp-ingest") as pool:
            ahead: deque[tuple[int, Future[tuple[Any, int]]]] = deque()
            todo = iter(bounds)
            try:
                for lo, hi in itertools.islice(todo, 2):
                    ahead.append((hi, pool.submit(self.make, lo, hi, batch_id)))
                while ahead:
                    hi, fut = ahead.popleft()
                    got = fut.result()
                    nxt = next(todo, None)
                    if nxt is not None:
                        ahead.append((nxt[1], pool.submit(self.make, nxt[0], nxt[1], batch_id)))
                    yield hi, got
            finally:
                for _hi, fut in ahead:
                    fut.cancel()
