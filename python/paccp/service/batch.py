"""The controller's batched usage endpoint, ``POST /v1/relay/report``: many hosts' reports in one request.

A relay (``paccp relay``, one per rack) gathers its agents' reports and forwards them together, so the
controller pays its per-request cost (HTTP, authentication, one ledger transaction) once per batch instead
of once per host. The relay authenticates with the agents' enrolment token; each host in the batch is
authenticated by its own agent session, exactly as if it had reported itself, and every record must be
of a VM on the host that reported it: each host says how many of the record lines are its, in order
(a record checked only against the batch's hosts let one host report another's VM whenever the two
shared a batch, which a test run caught). The request body (JSON)::

    {"hosts": [{"session": "<agent session>", "rates": {"<vm>": <bit/s>, ...}, "records": <lines>}, ...],
     "records": "<usage records as JSON Lines, each host's in the order of hosts>"}

The records go into the ledger in ONE transaction (all or nothing, idempotent on record ids: a batch
resent after a lost answer changes nothing), read column-wise when the lines are plain
(:meth:`paccp.pricing.ledger.Ledger.ingest_jsonl`), else record by record. Any unknown session (401), VM
not on the batch's hosts (403) or invalid record (422) refuses the whole batch with one line saying which;
the relay then sends each host's report alone, so one bad agent does not hold up the others.
"""

from __future__ import annotations

import json
import time
from typing import Any

from fastapi import FastAPI, Header, Request
from fastapi.concurrency import run_in_threadpool
from pydantic import ValidationError

from paccp.common.usage import UsageRecord
from paccp.pricing.ledger import IngestResult, Ledger, pg_text_array
from paccp.service._store import HOST_LEASE_NS, ServiceError, Store, digest, same_secret

#: Hosts in one batch at most (each host's records also count against the body limit).
MAX_HOSTS = 5000
PATH = "/v1/relay/report"


def _in(store: Store, sql: str, values: list[str]) -> tuple[str, Any]:
    """``sql`` with its one ``IN ?`` bound to ``values`` as ONE parameter (a PostgreSQL array literal, an
    SQLite JSON array): a query with thousands of bound parameters costs more to build than to run."""
    if store.engine.dialect.name == "postgresql":
        return sql.replace("IN ?", "= ANY(%s::text[])").replace("?", "%s"), pg_text_array(values)
    return sql.replace("IN ?", "IN (SELECT value FROM json_each(?))"), json.dumps(values)


def hosts_of(store: Store, sessions: list[str], now_ns: int) -> list[str | None]:
    """The host each session holds (None: unknown), marking them seen; one query (and one update)."""
    digests = [digest(s) for s in sessions]
    sql, arg = _in(
        store, "SELECT session_sha256, name, last_seen_ns FROM svc_host WHERE session_sha256 IN ?", digests
    )
    with store.engine.connect() as conn:
        rows = conn.exec_driver_sql(sql, (arg,)).all()
    found = {str(d): (str(n), int(s)) for d, n, s in rows}
    stale = sorted(n for n, seen in found.values() if now_ns - seen > HOST_LEASE_NS // 3)
    if stale:
        sql, arg = _in(store, "UPDATE svc_host SET last_seen_ns = ? WHERE name IN ?", stale)
        with store.write() as conn:
            conn.exec_driver_sql(sql, (now_ns, arg))
    return [found[d][0] if d in found else None for d in digests]


def vms_on(store: Store, hosts: list[str]) -> dict[str, tuple[str, str]]:
    """{VM: (tenant, host)} of the VMs on ``hosts`` (one query)."""
    sql, arg = _in(store, "SELECT name, tenant, host FROM svc_vm WHERE host IN ?", sorted(set(hosts)))
    with store.engine.connect() as conn:
        rows = conn.exec_driver_sql(sql, (arg,)).all()
    return {str(a): (str(b), str(c)) for a, b, c in rows}


def _parse(body: bytes) -> tuple[list[str], list[dict[str, int]], list[int], str]:
    """(sessions, rates per host, record lines per host, JSON Lines) of a batch; ServiceError 422 for a
    malformed one."""
    try:
        doc = json.loads(body)
    except ValueError:
        raise ServiceError(422, "request: not JSON") from None
    if not isinstance(doc, dict) or set(doc) - {"hosts", "records"}:
        raise ServiceError(422, 'request: an object with "hosts" and "records" only')
    hosts, records = doc.get("hosts"), doc.get("records", "")
    if not isinstance(hosts, list) or not 1 <= len(hosts) <= MAX_HOSTS or not isinstance(records, str):
        raise ServiceError(422, f"request: hosts must be a list of 1..{MAX_HOSTS}, records a string")
    sessions: list[str] = []
    rates: list[dict[str, int]] = []
    counts: list[int] = []
    for i, h in enumerate(hosts):
        ok = (
            isinstance(h, dict)
            and not set(h) - {"session", "rates", "records"}
            and isinstance(h.get("session"), str)
        )
        r = h.get("rates", {}) if ok else None
        n = h.get("records", 0) if ok else -1
        if (
            not ok
            or not isinstance(r, dict)
            or not all(_count(v, 10**15) for v in r.values())
            or not _count(n, len(records))
        ):
            raise ServiceError(
                422, f"hosts.{i}: an object with a session string, rates in bit/s and its number of records"
            )
        sessions.append(h["session"])
        rates.append(r)
        counts.append(n)
    return sessions, rates, counts, records


def _same_count(counts: list[int], records: int) -> None:
    """ServiceError 422 unless the hosts' record counts add up to the batch's records."""
    if sum(counts) != records:
        raise ServiceError(
            422, f"hosts: their record counts add up to {sum(counts)}, the batch has {records} records"
        )


def _count(v: Any, most: int) -> bool:
    """``v`` is an integer 0..``most`` (not a bool)."""
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= most


def ingest_batch(store: Store, ledger: Ledger, body: bytes) -> dict[str, Any]:
    """Authenticate, check and ingest one batch (see the module docstring)."""
    sessions, rates, counts, records = _parse(body)
    now = time.time_ns()
    names = hosts_of(store, sessions, now)
    for i, n in enumerate(names):
        if n is None:
            raise ServiceError(401, f"hosts.{i}: unknown agent session (register first)")
    on = vms_on(store, [n for n in names if n is not None])
    for i, (n, r) in enumerate(zip(names, rates, strict=True)):
        for v in r:
            if v not in on or on[v][1] != n:
                raise ServiceError(403, f"hosts.{i}.rates: VM {v!r} is not on {n}")

    def check(tenants: list[str], vms: list[str]) -> None:
        _same_count(counts, len(vms))
        owners = [n for n, k in zip(names, counts, strict=True) for _ in range(k)]
        for i, (t, v, h) in enumerate(zip(tenants, vms, owners, strict=True)):
            if on.get(v) != (t, h):
                raise ServiceError(403, f"records line {i + 1}: VM {v!r} of {t!r} is not on {h}")

    where = f"relay batch of {len(names)} hosts"
    data = records.encode("utf-8")
    res: IngestResult | None = None
    if not data.strip():
        _same_count(counts, 0)
    else:
        res = ledger.ingest_jsonl(data, where, tenant=None, check=check)
        if res is None:  # not the plain case: record by record, with the exact error
            recs: list[UsageRecord] = []
            for i, line in enumerate(records.splitlines(), start=1):
                if not line.strip():
                    continue
                try:
                    recs.append(UsageRecord.model_validate_json(line))
                except ValidationError as exc:
                    err = exc.errors()[0]
                    loc = ".".join(str(p) for p in err.get("loc", ())) or "record"
                    raise ServiceError(422, f"records line {i}: {loc}: {err.get('msg', 'invalid')}") from None
            check([r.tenant for r in recs], [r.vm for r in recs])
            res = ledger.ingest(recs, where, tenant=None)
    merged = {k: v for r in rates for k, v in r.items()}
    store.set_rates(merged, now)
    return {"hosts": len(names), "new": res.new if res else 0, "unchanged": res.unchanged if res else 0}


def add_routes(app: FastAPI, store: Store, ledger: Ledger, agent_sha: str) -> None:
    """Register ``POST /v1/relay/report`` on the controller's app."""

    @app.post(PATH, tags=["agent"])
    async def relay_report(request: Request, authorization: str | None = Header(default=None)) -> Any:
        """Usage of many hosts from a relay (the agents' enrolment token; each host by its session)."""
        tok = (authorization or "").removeprefix("Bearer ").strip()
        if not authorization or not authorization.startswith("Bearer ") or not same_secret(tok, agent_sha):
            raise ServiceError(403, "a relay needs the agents' enrolment token")
        body = await request.body()
        return await run_in_threadpool(ingest_batch, store, ledger, body)
