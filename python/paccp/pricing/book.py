"""Price books: TOML files with explicit currency, units and rounding, validated on load.

A book may describe any of the three models (``[vbp]``, ``[fbp]``, ``[softbw]``); a model that is used must
be present. TOML numbers are parsed straight into :class:`decimal.Decimal` (never binary floats), and
money fields may also be written as strings (``p0 = "0.10"``). See ``docs/pricing.md``.
"""

from __future__ import annotations

import decimal
import hashlib
from decimal import Decimal
from pathlib import Path
from typing import Literal

import tomllib
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from paccp.errors import UserError
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


class Rounding(BaseModel):
    """How money amounts are quantised: to ``quantum`` (e.g. 0.01) with ``mode``."""

    model_config = _STRICT
    quantum: Decimal = Field(gt=0, description="smallest unit of an amount, e.g. 0.01")
    mode: Literal["half_even", "half_up", "half_down", "up", "down", "ceiling", "floor"]
    unit_price_places: int = Field(default=6, ge=0, le=18, description="decimals shown for unit prices")

    def money(self, amount: Decimal) -> Decimal:
        """Quantise an exact amount to the book's currency quantum with the book's rounding mode."""
        return amount.quantize(self.quantum, rounding=ROUNDING_MODES[self.mode])

    def allocate(self, exact: list[Decimal]) -> tuple[list[Decimal], Decimal]:
        """Round the exact total once, then split it over the parts so that they add up to it.

        The total is ``money(sum(exact))``. Each part gets its exact amount rounded down to the quantum; the
        quanta still missing go, one each, to the parts with the largest remainders (ties: the earlier part).
        Many sub-cent lines are thus not each rounded to zero (or each up); the parts sum to the total.
        """
        total = self.money(sum(exact, Decimal(0)))
        floors = [e.quantize(self.quantum, rounding=decimal.ROUND_FLOOR) for e in exact]
        missing = int((total - sum(floors, Decimal(0))) / self.quantum)
        order = sorted(range(len(exact)), key=lambda i: (-(exact[i] - floors[i]), i))
        for i in order[: max(missing, 0)]:
            floors[i] += self.quantum
        return floors, total


class VBPBook(BaseModel):
    """VM-based pricing, prices per VM-hour: P_BE = P0, P_DS = P0 + P1(omega-1), P_MRG = ... + P2 theta."""

    model_config = _STRICT
    time_unit: Literal["hour"]
    p0: Decimal = Field(ge=0, description="base price per VM-hour (the BE price)")
    p1: Decimal = Field(ge=0, description="price per unit of (omega - 1) per hour")
    p2: Decimal = Field(ge=0, description="price per Gb/s of theta per hour")
    p2_unit: Literal["per_gbps_hour"]


class FBPBook(BaseModel):
    """Flow-based add-on: P^s = P0^s + P1^s (omega-1) + P2^s theta for DS/MRG flows; BE add-on is 0."""

    model_config = _STRICT
    time_unit: Literal["hour"]
    p0s: Decimal = Field(ge=0, description="add-on per upgraded flow-hour")
    p1s: Decimal = Field(ge=0, description="add-on per unit of (omega - 1) per flow-hour")
    p2s: Decimal = Field(ge=0, description="add-on for theta, in p2s_unit")
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
    p0: Decimal = Field(gt=0, description="unit price per Gb/s-hour (i.e. per 450 GB)")
    p0_unit: Literal["per_gbps_hour"]
    beta: Decimal = Field(gt=0, lt=1, description="P1 = beta * P0, beta < 1")
    capacity: str = Field(description="link capacity C, e.g. '10Gbit'")

    @field_validator("capacity")
    @classmethod
    def _cap(cls, v: str) -> str:
        if parse_rate_bps(v) <= 0:
            raise ValueError("capacity must be > 0")
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
    omega_step: Decimal = Field(default=Decimal("0.1"), gt=0)
    theta_step: str = Field(default="100Mbit")

    @field_validator("theta_step")
    @classmethod
    def _ts(cls, v: str) -> str:
        if parse_rate_bps(v) <= 0:
            raise ValueError("theta_step must be > 0")
        return v

    @property
    def theta_step_bps(self) -> int:
        """theta_step in bit/s."""
        return parse_rate_bps(self.theta_step)


class PriceBook(BaseModel):
    """A whole price book: currency, rounding and one section per model."""

    model_config = _STRICT
    name: str = Field(default="unnamed", min_length=1)
    currency: str = Field(pattern=r"^[A-Z]{3}$", description="ISO 4217 code, e.g. USD")
    rounding: Rounding
    vbp: VBPBook | None = None
    fbp: FBPBook | None = None
    softbw: SoftBWBook | None = None
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
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err.get("loc", ())) or "book"
        msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        raise UserError(f"{where}: {loc}: {msg}") from None
    except UserError as exc:
        raise UserError(f"{where}: {exc.message}") from None


def load_book(path: str | Path | None = None) -> tuple[PriceBook, str]:
    """Load a book (default: ``pricebooks/default.toml``); return it and its exact TOML text."""
    p = Path(path) if path is not None else default_book_path()
    if not p.is_file():
        raise UserError(f"{p}: no such price book")
    text = p.read_text(encoding="utf-8")
    return parse_book(text, str(p)), text


def book_digest(text: str) -> str:
    """SHA-256 of a book's TOML text (stored with each tenant's snapshot)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
