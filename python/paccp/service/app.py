"""``paccp serve``: the controller's HTTP API (FastAPI; OpenAPI page at ``/docs``).

Three kinds of callers, each with its own bearer token (``Authorization: Bearer ...``; tokens are stored
as SHA-256 digests and never logged):

- tenants (``/v1/...``): quote, buy, change (upgrade/downgrade) and cancel purchases, list their VMs with
  the last rate reported against the purchase, usage and invoices. A tenant sees only its own: anything
  of another tenant is "not found";
- the operator (``/v1/admin/...``, the admin token): tenants and their tokens, hosts, VMs, price books;
- agents (``/v1/agent/...``, the enrolment token to register, then the session token the registration
  returns): watch the desired state of their host's VMs (long poll) and report usage and rates.

Every rule lives in one place: prices come from :func:`paccp.pricing.quote.quote` on the tenant's book
snapshot in the ledger, pairs are checked by :func:`paccp.common.cos.purchase_error` (through the quote)
and by the datapath's own :func:`paccp.datapath.paccp.params.check_pair`, usage goes through
:meth:`paccp.pricing.ledger.Ledger.ingest` (all-or-nothing, idempotent on record ids), invoices through
:func:`paccp.pricing.charging.build_invoice`. Bad input is a 4xx with ``{"error": "one line"}``.
"""

import asyncio
import logging
import time
from dataclasses import dataclass
from decimal import Decimal
from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI, Header, Query, Request
from fastapi import Path as PathParam
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from paccp.common.usage import UsageRecord
from paccp.errors import UserError, validation_error
from paccp.pricing.book import PriceBook
from paccp.pricing.ledger import Ledger, Tenant, check_name
from paccp.service._http import BodyLimit
from paccp.service._store import TOKEN_TTL_S, ServiceError, Store, digest, same_secret
from paccp.service.schemes import mptcp_level
from paccp.units import parse_rate_bps

log = logging.getLogger("paccp.service")

#: Largest request body accepted (an agent report of 2000 records is about 1 MB).
MAX_BODY_BYTES = 2 * 1024 * 1024
MAX_RECORDS = 2000
MAX_WAIT_S = 30.0
HOUR_NS = 3_600_000_000_000
SOLD_MODELS = ("vbp", "fbp", "softbw")

_STRICT = ConfigDict(extra="forbid")
Name = Annotated[str, Field(min_length=1, max_length=128)]
Pid = Annotated[int, PathParam(ge=1, le=2**63 - 1)]


# --- request bodies ------------------------------------------------------------------------------
class Terms(BaseModel):
    """What is bought besides the pair: the scheme, and a SoftBW guarantee's terms."""

    scheme: Literal["paccp", "softbw", "mptcp_bgwc", "paccp_host"] | None = Field(
        default=None,
        description="paccp (a VBP/FBP pair; the default of vbp/fbp tenants), softbw (a guarantee; the default"
        " of softbw tenants), mptcp_bgwc (theta = the BG guarantee B_g, omega = the competition level A_l, a"
        " whole number; vbp tenants) or paccp_host (a VBP pair enforced at the host's port; vbp tenants)",
    )
    guarantee: Literal["strict", "dynamic", "fair", "none"] | None = Field(
        default=None,
        description="SoftBW: the guarantee kind (default from cos: be none, ds fair, mrg strict)",
    )
    rate: str | int | None = Field(default=None, description="SoftBW: the rate the hourly price assumes")
    size: Annotated[int, Field(ge=1, le=2**62)] | None = Field(default=None, description="SoftBW dynamic: S")
    deadline: str | None = Field(
        default=None, max_length=32, description='SoftBW dynamic: T after the start, e.g. "30s"'
    )


class BuyIn(Terms):
    """A purchase: a pair for a VM (VBP), or for one port of a VM (FBP), a SoftBW guarantee or an MPTCP
    BG/WC guarantee for a VM; the price the tenant accepts."""

    model_config = _STRICT
    vm: Name
    cos: str = Field(max_length=8, description="be, ds or mrg")
    theta: str | int = Field(default=0, description='minimum rate, e.g. "400Mbit" or bit/s')
    omega: Decimal = Field(default=Decimal(1), description="utility weight")
    port: int | None = Field(default=None, description="FBP: the port the pair is for")
    max_per_hour: Decimal = Field(description="the most the tenant agrees to pay per hour (from a quote)")


class ChangeIn(Terms):
    """An upgrade or downgrade of an active purchase to a new pair (or guarantee) of the same scheme."""

    model_config = _STRICT
    cos: str = Field(max_length=8)
    theta: str | int = 0
    omega: Decimal = Decimal(1)
    max_per_hour: Decimal


class TenantIn(BaseModel):
    model_config = _STRICT
    name: Name
    model: str = Field(default="vbp", max_length=16)
    book: Name = "default"


class VmIn(BaseModel):
    model_config = _STRICT
    name: Name
    tenant: Name
    host: Name
    cgroup: str = Field(min_length=1, max_length=256, pattern=r"^/[A-Za-z0-9_./@:-]*$")


class BookIn(BaseModel):
    model_config = _STRICT
    toml: str = Field(max_length=100_000)


class RegisterIn(BaseModel):
    model_config = _STRICT
    host: Name
    instance_id: str = Field(min_length=8, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")


class ReportIn(BaseModel):
    model_config = _STRICT
    records: list[dict[str, Any]] = Field(default_factory=list, max_length=MAX_RECORDS)
    rates: dict[str, Annotated[int, Field(ge=0, le=10**15)]] = Field(default_factory=dict, max_length=10_000)


@dataclass(frozen=True)
class Priced:
    """A quote of what is bought, with the purchase row's scheme-specific columns."""

    scheme: str
    theta_bps: int
    quote: Any
    extra: dict[str, Any]

    def row(self, cos: str) -> dict[str, Any]:
        q = self.quote
        return {"scheme": self.scheme, "cos": cos, "theta_bps": self.theta_bps, "omega": q.omega,
                "per_hour": q.per_hour, "currency": q.currency, **self.extra}  # fmt: skip


# --- the application ------------------------------------------------------------------------------
def create_app(
    db: str | None, admin_token: str, agent_token: str, token_ttl_s: float = TOKEN_TTL_S
) -> FastAPI:
    """The controller over the ledger ``db``; ``admin_token``/``agent_token`` are the operator's and the
    agents' enrolment secrets (only their digests are kept in memory)."""
    from paccp.pricing.book import load_book

    ledger = Ledger(db)
    store = Store(ledger, token_ttl_s)
    if "default" not in store.books():
        store.put_book("default", load_book(None)[1])
    admin_sha, agent_sha = digest(admin_token), digest(agent_token)
    del admin_token, agent_token

    app = FastAPI(
        title="PACCP controller",
        description="Sell bandwidth (VBP, FBP) and drive the agents that enforce it.",
        version="1",
    )
    app.add_middleware(BodyLimit, limit=MAX_BODY_BYTES)
    app.state.store = store

    # --- errors: one line, 4xx for bad input ------------------------------------------------
    @app.exception_handler(ServiceError)
    async def _svc(_r: Request, exc: ServiceError) -> JSONResponse:
        return JSONResponse({"error": exc.message}, status_code=exc.status)

    @app.exception_handler(UserError)
    async def _user(_r: Request, exc: UserError) -> JSONResponse:
        return JSONResponse({"error": " ".join(exc.message.split())}, status_code=400)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_r: Request, exc: RequestValidationError) -> JSONResponse:
        loc, msg = validation_error(exc, "request")
        loc = loc.removeprefix("body.").removeprefix("body") or "request"
        return JSONResponse({"error": f"{loc}: {msg}"}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_r: Request, exc: StarletteHTTPException) -> JSONResponse:
        return JSONResponse({"error": str(exc.detail)}, status_code=exc.status_code)

    # --- who is calling -----------------------------------------------------------------------
    def _bearer(authorization: str | None) -> str:
        if not authorization or not authorization.startswith("Bearer ") or len(authorization) > 200:
            raise ServiceError(401, "missing or malformed Authorization: Bearer <token> header")
        return authorization.removeprefix("Bearer ").strip()

    async def tenant_auth(authorization: Annotated[str | None, Header()] = None) -> Tenant:
        tok = _bearer(authorization)  # a token resolved in the last TOKEN_TTL_S: no database round trip
        t = store.tenant_cached(tok) or await run_in_threadpool(store.tenant_of, tok)
        if t is None:
            raise ServiceError(401, "unknown or revoked tenant token")
        return t

    def admin_auth(authorization: Annotated[str | None, Header()] = None) -> None:
        if not same_secret(_bearer(authorization), admin_sha):
            raise ServiceError(403, "this needs the operator's admin token")

    def agent_auth(authorization: Annotated[str | None, Header()] = None) -> str:
        name = store.host_of(_bearer(authorization), time.time_ns())
        if name is None:
            raise ServiceError(401, "unknown agent session (register first)")
        return name

    TenantDep = Annotated[Tenant, Depends(tenant_auth)]
    AdminDep = Annotated[None, Depends(admin_auth)]
    HostDep = Annotated[str, Depends(agent_auth)]

    # --- shared helpers -----------------------------------------------------------------------
    books: dict[str, PriceBook] = {}

    def _book(t: Tenant) -> PriceBook:
        """The tenant's book snapshot, parsed once per content (snapshots never change)."""
        bk = books.get(t.book_sha256)
        if bk is None:
            if len(books) > 1000:
                books.clear()
            bk = books[t.book_sha256] = t.book
        return bk

    quotes: dict[tuple[Any, ...], Priced] = {}

    def _price(t: Tenant, cos: str, theta: str | int, omega: Decimal, terms: Terms | None = None) -> Priced:
        """:func:`_priced`, remembered per book snapshot and terms (a quote depends on nothing else)."""
        key = (
            t.book_sha256,
            t.model,
            cos,
            str(theta),
            str(omega),
            terms.model_dump_json() if terms else None,
        )
        pr = quotes.get(key)
        if pr is None:
            if len(quotes) > 10_000:
                quotes.clear()
            pr = quotes[key] = _priced(t, cos, theta, omega, terms)
        return pr

    def _priced(t: Tenant, cos: str, theta: str | int, omega: Decimal, terms: Terms | None = None) -> Priced:
        """The quote of what ``terms`` buy (their scheme, else the tenant model's), checked enforceable."""
        from paccp.datapath.paccp.params import check_pair
        from paccp.pricing.quote import quote
        from paccp.units import parse_duration_ns

        terms = terms or Terms()
        if t.model not in SOLD_MODELS:
            raise ServiceError(400, f"tenant {t.name!r} is billed {t.model}: the API sells {SOLD_MODELS}")
        scheme = terms.scheme or ("softbw" if t.model == "softbw" else "paccp")
        allowed = {"vbp": ("paccp", "mptcp_bgwc", "paccp_host"), "fbp": ("paccp",), "softbw": ("softbw",)}[
            t.model
        ]
        if scheme not in allowed:
            raise ServiceError(400, f"a {t.model} tenant buys {' or '.join(allowed)}, not {scheme}")
        theta_bps = parse_rate_bps(str(theta))
        bk = _book(t)
        if scheme == "softbw":
            rate = None if terms.rate is None else parse_rate_bps(str(terms.rate))
            deadline = None if terms.deadline is None else parse_duration_ns(terms.deadline)
            q = quote("softbw", cos, theta_bps, omega, HOUR_NS, bk, guarantee=terms.guarantee,
                      rate_bps=rate, size_bytes=terms.size, deadline_ns=deadline)  # fmt: skip
            extra = {"guarantee": q.guarantee, "rate_bps": q.rate_bps, "size_bytes": terms.size,
                     "deadline_ns": deadline}  # fmt: skip
            return Priced(scheme, theta_bps, q, extra)
        if terms.guarantee or terms.rate is not None or terms.size is not None or terms.deadline:
            raise ServiceError(400, "guarantee, rate, size and deadline are SoftBW terms: leave them out")
        if scheme == "mptcp_bgwc" and (bk.mptcp_bgwc is None or bk.mptcp_bgwc != bk.vbp):
            # the ledger charges a VBP tenant's usage by [vbp]: sold only where the two sections agree
            raise ServiceError(
                400,
                f"price book {bk.name!r} does not price MPTCP BG/WC as its VBP (the ledger bills by [vbp])",
            )
        if scheme == "mptcp_bgwc":
            mptcp_level(omega)  # A_l: what the MPTCP datapath can enforce
        q = quote(t.model, cos, theta_bps, omega, HOUR_NS, bk)
        check_pair(theta_bps, float(omega))  # what the datapath can enforce
        return Priced(scheme, theta_bps, q, {})

    def _own_vm(t: Tenant, name: str) -> Any:
        row = store.vm(name)
        if row is None or row.tenant != t.name:
            raise ServiceError(404, f"no VM {name!r} of tenant {t.name!r}")
        return row

    def _own_purchase(t: Tenant, pid: int) -> Any:
        p = store.purchase(pid)
        if p is None or p.tenant != t.name:
            raise ServiceError(404, f"no purchase {pid} of tenant {t.name!r}")
        return p

    def _accept(q: Any, max_per_hour: Decimal) -> None:
        if not max_per_hour.is_finite() or q.per_hour > max_per_hour:
            raise ServiceError(
                402,
                f"this pair costs {format(q.per_hour.normalize(), 'f')} {q.currency} per hour, above the"
                f" {max_per_hour} you accepted: quote it and accept that price",
            )

    def _port(t: Tenant, port: int | None) -> int | None:
        if t.model in ("vbp", "softbw") and port is not None:
            raise ServiceError(400, f"a {t.model} purchase is for a whole VM: leave out port")
        if t.model == "fbp" and (port is None or not 1 <= port <= 65535):
            raise ServiceError(400, "an FBP purchase is for one port of a VM: give port 1..65535")
        return port

    def _period(period: str) -> tuple[int, int]:
        from paccp.pricing.charging import parse_period

        return parse_period(period)

    # --- tenants ------------------------------------------------------------------------------
    @app.get("/v1/me", tags=["tenant"])
    def me(t: TenantDep) -> dict[str, Any]:
        bk = _book(t)
        return {"tenant": t.name, "model": t.model, "currency": bk.currency, "book": bk.name}

    @app.get("/v1/quote", tags=["tenant"])
    async def get_quote(
        t: TenantDep,
        terms: Annotated[Terms, Query()],
        cos: Annotated[str, Query(max_length=8)] = "be",
        theta: Annotated[str, Query(max_length=32)] = "0",
        omega: Annotated[Decimal, Query()] = Decimal(1),
    ) -> dict[str, Any]:
        """The price per hour of a pair, a SoftBW guarantee or an MPTCP BG/WC guarantee, from the tenant's
        price book."""
        pr = _price(t, cos, theta, omega, terms)
        return {**pr.quote.to_json(), "scheme": pr.scheme}

    @app.get("/v1/vms", tags=["tenant"], response_model=None)
    def my_vms(t: TenantDep) -> JSONResponse:
        """The tenant's VMs, each with its active purchases and the last rate its host reported."""
        now = time.time_ns()
        out = [
            {
                "name": r.name,
                "host": r.host,
                "purchases": [p.to_json() for p in bought],
                "rate_bps": rb[0] if rb else None,
                "rate_age_s": round((now - rb[1]) / 1e9, 1) if rb else None,
            }
            for r, bought, rb in store.tenant_vms(t.name)
        ]
        return JSONResponse(out)  # plain JSON: no response model to validate in another thread

    @app.get("/v1/purchases", tags=["tenant"])
    def my_purchases(t: TenantDep, active: bool = False) -> list[dict[str, Any]]:
        return [p.to_json() for p in store.purchases(tenant=t.name, active_only=active)]

    @app.get("/v1/purchases/{pid}", tags=["tenant"])
    def my_purchase(t: TenantDep, pid: Pid) -> dict[str, Any]:
        return dict(_own_purchase(t, pid).to_json())

    @app.post("/v1/purchases", tags=["tenant"], status_code=201)
    def buy(t: TenantDep, body: BuyIn) -> dict[str, Any]:
        """Buy a pair at the quoted price (refused with 402 if it costs more than ``max_per_hour``)."""
        _own_vm(t, body.vm)
        port = _port(t, body.port)
        pr = _price(t, body.cos, body.theta, body.omega, body)
        _accept(pr.quote, body.max_per_hour)
        p = store.buy({"tenant": t.name, "vm": body.vm, "port": port, "model": t.model, **pr.row(body.cos)})
        log.info("tenant %s bought purchase %d (%s %s) for VM %s", t.name, p.id, t.model, p.cos, p.vm)
        return p.to_json()

    @app.patch("/v1/purchases/{pid}", tags=["tenant"])
    def change(t: TenantDep, pid: Pid, body: ChangeIn) -> dict[str, Any]:
        """Upgrade or downgrade: the purchase ends and a new one with the new pair starts (one write)."""
        old = _own_purchase(t, pid)
        if old.state != "active":
            raise ServiceError(409, f"purchase {pid} is {old.state}, not active")
        pr = _price(t, body.cos, body.theta, body.omega, body)
        if pr.scheme != old.scheme:
            raise ServiceError(409, f"purchase {pid} is {old.scheme}: cancel it and buy {pr.scheme} instead")
        _accept(pr.quote, body.max_per_hour)
        p = store.buy(
            {"tenant": t.name, "vm": old.vm, "port": old.port, "model": t.model, **pr.row(body.cos)},
            replaces=pid,
        )
        log.info("tenant %s changed purchase %d into %d", t.name, pid, p.id)
        return p.to_json()

    @app.delete("/v1/purchases/{pid}", tags=["tenant"])
    def cancel(t: TenantDep, pid: Pid) -> dict[str, Any]:
        _own_purchase(t, pid)
        store.cancel(pid)
        log.info("tenant %s cancelled purchase %d", t.name, pid)
        return dict(_own_purchase(t, pid).to_json())

    @app.get("/v1/usage", tags=["tenant"])
    def my_usage(
        t: TenantDep, period: Annotated[str, Query(max_length=7)], vm: str | None = None
    ) -> dict[str, Any]:
        """Usage records of a month (YYYY-MM) from the ledger, with totals per VM."""
        s, e = _period(period)
        recs = [r for r in ledger.usage(t.name, s, e) if vm is None or r.vm == vm]
        per_vm: dict[str, dict[str, int]] = {}
        for r in recs:
            d = per_vm.setdefault(r.vm, {"records": 0, "bytes": 0})
            d["records"] += 1
            d["bytes"] += r.bytes
        return {
            "period": period,
            "records": len(recs),
            "per_vm": per_vm,
            "last": [r.model_dump(mode="json") for r in recs[-200:]],
        }

    @app.get("/v1/invoices/{period}", tags=["tenant"])
    def my_invoice(t: TenantDep, period: str) -> dict[str, Any]:
        """The invoice of a month as computed now from the ledger (exact figures, the book's rounding)."""
        from paccp.pricing.charging import build_invoice

        s, e = _period(period)
        inv = build_invoice(t.name, t.model, _book(t), ledger.usage(t.name, s, e), period)
        body = inv.to_json()
        body["issued"] = [
            {"revision": r, "total": tot, "issued_at": at} for r, tot, at in ledger.issued(t.name, period)
        ]
        return body

    # --- operator -----------------------------------------------------------------------------
    @app.post("/v1/admin/tenants", tags=["admin"], status_code=201)
    def add_tenant(_a: AdminDep, body: TenantIn) -> dict[str, Any]:
        """Enrol a tenant in the ledger with a snapshot of a price book; returns its first API token."""
        check_name(body.name)
        text = store.books().get(body.book)
        if text is None:
            raise ServiceError(404, f"no price book {body.book!r}")
        added = ledger.add_tenant(body.name, body.model, text)
        if not added:
            raise ServiceError(409, f"tenant {body.name!r} already exists (new token: POST .../tokens)")
        tok = store.add_token(body.name)
        log.info("operator added tenant %s (%s)", body.name, body.model)
        return {"tenant": body.name, "model": body.model, "token": tok}

    @app.get("/v1/admin/tenants", tags=["admin"])
    def list_tenants(_a: AdminDep) -> list[dict[str, Any]]:
        return [{"name": t.name, "model": t.model, "book_sha256": t.book_sha256} for t in ledger.tenants()]

    @app.post("/v1/admin/tenants/{name}/tokens", tags=["admin"], status_code=201)
    def new_tenant_token(_a: AdminDep, name: str) -> dict[str, Any]:
        ledger.tenant(name)
        return {"tenant": name, "token": store.add_token(name)}

    @app.delete("/v1/admin/tenants/{name}/tokens", tags=["admin"])
    def revoke_tenant_tokens(_a: AdminDep, name: str) -> dict[str, Any]:
        ledger.tenant(name)
        return {"tenant": name, "revoked": store.revoke_tokens(name)}

    @app.get("/v1/admin/hosts", tags=["admin"])
    def list_hosts(_a: AdminDep) -> list[dict[str, Any]]:
        return store.hosts()

    @app.post("/v1/admin/vms", tags=["admin"], status_code=201)
    def add_vm(_a: AdminDep, body: VmIn) -> dict[str, Any]:
        ledger.tenant(body.tenant)
        added = store.add_vm(body.name, body.tenant, body.host, body.cgroup)
        return {**body.model_dump(), "added": added}

    @app.get("/v1/admin/vms", tags=["admin"])
    def list_vms(_a: AdminDep) -> list[dict[str, Any]]:
        return [r.__dict__ for r in store.vms()]

    @app.delete("/v1/admin/vms/{name}", tags=["admin"])
    def remove_vm(_a: AdminDep, name: str) -> dict[str, Any]:
        store.remove_vm(name)
        return {"removed": name}

    @app.get("/v1/admin/purchases", tags=["admin"])
    def all_purchases(_a: AdminDep, active: bool = False) -> list[dict[str, Any]]:
        return [{"tenant": p.tenant, **p.to_json()} for p in store.purchases(active_only=active)]

    @app.get("/v1/admin/pricebooks", tags=["admin"])
    def list_books(_a: AdminDep) -> dict[str, str]:
        return store.books()

    @app.put("/v1/admin/pricebooks/{name}", tags=["admin"])
    def put_book(_a: AdminDep, name: str, body: BookIn) -> dict[str, Any]:
        """Add or replace a named price book (tenants keep the snapshot they were enrolled with)."""
        from paccp.pricing.book import parse_book

        check_name(name, "price book name")
        bk = parse_book(body.toml, f"price book {name}")
        changed = store.put_book(name, body.toml)
        return {"name": name, "book": bk.name, "changed": changed}

    # --- agents -------------------------------------------------------------------------------
    @app.post("/v1/agent/register", tags=["agent"])
    def register(body: RegisterIn, authorization: Annotated[str | None, Header()] = None) -> dict[str, Any]:
        """An agent claims its host; refused (409) while another agent holds it."""
        if not same_secret(_bearer(authorization), agent_sha):
            raise ServiceError(403, "this needs the agents' enrolment token")
        session = store.register_host(body.host, body.instance_id, time.time_ns())
        log.info("agent %s registered host %s", body.instance_id, body.host)
        return {"host": body.host, "session": session}

    def _desired(host_name: str) -> dict[str, Any]:
        gen = store.generation()
        rows = store.vms(host_name=host_name)
        models = {n: t.model for n, t in ledger.tenants_named({r.tenant for r in rows}).items()}
        bought = store.purchases(active_only=True, vms=[r.name for r in rows])
        vms = []
        for r in rows:
            mine = [p for p in bought if p.vm == r.name]
            pair = next((p for p in mine if p.port is None), None)
            vms.append(
                {
                    "name": r.name,
                    "tenant": r.tenant,
                    "model": models.get(r.tenant, "vbp"),
                    "cgroup": r.cgroup,
                    "scheme": pair.scheme if pair else "paccp",
                    "guarantee": pair.guarantee if pair else None,
                    "rate_bps": pair.rate_bps if pair else None,
                    "theta_bps": pair.theta_bps if pair else 0,
                    "omega": format(pair.omega, "f") if pair else "1",
                    "rules": [
                        {"port": p.port, "theta_bps": p.theta_bps, "omega": format(p.omega, "f")}
                        for p in sorted(mine, key=lambda p: p.port or 0)
                        if p.port is not None
                    ],
                }
            )
        return {"host": host_name, "generation": gen, "vms": vms}

    @app.get("/v1/agent/desired", tags=["agent"])
    async def desired(
        host_name: HostDep,
        since: Annotated[int, Query(ge=-1)] = -1,
        wait: Annotated[float, Query(ge=0, le=MAX_WAIT_S)] = 0.0,
    ) -> dict[str, Any]:
        """The host's VMs and their pairs; with ``since`` and ``wait``, answers once the generation moves
        past ``since`` or after ``wait`` seconds (long poll)."""
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if await run_in_threadpool(store.generation) != since:
                break
            await asyncio.sleep(0.05)
        return await run_in_threadpool(_desired, host_name)

    @app.post("/v1/agent/report", tags=["agent"])
    def report(host_name: HostDep, body: ReportIn) -> dict[str, Any]:
        """Usage records of the host's VMs (into the ledger, all or nothing, idempotent) and their rates."""
        mine = {r.name: r for r in store.vms(host_name=host_name)}
        recs: list[UsageRecord] = []
        for i, raw in enumerate(body.records):
            try:
                rec = UsageRecord.model_validate(raw)
            except ValidationError as exc:
                err = exc.errors()[0]
                loc = ".".join(str(p) for p in err.get("loc", ())) or "record"
                raise ServiceError(422, f"records.{i}.{loc}: {err.get('msg', 'invalid')}") from None
            row = mine.get(rec.vm)
            if row is None or row.tenant != rec.tenant:
                raise ServiceError(403, f"records.{i}: VM {rec.vm!r} of {rec.tenant!r} is not on {host_name}")
            recs.append(rec)
        for name in body.rates:
            if name not in mine:
                raise ServiceError(403, f"rates: VM {name!r} is not on {host_name}")
        res = ledger.ingest(recs, f"agent report from {host_name}", tenant=None) if recs else None
        store.set_rates(dict(body.rates), time.time_ns())
        return {"new": res.new if res else 0, "unchanged": res.unchanged if res else 0}

    # --- the tenant's web page ------------------------------------------------------------------
    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def page() -> str:
        from paccp.service._web import PAGE

        return PAGE

    @app.get("/healthz", include_in_schema=False)
    def healthz() -> dict[str, Any]:
        return {"ok": True, "generation": store.generation()}

    from paccp.service.batch import add_routes

    add_routes(app, store, ledger, agent_sha)  # POST /v1/relay/report: many hosts' usage from a relay
    return app
