"""Limits of every user-supplied quantity, in one place (docs/explanation/reliability.md lists them).

Every value must fit the engine's integer types (u64 bit/s, ns and bytes; simulated time is kept in
picoseconds internally, so times must stay far below 2^64 / 1000 ns), the places names go (file names,
usage records: docs/usage-records.md, at most 128 characters for a tenant and 256 for ids), and memory:
a run's flows and its sampled series are bounded before the engine allocates anything.
"""

from __future__ import annotations

MAX_RATE_BPS = 10**15  # 1 Pbit/s
MAX_TIME_NS = 100 * 86_400 * 10**9  # 100 days
MAX_SIZE_BYTES = 10**15  # 1 PB: flow sizes, CDF sizes, byte buffers
MAX_BUFFER_PACKETS = 10**9
MAX_OMEGA = 1e6
MAX_TRACE_SCALE = 1000.0  # size_scale / time_scale of the MapReduce trace (1 = the trace as recorded)
MAX_RCVBUF_BETA = 1000.0  # beta of MPTCP's dynamic receive buffer (Eq. 1; the paper uses 2..4)
MAX_COUNT = 1_000_000  # hosts, leaves, spines, nodes
MAX_LINKS = 10_000_000
MAX_NAME = 64  # ids, labels, tenants, node names (file names, usage record ids)
MAX_FLOWS_PER_RUN = 5_000_000  # static + expected arrival flows (about 1-2 KB of memory each)
MAX_SAMPLE_CELLS = 20_000_000  # sampled flows x sample intervals (the engine returns them at once)
MAX_CBR_DATAGRAMS = 200_000_000  # datagrams of a constant-rate (UDP) flow per run (one event each)
MAX_OPTIMUM_CELLS = 50_000_000  # links x flows of an optimum problem (dense matrices)
MAX_SWEEP_POINTS = 100_000  # points of one sweep (grid combinations x seeds x base scenarios)
INT64_MAX = 2**63 - 1

# --- datapath and testbed arguments (one place; checked before any kernel state changes) -------------
MAX_DATAPATH_OMEGA = 4000.0  # omega of the datapath (Q20 in a u32 map field; the BPF side's range)
MAX_RCOS = 1e6  # rcos of the datapath (Q20 in a u64)
MAX_PORT = 65535


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:40] + "..."


def check_rate(value: str | int | float, option: str, *, positive: bool = False) -> int:
    """A rate argument in bit/s (``400Mbit``): finite, >= 0, at most 1 Pbit/s; errors name ``option``."""
    from paccp.errors import UserError
    from paccp.units import parse_rate_bps

    try:
        bps = parse_rate_bps(value)
    except UserError as exc:
        raise UserError(f"{option}: {exc.message}") from None
    if bps > MAX_RATE_BPS:
        raise UserError(f"{option}: rate {_shown(value)} is above the limit of 1 Pbit/s (1000Tbit)")
    if positive and bps <= 0:
        raise UserError(f"{option}: rate must be > 0, got {_shown(value)}")
    return bps


def check_duration(value: str | int | float, option: str, *, positive: bool = True) -> int:
    """A duration argument in ns (``200ms``; a bare number is seconds): finite, at most 100 days."""
    from paccp.errors import UserError
    from paccp.units import parse_duration_ns

    try:
        ns = parse_duration_ns(value)
    except UserError as exc:
        raise UserError(f"{option}: {exc.message}") from None
    if ns > MAX_TIME_NS:
        raise UserError(f"{option}: duration {_shown(value)} is above the limit of 100 days")
    if positive and ns <= 0:
        raise UserError(f"{option}: duration must be > 0, got {_shown(value)}")
    return ns


def check_number(
    value: object, option: str, lo: float, hi: float, *, lo_open: bool = False, what: str = "must be"
) -> float:
    """A finite float in [lo, hi] (or (lo, hi] with ``lo_open``); nan, inf, text: errors naming ``option``."""
    import math

    from paccp.errors import UserError

    try:
        x = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        raise UserError(f"{option} must be a number, got {_shown(value)}") from None
    if not math.isfinite(x):
        raise UserError(f"{option} must be a finite number, got {_shown(value)}")
    if x < lo or (lo_open and x == lo) or x > hi:
        left = "(" if lo_open else "["
        raise UserError(f"{option} {what} in {left}{lo:g}, {hi:g}], got {_shown(value)}")
    return x


def check_int(value: object, option: str, lo: int, hi: int) -> int:
    """An integer argument in [lo, hi], naming ``option``."""
    from paccp.errors import UserError

    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise UserError(f"{option} must be an integer in [{lo}, {hi}], got {_shown(value)}")
    return value
