"""``paccp relay``: one per rack; agents report usage to it, it forwards many hosts' reports per request.

One controller cannot take an HTTP request from every host of a large cloud every 10 s (each costs it a
few ms of CPU); a relay takes its rack's agents' reports (``POST /v1/agent/report``, the same request
and session as at the controller: an agent is pointed at it with ``paccp agent --relay URL``) and sends
them on together to the controller's ``POST /v1/relay/report`` (:mod:`paccp.service.batch`).

Group commit: a report is answered only once the batch carrying it is in the ledger (200), so an
acknowledgement still means "in the ledger" and the relay keeps nothing on disk: while the controller is
away the relay retries for ``retry_s``, then answers 503, and the agents keep the records in their own
spools (each agent's buffering, tested by the agent's fault tests) and send them again. Every resend is
harmless: the ledger is idempotent on record ids. A batch the controller refuses (one unknown session, a
VM not on its host, a malformed record) is split: each host's report is sent alone and answered with its
own result, so one bad agent does not hold up the others.

Metrics (Prometheus, ``GET /metrics``): reports and records received and forwarded, batches, forward
failures, reports refused, reports waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
from fastapi import FastAPI, Header, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from paccp.service.batch import MAX_HOSTS, PATH

log = logging.getLogger("paccp.relay")

#: Largest batch body sent (the controller refuses bodies above 2 MiB).
MAX_BATCH_BYTES = 1_800_000


class Metrics:
    """The relay's Prometheus metrics."""

    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.reports = Counter("paccp_relay_reports", "agent reports received", registry=r)
        self.records = Counter("paccp_relay_records", "usage records received", registry=r)
        self.forwarded = Counter("paccp_relay_records_forwarded", "records the controller took", registry=r)
        self.batches = Counter("paccp_relay_batches", "batches the controller took", registry=r)
        self.failures = Counter("paccp_relay_forward_failures", "failed forwards (retried)", registry=r)
        self.refused = Counter("paccp_relay_reports_refused", "reports the controller refused", registry=r)
        self.waiting = Gauge("paccp_relay_reports_waiting", "reports not yet answered", registry=r)
        self.latency = Histogram("paccp_relay_batch_seconds", "time to forward one batch", registry=r)


@dataclass
class Pending:
    """One agent's report, waiting for its batch."""

    session: str
    lines: str
    n: int
    rates: dict[str, int]
    done: asyncio.Future[tuple[int, dict[str, Any]]] = field(repr=False)


class Relay:
    """Gathers reports and forwards them in batches (one batch in flight at a time per relay)."""

    def __init__(
        self,
        controller: str,
        token: str,
        *,
        flush_s: float = 0.2,
        retry_s: float = 8.0,
        max_records: int = 6000,
    ) -> None:
        self.controller = controller.rstrip("/")
        self._auth = {"Authorization": f"Bearer {token}"}
        self.flush_s, self.retry_s, self.max_records = flush_s, retry_s, max_records
        self.metrics = Metrics()
        self.queue: list[Pending] = []
        self.wake = asyncio.Event()
        self.client = httpx.AsyncClient(timeout=httpx.Timeout(30.0))

    async def submit(self, session: str, records: list[dict[str, Any]], rates: dict[str, int]) -> Any:
        """Queue one report; wait for its answer."""
        lines = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records)
        fut: asyncio.Future[tuple[int, dict[str, Any]]] = asyncio.get_running_loop().create_future()
        self.queue.append(Pending(session, lines, len(records), rates, fut))
        self.metrics.reports.inc()
        self.metrics.records.inc(len(records))
        self.metrics.waiting.set(len(self.queue))
        if sum(p.n for p in self.queue) >= self.max_records:
            self.wake.set()
        return await fut

    def _take(self) -> list[Pending]:
        """The next batch: reports in arrival order within the record, byte and host limits."""
        out: list[Pending] = []
        n = size = 0
        while self.queue and len(out) < MAX_HOSTS:
            p = self.queue[0]
            if out and (n + p.n > self.max_records or size + len(p.lines) + 200 > MAX_BATCH_BYTES):
                break
            out.append(self.queue.pop(0))
            n, size = n + p.n, size + len(p.lines) + 200
        self.metrics.waiting.set(len(self.queue))
        return out

    async def _post(self, batch: list[Pending]) -> tuple[int, dict[str, Any]]:
        """Send one batch until the controller answers other than 5xx/408/429 or ``retry_s`` is up."""
        body = {"hosts": [{"session": p.session, "rates": p.rates, "records": p.n} for p in batch],
                "records": "".join(p.lines for p in batch)}  # fmt: skip
        deadline = time.monotonic() + self.retry_s
        delay = 0.1
        while True:
            try:
                r = await self.client.post(f"{self.controller}{PATH}", json=body, headers=self._auth)
                if r.status_code < 500 and r.status_code not in (408, 429):
                    return r.status_code, _json(r)
                why = f"HTTP {r.status_code}"
            except httpx.HTTPError as exc:
                why = str(exc) or type(exc).__name__
            self.metrics.failures.inc()
            if time.monotonic() + delay > deadline:
                log.warning("controller unavailable (%s): %d reports answered 503", why, len(batch))
                return 503, {"error": f"controller unavailable through the relay ({why}); retry later"}
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)

    async def _forward(self, batch: list[Pending]) -> None:
        t = time.perf_counter()
        status, doc = await self._post(batch)
        if status == 200:
            self.metrics.batches.inc()
            self.metrics.latency.observe(time.perf_counter() - t)
            self.metrics.forwarded.inc(sum(p.n for p in batch))
            for p in batch:
                _answer(p, 200, {"records": p.n, "batch": doc})
        elif 400 <= status < 500 and len(batch) > 1:  # refused: each host alone, so only the bad one fails
            for p in batch:
                await self._forward([p])
        else:
            if 400 <= status < 500:
                self.metrics.refused.inc()
            for p in batch:
                _answer(p, status, doc)

    async def run(self) -> None:
        """Forward batches until cancelled."""
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), timeout=self.flush_s)
            self.wake.clear()
            while self.queue:
                await self._forward(self._take())


def _json(r: httpx.Response) -> dict[str, Any]:
    try:
        doc = r.json()
    except ValueError:
        return {"error": f"HTTP {r.status_code}"}
    return doc if isinstance(doc, dict) else {"error": f"HTTP {r.status_code}"}


def _answer(p: Pending, status: int, doc: dict[str, Any]) -> None:
    if not p.done.done():  # the agent may have gone away (its request cancelled)
        p.done.set_result((status, doc))


def create_relay_app(controller: str, token: str, **kw: Any) -> FastAPI:
    """The relay's HTTP app: ``POST /v1/agent/report``, ``GET /metrics``, ``GET /healthz``."""
    from paccp.service.app import MAX_BODY_BYTES, MAX_RECORDS, BodyLimit

    holder: dict[str, Any] = {}

    async def lifespan(_app: FastAPI) -> Any:
        relay = holder["relay"] = Relay(controller, token, **kw)
        task = asyncio.create_task(relay.run())
        yield
        task.cancel()
        await relay.client.aclose()

    app = FastAPI(title="PACCP relay", version="1", lifespan=lifespan)
    app.add_middleware(BodyLimit, limit=MAX_BODY_BYTES)

    @app.post("/v1/agent/report")
    async def report(request: Request, authorization: str | None = Header(default=None)) -> Response:
        """An agent's report (same body and session as at the controller); answered once in the ledger."""
        if not authorization or not authorization.startswith("Bearer ") or len(authorization) > 200:
            return JSONResponse({"error": "missing or malformed Authorization: Bearer <token> header"}, 401)
        try:
            doc = json.loads(await request.body())
        except ValueError:
            return JSONResponse({"error": "request: not JSON"}, 422)
        recs, rates = (
            (doc.get("records", []), doc.get("rates", {})) if isinstance(doc, dict) else (None, None)
        )
        if (
            not isinstance(recs, list)
            or len(recs) > MAX_RECORDS
            or not all(isinstance(r, dict) for r in recs)
            or not isinstance(rates, dict)
            or set(doc) - {"records", "rates"}
        ):
            return JSONResponse(
                {"error": f'request: {{"records": [<= {MAX_RECORDS} objects], "rates": {{}}}}'}, 422
            )
        status, out = await holder["relay"].submit(authorization.removeprefix("Bearer ").strip(), recs, rates)
        return JSONResponse(out, status)

    @app.get("/metrics")
    def metrics() -> Response:
        return Response(
            generate_latest(holder["relay"].metrics.registry), media_type="text/plain; version=0.0.4"
        )

    @app.get("/healthz")
    def healthz() -> dict[str, Any]:
        return {"ok": True, "waiting": len(holder["relay"].queue)}

    return app
