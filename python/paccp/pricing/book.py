"""Price books: TOML files with explicit currency, units and rounding, validated on load.

A book may describe any of the three models (``[vbp]``, ``[fbp]``, ``[softbw]``); a model that is used must
be present. TOML numbers are parsed straight into :class:`decimal.Decimal` (never binary floats), and
money fields may also be written as strings (``p0 = "0.10"``). See ``docs/pricing.md``.
"""

from __future__ import annotations

import decimal
import hashlib
import tomllib
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from paccp.common.usage import MAX_LINK_BPS, MAX_OMEGA
from paccp.errors import UserError, validation_error
from paccp.units import parse_rate_bps

Model = Literal["vbp", "fbp", "softbw"]
MODELS: tuple[Model, ...] = ("vbp", "fbp", "softbw")

ROUNDING_MODES: dict[str, str] = {
    "half_even": decimal.ROUND_HALF_EVEN,
    "half_up": decimal.ROUND_HALF_UP,
    "half_down": decimal.ROUND_HALF_DOWN,
    "up": decimal.ROUND_UP,
    "down": decimal.ROUND_DOWN,
    "ceiling": decimal.ROUND_CEILING,
    "floor": decimal.ROUND_FLOOR,
}

#: Gigabytes (10^9 bytes) delivered by 1 Gb/s in one hour: 3600 s * 1e9 bit/s / 8 / 1e9.
GB_PER_GBPS_HOUR = Decimal(450)

_STRICT = ConfigDict(extra="forbid", frozen=True)


#: Bounds on what a book, a quote or an invoice may contain (docs/pricing.md, "Bounds"). Within them every
#: intermediate value fits the 50-digit context exactly enough, and every amount fits the ledger's columns.
MAX_PRICE = Decimal(10) ** 9  # per hour (or per GB): any price in a book
MAX_AMOUNT = Decimal(10) ** 15  # any amount: a budget, a quote's or an invoice's total
MIN_QUANTUM = Decimal(10) ** -12
MAX_QUANTUM = Decimal(10) ** 6
_MONEY_CTX = decimal.Context(prec=60, rounding=decimal.ROUND_HALF_EVEN, traps=[decimal.InvalidOperation])


def _finite(v: Decimal) -> Decimal:
    if not v.is_finite():
        raise ValueError("must be a finite number")
    return v


def _rate(text: str) -> int:
    """A rate in a book; a parse error becomes a field error (so the message names the field)."""
    try:
        return parse_rate_bps(text)
    except UserError as exc:
        raise ValueError(exc.message) from None


Price = Annotated[Decimal, AfterValidator(_finite), Field(ge=0, le=MAX_PRICE)]


class Rounding(BaseModel):
    """How money amounts are quantised: to multiples of ``quantum`` (e.g. 0.01 or 0.05) with ``mode``."""

    model_config = _STRICT
    quantum: Annotated[Decimal, AfterValidator(_finite)] = Field(
        ge=MIN_QUANTUM, le=MAX_QUANTUM, description="smallest unit of an amount, e.g. 0.01 or 0.05"
    )
    mode: Literal["half_even", "half_up", "half_down", "up", "down", "ceiling", "floor"]
    unit_price_places: int = Field(default=6, ge=0, le=18, description="decimals shown for unit prices")

    def _steps(self, amount: Decimal, mode: str) -> Decimal:
        """``amount`` in quanta, rounded to a whole number with ``mode``."""
        return _MONEY_CTX.divide(amount, self.quantum).to_integral_value(rounding=mode, context=_MONEY_CTX)

    def money(self, amount: Decimal) -> Decimal:
        """Round an exact amount to a multiple of the quantum with the book's mode (0.05 gives 0.05 steps).

        The result is written with the quantum's decimals (``1.35``, not ``1.3500``); it is checked against
        :data:`MAX_AMOUNT`.
        """
        steps = self._steps(amount, ROUNDING_MODES[self.mode])
        out = _MONEY_CTX.multiply(steps, self.quantum)
        if abs(out) > MAX_AMOUNT:
            raise UserError(f"amount {out:.6E} is beyond the limit of {MAX_AMOUNT:.0E}")
        return out.quantize(self.quantum, context=_MONEY_CTX)

    def allocate(self, exact: list[Decimal]) -> tuple[list[Decimal], Decimal]:
        """Round the exact total once, then split it over the parts so that they add up to it.

        The total is ``money(sum(exact))``. Each part gets its exact amount rounded down to a multiple of the
        quantum; the quanta still missing go, one each, to the parts with the largest remainders (ties: the
        earlier part). Many sub-quantum lines are thus not each rounded to zero (or each up); the parts sum
        to the total exactly.
        """
        total = self.money(_sum(exact))
        floor_steps = [self._steps(e, decimal.ROUND_FLOOR) for e in exact]
        floors = [_MONEY_CTX.multiply(k, self.quantum).quantize(self.quantum) for k in floor_steps]
        missing = int(_MONEY_CTX.divide(total - _sum(floors), self.quantum))
        rema = [_MONEY_CTX.subtract(e, f) for e, f in zip(exact, floors, strict=True)]
        order = sorted(range(len(exact)), key=lambda i: (-rema[i], i))
        for i in order[: max(missing, 0)]:
            floors[i] += self.quantum
        return floors, total


def _sum(values: list[Decimal]) -> Decimal:
    """Exact-enough sum (60 significant digits, not the default context's 28)."""
    out = Decimal(0)
    for v in values:
        out = _MONEY_CTX.add(out, v)
    return out


class VBPBook(BaseModel):
    """VM-based pricing, prices per VM-hour: P_BE = P0, P_DS = P0 + P1(omega-1), P_MRG = ... + P2 theta."""

    model_config = _STRICT
    time_unit: Literal["hour"]
    p0: Price = Field(description="base price per VM-hour (the BE price)")
    p1: Price = Field(description="price per unit of (omega - 1) per hour")
    p2: Price = Field(description="price per Gb/s of theta per hour")
    p2_unit: Literal["per_gbps_hour"]


class FBPBook(BaseModel):
    """Flow-based add-on: P^s = P0^s + P1^s (omega-1) + P2^s theta for DS/MRG flows; BE add-on is 0."""

    model_config = _STRICT
    time_unit: Literal["hour"]
    p0s: Price = Field(description="add-on per upgraded flow-hour")
    p1s: Price = Field(description="add-on per unit of (omega - 1) per flow-hour")
    p2s: Price = Field(description="add-on for theta, in p2s_unit")
    p2s_unit: Literal["per_gbps_hour", "per_gb"] = Field(
        description="per_gbps_hour: per Gb/s of theta per hour; per_gb: per GB of guaranteed volume theta*t"
    )

    @property
    def p2s_per_gbps_hour(self) -> Decimal:
        """P2^s expressed per Gb/s-hour (a GB price times 450 GB per Gb/s-hour)."""
        return self.p2s if self.p2s_unit == "per_gbps_hour" else self.p2s * GB_PER_GBPS_HOUR


class SoftBWBook(BaseModel):
    """SoftBW usage-based pricing; r is the achieved rate in Gb/s, C the link capacity."""

    model_config = _STRICT
    p0: Price = Field(gt=0, description="unit price per Gb/s-hour (i.e. per 450 GB)")
    p0_unit: Literal["per_gbps_hour"]
    beta: Annotated[Decimal, AfterValidator(_finite)] = Field(
        gt=0, lt=1, description="P1 = beta * P0, beta < 1"
    )
    capacity: str = Field(description="link capacity C, e.g. '10Gbit'")

    @field_validator("capacity")
    @classmethod
    def _cap(cls, v: str) -> str:
        cap = _rate(v)
        if not 0 < cap <= MAX_LINK_BPS:
            raise ValueError(f"capacity must be > 0 and at most {MAX_LINK_BPS} bit/s")
        return v

    @property
    def p1(self) -> Decimal:
        """P1 = beta * P0."""
        return self.beta * self.p0

    @property
    def capacity_bps(self) -> int:
        """C in bit/s."""
        return parse_rate_bps(self.capacity)


class BuyGrid(BaseModel):
    """The grid on which ``price buy`` searches (theta, omega)."""

    model_config = _STRICT
    omega_step: Annotated[Decimal, AfterValidator(_finite)] = Field(
        default=Decimal("0.1"), ge=Decimal("1e-6"), le=MAX_OMEGA
    )
    theta_step: str = Field(default="100Mbit")
    # The largest theta a budget buys: a VM cannot use a guarantee above its host's link (10 Gb/s in the
    # paper's topology, Fig. 4); money beyond it goes to omega.
    max_theta: str = Field(default="10Gbit")

    @field_validator("theta_step", "max_theta")
    @classmethod
    def _ts(cls, v: str) -> str:
        if not 0 < _rate(v) <= MAX_LINK_BPS:
            raise ValueError(f"must be > 0 and at most {MAX_LINK_BPS} bit/s")
        return v

    @property
    def theta_step_bps(self) -> int:
        """theta_step in bit/s."""
        return parse_rate_bps(self.theta_step)

    @property
    def max_theta_bps(self) -> int:
        """max_theta in bit/s."""
        return parse_rate_bps(self.max_theta)


class PriceBook(BaseModel):
    """A whole price book: currency, rounding and one section per model."""

    model_config = _STRICT
    name: str = Field(default="unnamed", min_length=1, max_length=200)
    currency: str = Field(pattern=r"^[A-Z]{3}$", description="ISO 4217 code, e.g. USD")
    rounding: Rounding
    vbp: VBPBook | None = None
    fbp: FBPBook | None = None
    softbw: SoftBWBook | None = None
    # MPTCP BG/WC (used by `paccp compare`): the VBP form on (B_g, A_l), P0 + P1 (A_l - 1) + P2 B_g per hour
    mptcp_bgwc: VBPBook | None = None
    # ElasticSwitch-style rate limiter (used by `paccp compare`): P0 + P2 B per VM-hour (p1 unused: no weight)
    ratelimit: VBPBook | None = None
    buy: BuyGrid = BuyGrid()

    @model_validator(mode="after")
    def _some_model(self) -> PriceBook:
        if self.vbp is None and self.fbp is None and self.softbw is None:
            raise ValueError("a price book needs at least one of [vbp], [fbp], [softbw]")
        return self

    def section(self, model: str) -> VBPBook | FBPBook | SoftBWBook:
        """The section for ``model``; UserError if the book has none."""
        if model not in MODELS:
            raise UserError(f"unknown pricing model {model!r} (expected vbp, fbp or softbw)")
        sec = getattr(self, model)
        if sec is None:
            raise UserError(f"price book {self.name!r} has no [{model}] section")
        return sec


def default_book_path() -> Path:
    """``pricebooks/default.toml`` at the repository root."""
    return Path(__file__).resolve().parents[3] / "pricebooks" / "default.toml"


def parse_book(text: str, where: str = "price book") -> PriceBook:
    """Parse and validate TOML text; UserError naming ``where`` and the bad field."""
    try:
        data = tomllib.loads(text, parse_float=Decimal)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{where}: not valid TOML ({exc})") from None
    try:
        return PriceBook.model_validate(data)
    except ValidationError as exc:
        loc, msg = validation_error(exc, "book")
        raise UserError(f"{where}: {loc}: {msg}") from None
    except UserError as exc:
        raise UserError(f"{where}: {exc.message}") from None


def load_book(path: str | Path | None = None) -> tuple[PriceBook, str]:
    """Load a book (default: ``pricebooks/default.toml``); return it and its exact TOML text."""
    p = Path(path) if path is not None else default_book_path()
    if not p.is_file():
        raise UserError(f"{p}: no such price book" + (" (it is a directory)" if p.is_dir() else ""))
    try:
        text = p.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        line = p.read_bytes()[: exc.start].count(b"\n") + 1
        raise UserError(f"{p} line {line}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise UserError(f"{p}: cannot read ({exc.strerror})") from None
    return parse_book(text, str(p)), text


def book_digest(text: str) -> str:
    """SHA-256 of a book's TOML text (stored with each tenant's snapshot)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
