"""Shared data of the pricing tests: a price book with round numbers and a record factory."""

from __future__ import annotations

from typing import Any

from paccp.common.usage import UsageRecord

#: 2026-11-01T00:00:00Z in ns.
T0 = 1_793_491_200_000_000_000
H = 3_600_000_000_000

BOOK = """
name = "test"
currency = "USD"
[rounding]
quantum = "0.01"
mode = "half_even"
[vbp]
time_unit = "hour"
p0 = "0.10"
p1 = "0.06"
p2 = "0.04"
p2_unit = "per_gbps_hour"
[fbp]
time_unit = "hour"
p0s = "0.02"
p1s = "0.012"
p2s = "0.04"
p2s_unit = "per_gbps_hour"
[softbw]
p0 = "0.05"
p0_unit = "per_gbps_hour"
beta = "0.6"
capacity = "10Gbit"
"""


def rec(**kw: Any) -> UsageRecord:
    """A usage record with defaults (BE, one hour from T0, tenant acme)."""
    base: dict[str, Any] = {
        "record_id": "r1",
        "source": "manual",
        "tenant": "acme",
        "vm": "vm1",
        "flow_id": "f1",
        "cos": "be",
        "theta_bps": 0,
        "omega": "1",
        "start_ns": T0,
        "end_ns": T0 + H,
        "bytes": 1000,
    }
    base.update(kw)
    return UsageRecord.model_validate(base)
