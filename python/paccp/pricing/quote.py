"""Quotes in both directions: what a (theta, omega) costs, and what a budget buys.

All money is :class:`decimal.Decimal`. Intermediate values are exact (or carried at 50 significant digits
where a division by 3600 does not terminate). A quote's total is its exact price rounded once with the book's
rounding; the components shown are that total split by largest remainder, so they always add up.
"""

from __future__ import annotations

import decimal
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Literal

from paccp.common.usage import MAX_LINK_BPS, MAX_OMEGA, MIN_OMEGA
from paccp.errors import UserError
from paccp.pricing.book import MAX_AMOUNT, FBPBook, PriceBook, SoftBWBook, VBPBook, load_book
from paccp.units import format_rate

CTX = decimal.Context(prec=50, rounding=decimal.ROUND_HALF_EVEN)
NS_PER_HOUR = Decimal(3_600_000_000_000)
BPS_PER_GBPS = Decimal(1_000_000_000)
CoSName = Literal["be", "ds", "mrg"]
Guarantee = Literal["strict", "dynamic", "fair", "none"]
COS_TO_GUARANTEE: dict[str, Guarantee] = {"be": "none", "ds": "fair", "mrg": "strict"}
#: Longest duration a quote or budget covers: 100 years.
MAX_DURATION_NS = 100 * 366 * 86_400 * 10**9
#: Largest flow size a dynamic-guarantee quote takes: 1 EB.
MAX_SIZE_BYTES = 10**18


def check_bounds(
    *,
    theta_bps: int | None = None,
    omega: Decimal | None = None,
    duration_ns: int | None = None,
    rate_bps: int | None = None,
    size_bytes: int | None = None,
    deadline_ns: int | None = None,
    budget: Decimal | None = None,
) -> None:
    """Reject, with one line, a quote argument outside the bounds of docs/pricing.md ("Bounds")."""
    for name, v in (("theta", theta_bps), ("rate", rate_bps)):
        if v is not None and not 0 <= v <= MAX_LINK_BPS:
            raise UserError(f"{name} must be between 0 and {MAX_LINK_BPS:.0e} bit/s")
    for name, v in (("duration", duration_ns), ("deadline", deadline_ns)):
        if v is not None and not 0 <= v <= MAX_DURATION_NS:
            raise UserError(f"{name} must be between 0 and 100 years")
    if size_bytes is not None and not 0 <= size_bytes <= MAX_SIZE_BYTES:
        raise UserError(f"size must be between 0 and {MAX_SIZE_BYTES} bytes (1 EB)")
    if omega is not None and (not omega.is_finite() or not MIN_OMEGA <= omega <= MAX_OMEGA):
        raise UserError(f"omega must be a finite number between {MIN_OMEGA} and {MAX_OMEGA:.0E}")
    if budget is not None and (not budget.is_finite() or not 0 <= budget <= MAX_AMOUNT):
        raise UserError(f"budget must be a finite amount between 0 and {MAX_AMOUNT:.0E}")


def hours(duration_ns: int) -> Decimal:
    """Nanoseconds to hours (50 significant digits)."""
    return CTX.divide(Decimal(duration_ns), NS_PER_HOUR)


def gbps(rate_bps: int | Decimal) -> Decimal:
    """bit/s to Gb/s (exact)."""
    return CTX.divide(Decimal(rate_bps), BPS_PER_GBPS)


@dataclass(frozen=True)
class Component:
    """One term of a price: a name, its formula with numbers, its price per hour, its amount."""

    name: str
    formula: str
    per_hour: Decimal  # exact
    amount: Decimal  # quantised


@dataclass(frozen=True)
class Quote:
    """The price of one purchase over ``duration_ns``."""

    model: str
    cos: str
    theta_bps: int
    omega: Decimal
    duration_ns: int
    currency: str
    components: list[Component]
    total: Decimal
    guarantee: str | None = None
    rate_bps: int | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def per_hour(self) -> Decimal:
        """Exact price per hour (sum of the components' exact hourly prices)."""
        return sum((c.per_hour for c in self.components), Decimal(0))

    def to_json(self) -> dict[str, Any]:
        """A JSON-friendly dict; money and omega as decimal strings."""
        return {
            "model": self.model,
            "cos": self.cos,
            "theta_bps": self.theta_bps,
            "omega": format(self.omega, "f"),
            "guarantee": self.guarantee,
            "rate_bps": self.rate_bps,
            "duration_ns": self.duration_ns,
            "currency": self.currency,
            "per_hour": format(self.per_hour.normalize(), "f"),
            "components": [
                {
                    "name": c.name,
                    "formula": c.formula,
                    "per_hour": format(c.per_hour.normalize(), "f"),
                    "amount": str(c.amount),
                }
                for c in self.components
            ],
            "total": str(self.total),
            "notes": self.notes,
        }


def check_pair(cos: str, theta_bps: int, omega: Decimal) -> None:
    """The CoS rules of the paper: BE (0, 1), DS (0, omega > 1), MRG (theta > 0, omega >= 1)."""
    from paccp.common.cos import purchase_error

    bad = purchase_error(cos, theta_bps, omega)
    if bad is not None:
        raise UserError(bad)


def linear_terms(
    sec: VBPBook | FBPBook, cos: str, theta_bps: int | Decimal, omega: Decimal
) -> list[tuple[str, str, Decimal]]:
    """The hourly terms (name, formula, exact price per hour) of a VBP price or an FBP add-on.

    VBP: P0 always; P1 (omega-1) for DS and MRG; P2 theta for MRG. FBP: nothing for BE; P0^s + P1^s
    (omega-1) for DS; + P2^s theta for MRG. Used by quotes and by the ledger's charging alike.
    """
    th = gbps(theta_bps)
    om1 = omega - 1
    if isinstance(sec, VBPBook):
        terms = [("base", f"P0 = {sec.p0}", sec.p0)]
        if cos in ("ds", "mrg"):
            terms.append(("weight", f"P1 (omega-1) = {sec.p1} x {om1}", CTX.multiply(sec.p1, om1)))
        if cos == "mrg":
            terms.append(("min rate", f"P2 theta = {sec.p2} x {th} Gb/s", CTX.multiply(sec.p2, th)))
        return terms
    if cos == "be":
        return [("BE add-on", "included in the VM price", Decimal(0))]
    terms = [("add-on base", f"P0s = {sec.p0s}", sec.p0s)]
    terms.append(("add-on weight", f"P1s (omega-1) = {sec.p1s} x {om1}", CTX.multiply(sec.p1s, om1)))
    if cos == "mrg":
        p2 = sec.p2s_per_gbps_hour
        unit = "" if sec.p2s_unit == "per_gbps_hour" else f" ({sec.p2s}/GB x 450 GB per Gb/s-hour)"
        terms.append(("add-on min rate", f"P2s theta = {p2}{unit} x {th} Gb/s", CTX.multiply(p2, th)))
    return terms


def softbw_terms(
    sec: SoftBWBook,
    guarantee: str,
    rate_bps: int | Decimal,
    theta_bps: int | Decimal = 0,
    size_bytes: int | Decimal = 0,
    window_ns: int | Decimal = 0,
) -> list[tuple[str, str, Decimal]]:
    """SoftBW hourly terms at achieved rate r for one guarantee kind (see the book's comments)."""
    cap = gbps(sec.capacity_bps)
    r = gbps(rate_bps)
    if guarantee == "none":
        return [("best effort", "free", Decimal(0))]
    if guarantee == "fair":
        return [("fair share", f"r (r/C) P1 = {r} x {r}/{cap} x {sec.p1}", fair(r, cap, sec.p1))]
    if guarantee == "strict":
        b = gbps(theta_bps)
        if b <= 0:
            raise UserError("a strict guarantee needs theta (B) > 0")
        if b >= cap:
            raise UserError(f"a strict guarantee must be below the capacity C = {sec.capacity}")
        within = min(r, b)
        factor = CTX.add(1, CTX.divide(b, cap))
        terms = [
            (
                "strict",
                f"r (1 + B/C) P0 = {within} x (1 + {b}/{cap}) x {sec.p0}",
                CTX.multiply(CTX.multiply(within, factor), sec.p0),
            )
        ]
        if r > b:
            x = r - b
            terms.append(("above B as fair share", f"x (x/C) P1, x = r-B = {x}", fair(x, cap, sec.p1)))
        return terms
    if guarantee == "dynamic":
        if window_ns <= 0:
            raise UserError("a dynamic guarantee needs a deadline after the start")
        need = gbps(CTX.divide(Decimal(size_bytes) * 8 * Decimal(10**9), Decimal(window_ns)))
        factor = CTX.add(1, CTX.divide(need, cap))
        return [
            (
                "dynamic",
                f"r (1 + S/(T C)) P1 = {r} x (1 + {need}/{cap}) x {sec.p1}",
                CTX.multiply(CTX.multiply(r, factor), sec.p1),
            )
        ]
    raise UserError(f"unknown guarantee {guarantee!r} (expected strict, dynamic, fair or none)")


def fair(r: Decimal, cap: Decimal, p1: Decimal) -> Decimal:
    """r (r/C) P1 per hour."""
    return CTX.multiply(CTX.multiply(r, CTX.divide(r, cap)), p1)


def _components(
    bk: PriceBook, terms: list[tuple[str, str, Decimal]], h: Decimal
) -> tuple[list[Component], Decimal]:
    amounts, total = bk.rounding.allocate([CTX.multiply(p, h) for _n, _f, p in terms])
    return [Component(n, f, p, a) for (n, f, p), a in zip(terms, amounts, strict=True)], total


def _book(book: PriceBook | None) -> PriceBook:
    return book if book is not None else load_book()[0]


def quote(
    model: str,
    cos: str,
    theta_bps: int = 0,
    omega: Decimal | int | str = 1,
    duration_ns: int | None = None,
    book: PriceBook | None = None,
    *,
    guarantee: str | None = None,
    rate_bps: int | None = None,
    size_bytes: int | None = None,
    deadline_ns: int | None = None,
) -> Quote:
    """Price one purchase.

    VBP and FBP: the (theta, omega) of ``cos`` for ``duration_ns``. SoftBW: ``guarantee`` (default from the
    CoS: be -> none, ds -> fair, mrg -> strict with B = theta) at achieved rate ``rate_bps`` (default B for
    strict, S/T for dynamic); dynamic needs ``size_bytes`` and ``deadline_ns`` (relative to the start).
    ``duration_ns`` defaults to one hour, or for a dynamic guarantee to its deadline (so S is charged).
    """
    bk = _book(book)
    try:
        om = Decimal(str(omega))
    except decimal.InvalidOperation:
        raise UserError(f"cannot parse omega {omega!r}") from None
    check_bounds(theta_bps=theta_bps, omega=om, duration_ns=duration_ns, rate_bps=rate_bps,
                 size_bytes=size_bytes, deadline_ns=deadline_ns)  # fmt: skip
    if duration_ns is None:  # a dynamic guarantee lasts until its deadline; anything else: one hour
        duration_ns = deadline_ns if guarantee == "dynamic" and deadline_ns else 3_600_000_000_000
    if duration_ns < 0:
        raise UserError("duration must not be negative")
    h = hours(duration_ns)
    sec = bk.section(model)
    notes: list[str] = []
    if isinstance(sec, SoftBWBook):
        g = guarantee or COS_TO_GUARANTEE.get(cos, "none")
        if g == "strict" and rate_bps is None:
            rate_bps = theta_bps
            notes.append("rate r assumed equal to the guarantee B")
        if g == "dynamic":
            if size_bytes is None or deadline_ns is None:
                raise UserError("a dynamic guarantee needs --size and --deadline")
            if rate_bps is None:
                rate_bps = int(CTX.divide(Decimal(size_bytes) * 8 * 10**9, Decimal(max(deadline_ns, 1))))
                notes.append("rate r assumed S/T (the flow finishes exactly at its deadline)")
        if g == "fair" and rate_bps is None:
            raise UserError("a fair-share quote needs --rate")
        r = rate_bps or 0
        if r < 0:
            raise UserError("rate must not be negative")
        terms = softbw_terms(sec, g, r, theta_bps, size_bytes or 0, deadline_ns or 0)
        comps, total = _components(bk, terms, h)
        return Quote(model, cos, theta_bps, om, duration_ns, bk.currency, comps, total, g, r, notes)
    check_pair(cos, theta_bps, om)
    comps, total = _components(bk, linear_terms(sec, cos, theta_bps, om), h)
    return Quote(model, cos, theta_bps, om, duration_ns, bk.currency, comps, total, notes=notes)


@dataclass(frozen=True)
class Purchase:
    """What a budget buys in one CoS: the pair, its quote, and the money left over."""

    cos: str
    quote: Quote
    leftover: Decimal

    def to_json(self) -> dict[str, Any]:
        """JSON-friendly dict."""
        return {"cos": self.cos, "leftover": str(self.leftover), "quote": self.quote.to_json()}

    def describe(self) -> str:
        """One line, e.g. ``mrg: theta 2 Gb/s, omega 1.5``."""
        q = self.quote
        if q.guarantee is not None:
            return f"{q.guarantee}: rate {format_rate(q.rate_bps or 0)}, B {format_rate(q.theta_bps)}"
        return f"{self.cos}: theta {format_rate(q.theta_bps)}, omega {q.omega}"


def _floor_step(x: Decimal, step: Decimal) -> Decimal:
    if x <= 0:
        return Decimal(0)
    return CTX.multiply(CTX.divide_int(x, step), step)


def buy(
    model: str,
    budget: Decimal | str | int,
    duration_ns: int,
    cos: str | None = None,
    book: PriceBook | None = None,
    theta_bps: int | None = None,
) -> list[Purchase]:
    """The best (theta, omega) a budget buys, per CoS (all of them if ``cos`` is None).

    Rule (VBP and FBP): the hourly budget b = budget / hours. BE: (0, 1) if affordable. DS: the largest
    omega on the book's omega grid with price <= b. MRG: the largest theta on the theta grid up to the book's
    ``[buy] max_theta`` (a host's link; or the given ``theta_bps``), then the rest of the money as omega on
    the omega grid. SoftBW: strict, the largest B on
    the theta grid with B (1 + B/C) P0 <= b (the tenant sends at B); fair, the largest rate on the grid
    with r (r/C) P1 <= b; best effort is free. A CoS the budget cannot afford is left out.
    """
    bk = _book(book)
    try:
        money = Decimal(str(budget))
    except decimal.InvalidOperation:
        raise UserError(f"cannot parse budget {budget!r}") from None
    if money.is_finite() and money < 0:
        raise UserError("budget must not be negative")
    check_bounds(budget=money, duration_ns=duration_ns, theta_bps=theta_bps)
    if duration_ns <= 0:
        raise UserError("duration must be > 0")
    b = CTX.divide(money, hours(duration_ns))
    sec = bk.section(model)
    wstep = bk.buy.omega_step
    tstep = Decimal(bk.buy.theta_step_bps)
    wanted = [cos] if cos else ["be", "ds", "mrg"]
    out: list[Purchase] = []
    for c in wanted:
        cand = _buy_one(model, sec, c, b, wstep, tstep, theta_bps, Decimal(bk.buy.max_theta_bps))
        if cand is None:
            continue
        kind, th, om, rate = cand
        while True:  # guard against per-component rounding pushing the total above the budget
            if kind == "pair":
                q = quote(model, c, int(th), om, duration_ns, bk)
            else:
                q = quote(model, c, int(th), 1, duration_ns, bk, guarantee=kind, rate_bps=int(rate))
            if q.total <= money:
                break
            if kind == "pair" and om - wstep >= (Decimal(1) if c == "mrg" else 1 + wstep):
                om -= wstep
            elif kind in ("strict", "fair") and (th if kind == "strict" else rate) > tstep:
                th, rate = (th - tstep, th - tstep) if kind == "strict" else (th, rate - tstep)
            else:
                q = None  # type: ignore[assignment]
                break
        if q is not None:
            out.append(Purchase(c, q, money - q.total))
    if not out and cos:
        raise UserError(f"a budget of {money} {bk.currency} buys no {cos} for this duration")
    return out


def _buy_one(
    model: str,
    sec: VBPBook | FBPBook | SoftBWBook,
    cos: str,
    b: Decimal,
    wstep: Decimal,
    tstep: Decimal,
    theta_bps: int | None,
    max_theta: Decimal,
) -> tuple[str, Decimal, Decimal, Decimal] | None:
    if cos not in ("be", "ds", "mrg"):
        raise UserError(f"unknown cos {cos!r} (expected be, ds or mrg)")
    if isinstance(sec, SoftBWBook):
        cap = Decimal(sec.capacity_bps)
        if cos == "be":
            return ("none", Decimal(0), Decimal(1), Decimal(0))
        if cos == "mrg":  # B^2/C + B - b/P0 = 0 in Gb/s
            capg = gbps(cap)
            disc = CTX.add(1, CTX.divide(4 * b, CTX.multiply(sec.p0, capg)))
            bg = CTX.divide(CTX.multiply(capg, CTX.subtract(CTX.sqrt(disc), 1)), 2)
            bb = min(_floor_step(bg * BPS_PER_GBPS, tstep), cap - tstep)
            return ("strict", bb, Decimal(1), bb) if bb > 0 else None
        rg = CTX.sqrt(CTX.divide(CTX.multiply(b, gbps(cap)), sec.p1)) if sec.p1 > 0 else gbps(cap)
        rr = min(_floor_step(rg * BPS_PER_GBPS, tstep), cap)
        return ("fair", Decimal(0), Decimal(1), rr) if rr > 0 else None
    if isinstance(sec, VBPBook):
        base, per_w, per_g = sec.p0, sec.p1, sec.p2
    else:
        if cos == "be":
            return ("pair", Decimal(0), Decimal(1), Decimal(0))
        base, per_w, per_g = sec.p0s, sec.p1s, sec.p2s_per_gbps_hour
    spare = b - base
    if spare < 0:
        return None
    if cos == "be":
        return ("pair", Decimal(0), Decimal(1), Decimal(0))
    if cos == "ds":
        if per_w == 0:
            raise UserError("the book prices omega at 0: any omega is free, buy is undefined")
        om = 1 + _floor_step(CTX.divide(spare, per_w), wstep)
        return ("pair", Decimal(0), om, Decimal(0)) if om > 1 else None
    if theta_bps is not None:
        th = Decimal(theta_bps)
    elif per_g == 0:
        raise UserError("the book prices theta at 0: any theta is free, buy is undefined")
    else:
        th = min(_floor_step(CTX.divide(spare, per_g) * BPS_PER_GBPS, tstep), _floor_step(max_theta, tstep))
    spare -= CTX.multiply(per_g, gbps(th))
    if th <= 0 or spare < 0:
        return None
    om = 1 + (_floor_step(CTX.divide(spare, per_w), wstep) if per_w > 0 else Decimal(0))
    return ("pair", th, om, Decimal(0))
