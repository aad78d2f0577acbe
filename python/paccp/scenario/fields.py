"""Field types of a scenario: human units (rates, durations, sizes, buffers) and names, with the limits of
:mod:`paccp.limits` applied, and the strict base model of every section.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

from paccp.common.cos import Cos
from paccp.errors import UserError
from paccp.limits import MAX_BUFFER_PACKETS, MAX_NAME, MAX_OMEGA, MAX_RATE_BPS, MAX_SIZE_BYTES, MAX_TIME_NS
from paccp.units import parse_duration_ns, parse_rate_bps, parse_size_bytes


def _wrap(fn: Any) -> Any:
    def conv(v: Any) -> Any:
        if v is None:
            return None
        try:
            return fn(v)
        except UserError as exc:
            raise ValueError(exc.message) from None

    return conv


# --------------------------------------------------------------------------------------------------
# Limits live in paccp.limits (one place); the types below apply them.


def _check_name(v: str) -> str:
    if any(ord(c) < 32 or ord(c) == 127 for c in v):
        raise ValueError(f"{v[:MAX_NAME]!r}: control characters are not allowed in names")
    return v


Name = Annotated[str, Field(min_length=1, max_length=MAX_NAME), AfterValidator(_check_name)]
Rate = Annotated[int, BeforeValidator(_wrap(parse_rate_bps)), Field(le=MAX_RATE_BPS)]
Duration = Annotated[int, BeforeValidator(_wrap(parse_duration_ns)), Field(le=MAX_TIME_NS)]
Size = Annotated[int, BeforeValidator(_wrap(parse_size_bytes)), Field(le=MAX_SIZE_BYTES)]
Omega = Annotated[float, Field(gt=0, le=MAX_OMEGA)]


def _parse_buffer(v: Any) -> dict[str, int]:
    if isinstance(v, dict):
        if set(v) not in ({"packets"}, {"bytes"}):
            raise ValueError("a buffer table needs exactly one key: packets or bytes")
        (key, n), limit = next(iter(v.items())), MAX_BUFFER_PACKETS if "packets" in v else MAX_SIZE_BYTES
        if isinstance(n, bool) or not isinstance(n, int) or not 0 < n <= limit:
            raise ValueError(f"buffer {key} must be an integer 1..{limit}, got {str(n)[:40]!r}")
        return {key: n}
    if isinstance(v, bool):
        raise ValueError(f"cannot parse buffer {v!r}")
    if isinstance(v, int):
        if not 0 < v <= MAX_BUFFER_PACKETS:
            raise ValueError(f"buffer must be 1..{MAX_BUFFER_PACKETS} packets, got {v}")
        return {"packets": v}
    text = str(v).strip()
    for suffix in ("pkts", "pkt"):
        if text.endswith(suffix):
            num = text[: -len(suffix)].strip()
            if not num.isdigit() or not 0 < int(num) <= MAX_BUFFER_PACKETS:
                raise ValueError(f"buffer {text[:40]!r}: packets must be an integer 1..{MAX_BUFFER_PACKETS}")
            return {"packets": int(num)}
    try:
        b = parse_size_bytes(text)
    except UserError as exc:
        raise ValueError(exc.message) from None
    if not 0 < b <= MAX_SIZE_BYTES:
        raise ValueError(f"buffer must be 1 byte .. 1 PB, got {text[:40]!r}")
    return {"bytes": b}


Buffer = Annotated[dict[str, int], BeforeValidator(_parse_buffer)]
CosName = Cos


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
