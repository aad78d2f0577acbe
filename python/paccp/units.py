"""Parsing of human-friendly quantities: rates ("10Gbit"), durations ("20us"), sizes ("1.5MB").

All parsers return exact integers in base units (bit/s, nanoseconds, bytes) and raise
:class:`paccp.errors.UserError` naming the offending text when they cannot parse it.
Decimal prefixes are powers of 1000 (k, M, G, T); binary prefixes (Ki, Mi, Gi) are powers of 1024.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from paccp.errors import UserError

_NUM = r"(?P<num>[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*(?P<unit>[A-Za-z/]*)"
_NUM_RE = re.compile(rf"^\s*{_NUM}\s*$")

_PREFIX = {
    "": Decimal(1),
    "k": Decimal(10) ** 3,
    "K": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12,
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
}

# Rate units: value multiplies to bit/s.
_RATE_UNITS: dict[str, Decimal] = {}
for _p, _m in _PREFIX.items():
    for _suffix, _factor in (("bit", 1), ("bps", 1), ("b/s", 1), ("bit/s", 1), ("Bps", 8), ("B/s", 8)):
        _RATE_UNITS[_p + _suffix] = _m * _factor
_RATE_UNITS.update({"kbit": Decimal(1000), "Kbit": Decimal(1000)})

_TIME_UNITS: dict[str, Decimal] = {
    "ns": Decimal(1),
    "us": Decimal(10) ** 3,
    "µs": Decimal(10) ** 3,
    "ms": Decimal(10) ** 6,
    "s": Decimal(10) ** 9,
    "sec": Decimal(10) ** 9,
    "min": Decimal(60) * 10**9,
    "m": Decimal(60) * 10**9,
    "h": Decimal(3600) * 10**9,
    "hour": Decimal(3600) * 10**9,
    "d": Decimal(86400) * 10**9,
}

_SIZE_UNITS: dict[str, Decimal] = {}
for _p, _m in _PREFIX.items():
    _SIZE_UNITS[_p + "B"] = _m
    _SIZE_UNITS[_p + "b"] = _m / 8 if _p else Decimal(1) / 8
_SIZE_UNITS[""] = Decimal(1)
_SIZE_UNITS["bytes"] = Decimal(1)
_SIZE_UNITS["pkt"] = Decimal(1500)  # an MTU-sized packet, the paper's packet size
_SIZE_UNITS["pkts"] = Decimal(1500)


# Far above any limit of a caller (which check their own bounds), low enough to convert to int cheaply.
_TOO_LARGE = Decimal(10) ** 30


def _split(text: str, what: str) -> tuple[Decimal, str]:
    m = _NUM_RE.match(str(text)) if len(str(text)) <= 200 else None
    if not m:
        raise UserError(f"cannot parse {what} {str(text)[:40]!r}")
    try:
        num = Decimal(m.group("num"))
    except InvalidOperation as exc:  # pragma: no cover - the regex already filters
        raise UserError(f"cannot parse {what} {text!r}") from exc
    return num, m.group("unit")


def _convert(text: str | int | float, units: dict[str, Decimal], what: str, default_unit: str) -> Decimal:
    if isinstance(text, bool):
        raise UserError(f"cannot parse {what} {text!r}")
    if isinstance(text, int | float):
        num, unit = (Decimal(text) if isinstance(text, int) else Decimal(str(text))), default_unit
    else:
        num, unit = _split(text, what)
        unit = unit or default_unit
    if unit not in units:
        examples = {
            "rate": "10Gbit, 400Mbps, 1.25GB/s",
            "duration": "20us, 200ms, 1h",
            "size": "1.5MB, 64KiB, 100pkt",
        }
        raise UserError(
            f"unknown {what} unit {unit[:20]!r} in {str(text)[:40]!r} (examples: {examples[what]})"
        )
    shown = repr(text) if len(str(text)) <= 40 else repr(str(text)[:40]) + "..."
    if not num.is_finite():
        raise UserError(f"{what} must be a finite number: {shown}")
    if num < 0:
        raise UserError(f"{what} must not be negative: {shown}")
    if num.adjusted() > 40:  # beyond any limit; also keeps the multiplication below within Decimal's range
        raise UserError(f"{what} {shown} is too large")
    value = num * units[unit]
    if value > _TOO_LARGE:
        raise UserError(f"{what} {shown} is too large")
    return value


def _exact_int(value: Decimal) -> int:
    return int(value.to_integral_value())


def parse_rate_bps(text: str | int | float) -> int:
    """Parse a rate such as ``"10Gbit"``, ``"400Mbps"``, ``"1.25GB/s"`` or a bare number of bit/s."""
    return _exact_int(_convert(text, _RATE_UNITS, "rate", "bit"))


def parse_duration_ns(text: str | int | float) -> int:
    """Parse a duration such as ``"20us"``, ``"200ms"``, ``"1h"``; a bare number is seconds."""
    return _exact_int(_convert(text, _TIME_UNITS, "duration", "s"))


def parse_size_bytes(text: str | int | float) -> int:
    """Parse a size such as ``"1.5MB"``, ``"100KB"``, ``"64KiB"``, ``"100pkt"``; a bare number is bytes."""
    return _exact_int(_convert(text, _SIZE_UNITS, "size", "B"))


def format_rate(bps: float) -> str:
    """Format bit/s with a decimal prefix, e.g. ``3.72 Gb/s``."""
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(bps) >= factor:
            return f"{bps / factor:.3g} {prefix}b/s"
    return f"{bps:.3g} b/s"
