"""Flow-size distributions: loading, validation, piecewise-linear mean.

A CDF file has one ``size_bytes cumulative_probability`` pair per line (whitespace separated, ``#``
comments allowed), sorted; the probability scale is 0..1 or 0..100 (percent) and is normalised on load.
Built-in names: ``websearch``, ``datamining``, ``fb_hadoop`` (``data/workloads/``). The engine samples by
piecewise-linear interpolation between points; :attr:`Cdf.mean_bytes` is that sampler's mean, the one used to
turn a load into an arrival rate.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path

from paccp.errors import UserError
from paccp.limits import MAX_SIZE_BYTES

BUILTIN = ("websearch", "datamining", "fb_hadoop")
MAX_CDF_BYTES = 10 * 10**6  # a CDF file is a few hundred lines; refuse to read anything huge


def data_dir() -> Path:
    """Directory of the shipped workload CDFs (``data/workloads`` in the repository)."""
    return Path(__file__).resolve().parents[3] / "data" / "workloads"


@dataclass(frozen=True)
class Cdf:
    """A validated flow-size CDF with probabilities on the 0..1 scale."""

    name: str
    points: tuple[tuple[int, float], ...]

    @property
    def mean_bytes(self) -> float:
        """Mean of the piecewise-linear sampler: sum (x_{i-1} + x_i) / 2 * (F_i - F_{i-1})."""
        total = 0.0
        for (x0, f0), (x1, f1) in zip(self.points, self.points[1:], strict=False):
            total += (x0 + x1) / 2 * (f1 - f0)
        return total

    def as_engine(self) -> list[list[float]]:
        """The ``size_cdf`` list of the engine contract: ``[[bytes, prob], ...]``."""
        return [[x, f] for x, f in self.points]


def load_cdf(name_or_path: str | Path) -> Cdf:
    """Load a built-in workload by name or a CDF file by path; raise UserError with a one-line reason."""
    text = str(name_or_path)
    shown = repr(text) if len(text) <= 80 else repr(text[:80]) + "..."
    path = data_dir() / f"{text}.cdf" if text in BUILTIN else Path(text)
    try:
        is_file = path.is_file()
        data = path.read_bytes() if is_file else b""
    except (OSError, ValueError) as exc:  # unreadable, or a name no file system accepts (NUL byte)
        raise UserError(f"workload {shown}: cannot read it ({type(exc).__name__})") from None
    if not is_file:
        raise UserError(
            f"workload {shown}: no such built-in workload or file (built-in: {', '.join(BUILTIN)})"
        )
    if len(data) > MAX_CDF_BYTES:
        raise UserError(f"workload {shown}: file larger than {MAX_CDF_BYTES // 10**6} MB")
    try:
        decoded = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise UserError(f"workload {shown} line {line}: not UTF-8 text (byte {exc.start})") from None
    return parse_cdf(decoded, name=text)


def parse_cdf(text: str, name: str = "cdf") -> Cdf:
    """Parse and validate CDF text (see module docstring)."""
    raw: list[tuple[float, float]] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) != 2:
            raise UserError(f"workload {name} line {lineno}: expected 'size_bytes probability', got {line!r}")
        shown = repr(line) if len(line) <= 80 else repr(line[:80]) + "..."
        try:
            size, prob = float(parts[0]), float(parts[1])
        except ValueError:
            raise UserError(f"workload {name} line {lineno}: not numbers: {shown}") from None
        if not (math.isfinite(size) and math.isfinite(prob)):
            raise UserError(f"workload {name} line {lineno}: not a finite number: {shown}")
        if size < 0 or prob < 0:
            raise UserError(f"workload {name} line {lineno}: negative value in {shown}")
        if size > MAX_SIZE_BYTES:
            raise UserError(
                f"workload {name} line {lineno}: size above {MAX_SIZE_BYTES:.0e} bytes in {shown}"
            )
        raw.append((size, prob))
    if len(raw) > 100_000:
        raise UserError(f"workload {name}: more than 100000 points")
    if len(raw) < 2:
        raise UserError(f"workload {name}: needs at least two points, found {len(raw)}")
    top = raw[-1][1]
    if abs(top - 1.0) < 1e-9:
        scale = 1.0
    elif abs(top - 100.0) < 1e-7:
        scale = 100.0
    else:
        raise UserError(f"workload {name}: last probability is {top:g}; the scale must end at 1 or at 100")
    points: list[tuple[int, float]] = []
    for i, (size, prob) in enumerate(raw):
        if i and (size < raw[i - 1][0] or prob < raw[i - 1][1]):
            raise UserError(f"workload {name}: not monotone at point {i + 1} ({size:g}, {prob:g})")
        if size != int(size):
            raise UserError(f"workload {name}: size {size:g} is not a whole number of bytes")
        points.append((int(size), prob / scale))
    cdf = Cdf(name=name, points=tuple(points))
    if not cdf.mean_bytes >= 1:
        raise UserError(
            f"workload {name}: mean flow size is {cdf.mean_bytes:g} bytes; it must be at least 1 byte "
            "(a load is turned into an arrival rate by dividing by it)"
        )
    return cdf


# --------------------------------------------------------------------------------------------------
# Deadline rules (SPEC section 8). Arrival flows carry no deadline in the engine; the experiments give
# each finished or unfinished flow a deadline after the run, from its size, start time and (for the
# "active share" rules) the number of flows active at its source host when it started. Deadlines are
# relative to the flow's start, in ns.

SMALL_MAX_BYTES = 100_000
MEDIUM_MAX_BYTES = 1_000_000


@dataclass(frozen=True)
class SizeClassDeadline:
    """The rcos study's rule: a fixed deadline for small and medium flows, size / ``big_rate_bps`` for big.

    Paper values: small 0.7 ms, medium 2 ms, big size / 3 Gb/s.
    """

    small_ns: int = 700_000
    medium_ns: int = 2_000_000
    big_rate_bps: float = 3e9

    def describe(self) -> str:
        """One line for reports."""
        return (
            f"small {self.small_ns / 1e6:g} ms, medium {self.medium_ns / 1e6:g} ms, "
            f"big size / {self.big_rate_bps / 1e9:g} Gb/s"
        )


@dataclass(frozen=True)
class ActiveShareDeadline:
    """Deadline = max(``floor_ns``, size / g) with g the rate a flow can count on when it starts.

    ``n_a`` is the number of flows of the same class of service active at the flow's source host at its
    start (itself included; a flow is active from start until finish, unfinished flows until the end).

    - ``split=True`` (VBP, fig8-9): the VM's guarantee is shared, g = ``rate_bps`` / n_a
      (paper: 5 Gb/s / n_a, at least 1 ms).
    - ``split=False`` (FBP, fig10-11, our analogous rule): each flow holds its own guarantee, but the host
      link can carry at most ``link_bps`` / n_a per flow, so g = min(``rate_bps``, ``link_bps`` / n_a)
      (2.5 Gb/s per flow on a 10 Gb/s host link, at least 1 ms).
    """

    rate_bps: float
    floor_ns: int = 1_000_000
    split: bool = True
    link_bps: float = 10e9

    def describe(self) -> str:
        """One line for reports."""
        if self.split:
            g = f"{self.rate_bps / 1e9:g} Gb/s / n_a"
        else:
            g = f"min({self.rate_bps / 1e9:g} Gb/s, {self.link_bps / 1e9:g} Gb/s / n_a)"
        return f"max({self.floor_ns / 1e6:g} ms, size / ({g})), n_a = active same-CoS flows at the source"


DeadlineRule = SizeClassDeadline | ActiveShareDeadline


def active_at_start(
    group: Sequence[Hashable], start_ns: Sequence[int], finish_ns: Sequence[int | None]
) -> list[int]:
    """For each flow, the number of flows of its group active at its start (itself included).

    A flow is active on ``[start, finish)``; ``finish`` None means it never finished.
    """
    import numpy as np

    starts = np.asarray(start_ns, dtype=np.int64)
    big = np.iinfo(np.int64).max
    fins = np.asarray([big if f is None else f for f in finish_ns], dtype=np.int64)
    out = np.zeros(len(starts), dtype=np.int64)
    members: dict[Hashable, list[int]] = {}
    for i, g in enumerate(group):
        members.setdefault(g, []).append(i)
    for idx_list in members.values():
        idx = np.asarray(idx_list, dtype=np.int64)
        s_sorted = np.sort(starts[idx])
        f_sorted = np.sort(fins[idx])
        s = starts[idx]
        started = np.searchsorted(s_sorted, s, side="right")
        ended = np.searchsorted(f_sorted, s, side="right")
        out[idx] = started - ended
    return [max(1, int(x)) for x in out.tolist()]


def deadlines_ns(
    rule: DeadlineRule,
    size_bytes: Sequence[int],
    src: Sequence[str],
    cos: Sequence[str],
    start_ns: Sequence[int],
    finish_ns: Sequence[int | None],
) -> list[int]:
    """Relative deadline (ns) of each flow under ``rule`` (see the rule classes)."""
    if isinstance(rule, SizeClassDeadline):
        out = []
        for size in size_bytes:
            if size <= SMALL_MAX_BYTES:
                out.append(rule.small_ns)
            elif size <= MEDIUM_MAX_BYTES:
                out.append(rule.medium_ns)
            else:
                out.append(math.ceil(size * 8e9 / rule.big_rate_bps))
        return out
    n_a = active_at_start(list(zip(src, cos, strict=True)), start_ns, finish_ns)
    res = []
    for size, n in zip(size_bytes, n_a, strict=True):
        g = rule.rate_bps / n if rule.split else min(rule.rate_bps, rule.link_bps / n)
        res.append(max(rule.floor_ns, math.ceil(size * 8e9 / g)))
    return res
