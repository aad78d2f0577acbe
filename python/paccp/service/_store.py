"""The controller's state, in the ledger's own database: tokens, hosts, VMs, purchases, last rates.

The tables live next to the ledger's (prefix ``svc_``) so that a purchase, the VM it is for and the
generation counter that agents watch change in ONE transaction, taken with the ledger's writer lock
(:meth:`paccp.pricing.ledger.Ledger._write`); readers never wait. Nothing here prices or charges: quotes
come from :func:`paccp.pricing.quote.quote` with the tenant's book snapshot from the ledger, usage goes
through :meth:`paccp.pricing.ledger.Ledger.ingest`, invoices through
:func:`paccp.pricing.charging.build_invoice`. The controller keeps no state in memory, so several can
serve one PostgreSQL database behind a load balancer.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import (
    Connection,
    select,
    update,
)

from paccp.pricing import schema as ledger_schema
from paccp.pricing.ledger import Ledger, Tenant
from paccp.pricing.schema import svc_host as host
from paccp.pricing.schema import svc_meta as meta
from paccp.pricing.schema import svc_pricebook as pricebook
from paccp.pricing.schema import svc_purchase as purchase
from paccp.pricing.schema import svc_rate as rate
from paccp.pricing.schema import svc_token as token
from paccp.pricing.schema import svc_vm as vm


class ServiceError(Exception):
    """A request the controller refuses: an HTTP status and one line saying why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


#: An agent that has not been seen for this long no longer holds its host (another may claim it).
HOST_LEASE_NS = 30 * 10**9
#: How long a controller process trusts a tenant token it resolved without asking the database again. A
#: token revoked through this process stops working at once; through another process (a second worker or
#: controller), within this bound.
TOKEN_TTL_S = 2.0
TOKEN_CACHE_MAX = 10_000


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def digest(secret: str) -> str:
    """SHA-256 of a token (tokens are 256-bit random, so a fast hash is enough: no dictionary to try)."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def new_token(prefix: str) -> str:
    return f"{prefix}_{secrets.token_urlsafe(32)}"


def same_secret(given: str, sha256: str) -> bool:
    return hmac.compare_digest(digest(given), sha256)


@dataclass(frozen=True)
class VmRow:
    name: str
    tenant: str
    host: str
    cgroup: str


@dataclass(frozen=True)
class PurchaseRow:
    id: int
    tenant: str
    vm: str
    port: int | None
    model: str
    scheme: str
    guarantee: str | None
    rate_bps: int | None
    cos: str
    theta_bps: int
    omega: Decimal
    per_hour: Decimal
    currency: str
    state: str
    replaces: int | None
    created_at: str
    ended_at: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "vm": self.vm,
            "port": self.port,
            "model": self.model,
            "scheme": self.scheme,
            "guarantee": self.guarantee,
            "rate_bps": self.rate_bps,
            "cos": self.cos,
            "theta_bps": self.theta_bps,
            "omega": format(self.omega, "f"),
            "per_hour": format(self.per_hour.normalize(), "f"),
            "currency": self.currency,
            "state": self.state,
            "replaces": self.replaces,
            "created_at": self.created_at,
            "ended_at": self.ended_at,
        }


class Store:
    """The controller's tables over one :class:`Ledger` (its engine, its writer lock)."""

    def __init__(self, ledger: Ledger, token_ttl_s: float = TOKEN_TTL_S) -> None:
        self.ledger = ledger  # opening the ledger migrated it: the svc_* tables exist (migration 0003)
        self.engine = ledger.engine
        self.token_ttl_s = token_ttl_s
        self._tokens: dict[str, tuple[float, Tenant]] = {}  # token digest -> (valid until, tenant)

    def write(self) -> Any:
        """A writer transaction holding the ledger's write lock (all-or-nothing)."""
        return self.ledger._write()

    # --- generation (what agents watch) -------------------------------------------------------
    @staticmethod
    def bump(conn: Connection) -> None:
        conn.execute(update(meta).where(meta.c.key == "generation").values(value=meta.c.value + 1))

    def generation(self) -> int:
        with self.engine.connect() as conn:
            return int(conn.execute(select(meta.c.value).where(meta.c.key == "generation")).scalar() or 0)

    # --- tokens --------------------------------------------------------------------------------
    def add_token(self, tenant: str) -> str:
        tok = new_token("pt")
        with self.write() as conn:
            conn.execute(token.insert(), {"sha256": digest(tok), "tenant": tenant, "created_at": now_iso()})
        return tok

    def revoke_tokens(self, tenant: str) -> int:
        with self.write() as conn:
            n = int(conn.execute(token.delete().where(token.c.tenant == tenant)).rowcount)
        self._tokens = {k: v for k, v in self._tokens.items() if v[1].name != tenant}
        return n

    def tenant_cached(self, tok: str) -> Tenant | None:
        """The tenant of a token this process resolved less than :data:`TOKEN_TTL_S` ago, else None."""
        hit = self._tokens.get(digest(tok))
        return hit[1] if hit is not None and hit[0] > time.monotonic() else None

    def tenant_of(self, tok: str) -> Tenant | None:
        """The tenant a token belongs to, or None: one indexed query on the token's SHA-256, remembered
        for :data:`TOKEN_TTL_S` (unknown tokens are not remembered: a new token works at once)."""
        d = digest(tok)
        now = time.monotonic()
        hit = self.tenant_cached(tok)
        if hit is not None:
            return hit
        t = ledger_schema.tenant
        q = select(t.c.name, t.c.model, t.c.book_toml, t.c.book_sha256).join(
            token, token.c.tenant == t.c.name
        )
        with self.engine.connect() as conn:
            row = conn.execute(q.where(token.c.sha256 == d)).first()
        if row is None:
            self._tokens.pop(d, None)
            return None
        if len(self._tokens) >= TOKEN_CACHE_MAX:
            self._tokens = {}
        got = self._tokens[d] = (now + self.token_ttl_s, Tenant(*row))
        return got[1]

    # --- price books ---------------------------------------------------------------------------
    def put_book(self, name: str, text: str) -> bool:
        with self.write() as conn:
            had = conn.execute(select(pricebook.c.book_toml).where(pricebook.c.name == name)).first()
            if had is not None:
                if had[0] == text:
                    return False
                conn.execute(pricebook.delete().where(pricebook.c.name == name))
            conn.execute(pricebook.insert(), {"name": name, "book_toml": text, "created_at": now_iso()})
        return True

    def books(self) -> dict[str, str]:
        with self.engine.connect() as conn:
            rows = conn.execute(select(pricebook.c.name, pricebook.c.book_toml)).all()
        return {str(a): str(b) for a, b in rows}

    # --- hosts ---------------------------------------------------------------------------------
    def register_host(self, name: str, instance_id: str, now_ns: int) -> str:
        """Give ``instance_id`` the host (a new session token); 409 while another agent holds it."""
        session = new_token("ps")
        with self.write() as conn:
            row = conn.execute(
                select(host.c.instance_id, host.c.last_seen_ns).where(host.c.name == name)
            ).first()
            values = {"instance_id": instance_id, "session_sha256": digest(session), "last_seen_ns": now_ns}
            if row is None:
                conn.execute(host.insert(), {"name": name, "registered_at": now_iso(), **values})
            else:
                if row[0] != instance_id and now_ns - int(row[1]) < HOST_LEASE_NS:
                    left = (HOST_LEASE_NS - (now_ns - int(row[1]))) / 1e9
                    raise ServiceError(
                        409,
                        f"host {name!r} is held by another agent (seen {(now_ns - int(row[1])) / 1e9:.0f} s"
                        f" ago; it may be claimed {left:.0f} s after that agent stops)",
                    )
                conn.execute(update(host).where(host.c.name == name).values(**values))
        return session

    def host_of(self, session: str, now_ns: int) -> str | None:
        """The host a session token holds (and mark it seen), or None."""
        d = digest(session)
        with self.engine.connect() as conn:
            row = conn.execute(
                select(host.c.name, host.c.last_seen_ns).where(host.c.session_sha256 == d)
            ).first()
        if row is None:
            return None
        if now_ns - int(row[1]) > HOST_LEASE_NS // 3:  # a write at most every 10 s per host (lease 30 s)
            with self.write() as conn:
                conn.execute(update(host).where(host.c.name == row[0]).values(last_seen_ns=now_ns))
        return str(row[0])

    def hosts(self) -> list[dict[str, Any]]:
        now = time.time_ns()
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(host.c.name, host.c.registered_at, host.c.last_seen_ns).order_by(host.c.name)
            ).all()
        return [
            {"name": a, "registered_at": b, "last_seen_s_ago": round((now - int(c)) / 1e9, 1),
             "alive": now - int(c) < HOST_LEASE_NS}
            for a, b, c in rows
        ]  # fmt: skip

    # --- VMs -----------------------------------------------------------------------------------
    def add_vm(self, name: str, tenant: str, host_name: str, cgroup: str) -> bool:
        with self.write() as conn:
            row = conn.execute(select(vm.c.tenant, vm.c.host, vm.c.cgroup).where(vm.c.name == name)).first()
            if row is not None:
                if tuple(row) == (tenant, host_name, cgroup):
                    return False
                raise ServiceError(409, f"VM {name!r} already exists with another tenant, host or cgroup")
            clash = conn.execute(
                select(vm.c.name).where(vm.c.host == host_name, vm.c.cgroup == cgroup)
            ).first()
            if clash is not None:
                raise ServiceError(409, f"cgroup {cgroup} on host {host_name} is already VM {clash[0]!r}")
            conn.execute(
                vm.insert(),
                {
                    "name": name,
                    "tenant": tenant,
                    "host": host_name,
                    "cgroup": cgroup,
                    "created_at": now_iso(),
                },
            )
            self.bump(conn)
        return True

    def remove_vm(self, name: str) -> None:
        with self.write() as conn:
            active = conn.execute(
                select(purchase.c.id).where(purchase.c.vm == name, purchase.c.state == "active")
            ).first()
            if active is not None:
                raise ServiceError(409, f"VM {name!r} has an active purchase ({active[0]}): cancel it first")
            n = conn.execute(vm.delete().where(vm.c.name == name)).rowcount
            if not n:
                raise ServiceError(404, f"no VM {name!r}")
            self.bump(conn)

    def vms(self, tenant: str | None = None, host_name: str | None = None) -> list[VmRow]:
        q = select(vm.c.name, vm.c.tenant, vm.c.host, vm.c.cgroup).order_by(vm.c.name)
        if tenant is not None:
            q = q.where(vm.c.tenant == tenant)
        if host_name is not None:
            q = q.where(vm.c.host == host_name)
        with self.engine.connect() as conn:
            return [VmRow(*r) for r in conn.execute(q).all()]

    def vm(self, name: str) -> VmRow | None:
        with self.engine.connect() as conn:
            row = conn.execute(
                select(vm.c.name, vm.c.tenant, vm.c.host, vm.c.cgroup).where(vm.c.name == name)
            ).first()
        return None if row is None else VmRow(*row)

    # --- purchases -----------------------------------------------------------------------------
    _PCOLS = (
        purchase.c.id, purchase.c.tenant, purchase.c.vm, purchase.c.port, purchase.c.model,
        purchase.c.scheme, purchase.c.guarantee, purchase.c.rate_bps, purchase.c.cos,
        purchase.c.theta_bps, purchase.c.omega, purchase.c.per_hour, purchase.c.currency, purchase.c.state,
        purchase.c.replaces, purchase.c.created_at, purchase.c.ended_at,
    )  # fmt: skip

    def purchases(
        self, tenant: str | None = None, active_only: bool = False, vms: list[str] | None = None
    ) -> list[PurchaseRow]:
        q = select(*self._PCOLS).order_by(purchase.c.id)
        if tenant is not None:
            q = q.where(purchase.c.tenant == tenant)
        if active_only:
            q = q.where(purchase.c.state == "active")
        if vms is not None:
            q = q.where(purchase.c.vm.in_(vms))
        with self.engine.connect() as conn:
            return [_prow(r) for r in conn.execute(q).all()]

    def tenant_vms(self, tenant: str) -> list[tuple[VmRow, list[PurchaseRow], tuple[int, int] | None]]:
        """A tenant's VMs, each with its active purchases and its last reported (rate, at_ns): one query."""
        active = (
            (purchase.c.vm == vm.c.name) & (purchase.c.tenant == vm.c.tenant) & (purchase.c.state == "active")
        )
        q = (
            select(
                vm.c.name, vm.c.tenant, vm.c.host, vm.c.cgroup, rate.c.rate_bps, rate.c.at_ns, *self._PCOLS
            )
            .select_from(vm.outerjoin(rate, rate.c.vm == vm.c.name).outerjoin(purchase, active))
            .where(vm.c.tenant == tenant)
            .order_by(vm.c.name, purchase.c.id)
        )
        out: list[tuple[VmRow, list[PurchaseRow], tuple[int, int] | None]] = []
        with self.engine.connect() as conn:
            for r in conn.execute(q).all():
                if not out or out[-1][0].name != r[0]:
                    out.append((VmRow(*r[:4]), [], None if r[4] is None else (int(r[4]), int(r[5]))))
                if r[6] is not None:
                    out[-1][1].append(_prow(r[6:]))
        return out

    def purchase(self, pid: int) -> PurchaseRow | None:
        with self.engine.connect() as conn:
            row = conn.execute(select(*self._PCOLS).where(purchase.c.id == pid)).first()
        return None if row is None else _prow(row)

    def buy(self, row: dict[str, Any], replaces: int | None = None) -> PurchaseRow:
        """Insert an active purchase (ending ``replaces``) in one transaction; 409 on a conflicting one."""
        with self.write() as conn:
            if replaces is not None:
                n = conn.execute(
                    update(purchase)
                    .where(purchase.c.id == replaces, purchase.c.state == "active")
                    .values(state="replaced", ended_at=now_iso())
                ).rowcount
                if not n:
                    raise ServiceError(409, f"purchase {replaces} is no longer active")
            cond = (purchase.c.vm == row["vm"]) & (purchase.c.state == "active")
            cond &= purchase.c.port.is_(None) if row["port"] is None else purchase.c.port == row["port"]
            clash = conn.execute(select(purchase.c.id).where(cond)).first()
            if clash is not None:
                what = "VM" if row["port"] is None else f"port {row['port']} of the VM"
                raise ServiceError(
                    409, f"the {what} already has active purchase {clash[0]}: change or cancel that one"
                )
            res = conn.execute(
                purchase.insert(),
                {**row, "state": "active", "replaces": replaces, "created_at": now_iso(), "ended_at": None},
            )
            pid = int(res.inserted_primary_key[0])
            self.bump(conn)
        out = self.purchase(pid)
        assert out is not None
        return out

    def cancel(self, pid: int) -> None:
        with self.write() as conn:
            n = conn.execute(
                update(purchase)
                .where(purchase.c.id == pid, purchase.c.state == "active")
                .values(state="cancelled", ended_at=now_iso())
            ).rowcount
            if not n:
                raise ServiceError(409, f"purchase {pid} is not active")
            self.bump(conn)

    # --- rates ---------------------------------------------------------------------------------
    def set_rates(self, rates: dict[str, int], now_ns: int) -> None:
        if not rates:
            return
        with self.write() as conn:
            conn.execute(rate.delete().where(rate.c.vm.in_(list(rates))))
            conn.execute(rate.insert(), [{"vm": k, "rate_bps": v, "at_ns": now_ns} for k, v in rates.items()])


def _prow(r: Any) -> PurchaseRow:
    def opt_int(v: Any) -> int | None:
        return None if v is None else int(v)

    return PurchaseRow(
        int(r[0]), str(r[1]), str(r[2]), opt_int(r[3]), str(r[4]), str(r[5]),
        None if r[6] is None else str(r[6]), opt_int(r[7]), str(r[8]), int(r[9]), Decimal(r[10]),
        Decimal(r[11]), str(r[12]), str(r[13]), opt_int(r[14]), str(r[15]),
        None if r[16] is None else str(r[16]),
    )  # fmt: skip
