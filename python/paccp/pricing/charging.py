"""How usage records become charges, and invoices. The rules are written out in ``docs/pricing.md``.

Every record is first clipped to the invoice period [start, end): a record that straddles a month boundary
is split in proportion to time (for SoftBW its rate r is unchanged, so its bytes split in proportion too).

- VBP (per VM-hour, by CoS and pair): every VBP record carries its VM's purchased pair (the simulator writes
  the VM's pair on each of the VM's flow records; a VM-level record carries it directly). For each
  (VM, CoS) the period is cut at every record start and end; a piece during which at least one record is
  active is charged once, P(CoS, pair) x hours, however many flows were active (VM-hours, not flow-hours);
  should overlapping records disagree, the componentwise largest (theta, omega) is used. Time with no active
  record is not charged.
- FBP (add-on per flow time slice): each record is a slice; charged P^s(CoS, theta, omega) x hours. A run-time
  upgrade or downgrade is a new slice with its own pair. BE slices carry an add-on of 0.
- SoftBW (usage-based): r = 8 x bytes / duration; charged (hourly price at r) x hours, by guarantee kind.
  Traffic above a strict guarantee B is charged as fair share on x = r - B; dynamic-guarantee traffic whose
  flow missed its deadline is not charged; best effort is free.
"""

from __future__ import annotations

import csv
import io
import itertools
from collections import defaultdict
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from paccp.common.usage import UsageRecord
from paccp.errors import UserError
from paccp.pricing.book import FBPBook, PriceBook, SoftBWBook, VBPBook
from paccp.pricing.period import Period
from paccp.pricing.quote import CTX, gbps, hours, linear_terms, softbw_terms


def per_record_rules(model: str) -> bool:
    """Whether :func:`check_chargeable` looks at a record of this model beyond its schema (SoftBW: yes;
    otherwise it only needs the book to price the model, which :meth:`Ledger.add_tenant` already checked)."""
    return model == "softbw"


def check_chargeable(r: UsageRecord, model: str, book: PriceBook, where: str) -> None:
    """Reject, with a one-line reason, a record the tenant's model cannot charge (before any write)."""
    try:
        sec = book.section(model)
    except UserError as exc:
        raise UserError(f"{where}: {exc.message}") from None
    if isinstance(sec, SoftBWBook):
        if r.guarantee == "strict" and r.theta_bps <= 0:
            raise UserError(f"{where}: a strict guarantee needs theta_bps (B) > 0")
        if r.guarantee == "strict" and r.theta_bps >= sec.capacity_bps:
            raise UserError(f"{where}: strict guarantee theta_bps is not below the capacity C")
        if r.guarantee == "dynamic":
            if r.deadline_ns is None or r.deadline_met is None:
                raise UserError(f"{where}: a dynamic guarantee needs deadline_ns and deadline_met")
            if r.deadline_ns <= r.start_ns:
                raise UserError(f"{where}: deadline_ns is not after start_ns")
        if r.bytes * 8 * 10**9 > sec.capacity_bps * (r.end_ns - r.start_ns):
            raise UserError(f"{where}: bytes is more than the link (capacity C = {sec.capacity}) carries")


@dataclass
class Line:
    """One invoice line: what, how much, at what unit price, for how much."""

    vm: str
    flow_id: str | None
    cos: str
    theta_bps: int
    omega: Decimal
    description: str
    unit: str
    quantity: Decimal  # exact
    exact_amount: Decimal  # exact
    amount: Decimal = Decimal(0)  # quantised

    @property
    def unit_price(self) -> Decimal:
        """Amount per unit of quantity (exact for VBP/FBP; the effective average for SoftBW)."""
        return CTX.divide(self.exact_amount, self.quantity) if self.quantity else Decimal(0)


@dataclass
class Invoice:
    """A tenant's invoice for one period."""

    tenant: str
    model: str
    period: str
    currency: str
    lines: list[Line]
    total: Decimal
    subtotals: dict[str, Decimal]
    records: int
    unit_price_places: int

    def _fmt_unit(self, v: Decimal) -> str:
        return str(v.quantize(Decimal(1).scaleb(-self.unit_price_places)))

    def to_json(self) -> dict[str, Any]:
        """JSON-friendly dict (money as decimal strings)."""
        return {
            "tenant": self.tenant,
            "model": self.model,
            "period": self.period,
            "currency": self.currency,
            "records": self.records,
            "lines": [
                {
                    "vm": ln.vm,
                    "flow_id": ln.flow_id,
                    "cos": ln.cos,
                    "theta_bps": ln.theta_bps,
                    "omega": format(ln.omega, "f"),
                    "description": ln.description,
                    "quantity": self._fmt_unit(ln.quantity),
                    "unit": ln.unit,
                    "unit_price": self._fmt_unit(ln.unit_price),
                    "amount": str(ln.amount),
                }
                for ln in self.lines
            ],
            "subtotals": {k: str(v) for k, v in self.subtotals.items()},
            "total": str(self.total),
        }

    def to_csv(self) -> str:
        """CSV text: one row per line, then one TOTAL row."""
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        cols = ["vm", "flow_id", "cos", "theta_bps", "omega", "description", "quantity", "unit"]
        w.writerow([*cols, "unit_price", "amount", "currency"])
        for d in self.to_json()["lines"]:
            vals = [d[c] if d[c] is not None else "" for c in cols]
            w.writerow([*vals, d["unit_price"], d["amount"], self.currency])
        w.writerow(["TOTAL", "", "", "", "", "", "", "", "", str(self.total), self.currency])
        return buf.getvalue()


def parse_period(period: str, what: str = "period") -> tuple[int, int]:
    """``YYYY-MM`` (strict, :class:`~paccp.pricing.period.Period`) -> [start_ns, end_ns) of that UTC month."""
    return Period.parse(period, what).bounds_ns()


def _clip(r: UsageRecord, s: int, e: int) -> tuple[int, int]:
    return max(r.start_ns, s), min(r.end_ns, e)


def charge(records: list[UsageRecord], model: str, book: PriceBook, start_ns: int, end_ns: int) -> list[Line]:
    """Turn records into invoice lines for the period [start_ns, end_ns) (amounts exact, not yet rounded)."""
    sec = book.section(model)
    lines: dict[tuple[Any, ...], Line] = {}

    def add(
        r: UsageRecord,
        flow: str | None,
        th: int,
        om: Decimal,
        desc: str,
        unit: str,
        qty: Decimal,
        amt: Decimal,
    ) -> None:
        key = (r.vm, flow or "", r.cos, th, om, desc)
        ln = lines.get(key)
        if ln is None:
            lines[key] = Line(r.vm, flow, r.cos, th, om, desc, unit, qty, amt)
        else:
            ln.quantity += qty
            ln.exact_amount = CTX.add(ln.exact_amount, amt)

    if isinstance(sec, VBPBook):
        groups: dict[tuple[str, str], list[UsageRecord]] = defaultdict(list)
        for r in records:
            groups[(r.vm, r.cos)].append(r)
        for (_vm, cos), recs in sorted(groups.items()):
            # sweep: +1 at each clipped start, -1 at each clipped end; charge the pieces with an active record
            events: list[tuple[int, int, int]] = []
            for k, r in enumerate(recs):
                a, b = _clip(r, start_ns, end_ns)
                if b > a:
                    events += [(a, 1, k), (b, -1, k)]
            events.sort()
            active: dict[tuple[int, Decimal], int] = {}  # pair -> number of active records carrying it
            prices: dict[tuple[int, Decimal], Decimal] = {}
            for (t, step, k), (t_next, _s, _k) in itertools.pairwise(
                [*events, (events[-1][0], 0, 0)] if events else []
            ):
                pair = (recs[k].theta_bps, recs[k].omega)
                active[pair] = active.get(pair, 0) + step
                if active[pair] == 0:
                    del active[pair]
                if not active or t_next <= t:
                    continue
                th = max(p[0] for p in active)  # every record carries the VM's pair (see the docstring)
                om = max(p[1] for p in active)
                if (th, om) not in prices:
                    terms = linear_terms(sec, cos, th, max(om, Decimal(1)))
                    prices[(th, om)] = sum((p for _n, _f, p in terms), Decimal(0))
                h = hours(t_next - t)
                add(
                    recs[k],
                    None,
                    th,
                    om,
                    f"VM-hours at P_{cos.upper()}",
                    "VM-hour",
                    h,
                    CTX.multiply(prices[(th, om)], h),
                )
        return list(lines.values())
    for r in records:
        a, b = _clip(r, start_ns, end_ns)
        if b < a or (b == a and r.end_ns > r.start_ns):
            continue
        h = hours(b - a)
        if isinstance(sec, FBPBook):
            per_hour = sum((p for _n, _f, p in linear_terms(sec, r.cos, r.theta_bps, r.omega)), Decimal(0))
            desc = "BE (included in VM price)" if r.cos == "be" else f"{r.cos.upper()} add-on P^s"
            add(r, r.flow_id, r.theta_bps, r.omega, desc, "flow-hour", h, CTX.multiply(per_hour, h))
            continue
        if r.end_ns == r.start_ns:
            continue  # zero bytes in zero time (check_chargeable rejects bytes > 0)
        rate = CTX.divide(Decimal(r.bytes) * 8 * 10**9, Decimal(r.end_ns - r.start_ns))
        volume = CTX.multiply(gbps(rate), h)  # Gb/s-hours
        if r.guarantee == "dynamic" and r.deadline_met is False:
            add(r, r.flow_id, r.theta_bps, r.omega, "dynamic, deadline missed: not charged", "Gb/s-hour",
                volume, Decimal(0))  # fmt: skip
            continue
        window = (r.deadline_ns or 0) - r.start_ns
        for name, _f, per_hour in softbw_terms(sec, r.guarantee, rate, r.theta_bps, r.bytes, window):
            qty = volume
            if name == "strict":
                qty = CTX.multiply(gbps(min(rate, Decimal(r.theta_bps))), h)
            elif name.startswith("above"):
                qty = CTX.multiply(gbps(rate - r.theta_bps), h)
            add(r, r.flow_id, r.theta_bps, r.omega, name, "Gb/s-hour", qty, CTX.multiply(per_hour, h))
    return list(lines.values())


def build_invoice(
    tenant: str, model: str, book: PriceBook, records: list[UsageRecord], period: str
) -> Invoice:
    """The invoice of ``records`` (already selected for the tenant) for ``period`` (YYYY-MM)."""
    month = Period.parse(period)
    period = str(month)
    s, e = month.bounds_ns()
    lines = charge(records, model, book, s, e)
    lines.sort(key=lambda ln: (ln.vm, ln.flow_id or "", ln.cos, ln.theta_bps, ln.omega, ln.description))
    amounts, total = book.rounding.allocate([ln.exact_amount for ln in lines])
    subtotals: dict[str, Decimal] = {}
    for ln, amount in zip(lines, amounts, strict=True):
        ln.amount = amount
        subtotals[ln.cos] = subtotals.get(ln.cos, Decimal(0)) + amount
    return Invoice(
        tenant,
        model,
        period,
        book.currency,
        lines,
        total,
        subtotals,
        len(records),
        book.rounding.unit_price_places,
    )
