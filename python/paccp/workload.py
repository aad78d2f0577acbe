"""Flow-size distributions: loading, validation, piecewise-linear mean.

A CDF file has one ``size_bytes cumulative_probability`` pair per line (whitespace separated, ``#``
comments allowed), sorted; the probability scale is 0..1 or 0..100 (percent) and is normalised on load.
Built-in names: ``websearch``, ``datamining``, ``fb_hadoop`` (``data/workloads/``). The engine samples by
piecewise-linear interpolation between points; :attr:`Cdf.mean_bytes` is that sampler's mean, the one used to
turn a load into an arrival rate.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from paccp.errors import UserError

BUILTIN = ("websearch", "datamining", "fb_hadoop")


def data_dir() -> Path:
    """Directory of the shipped workload CDFs (``data/workloads`` in the repository)."""
    return Path(__file__).resolve().parents[2] / "data" / "workloads"


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
    path = data_dir() / f"{text}.cdf" if text in BUILTIN else Path(text)
    if not path.is_file():
        raise UserError(
            f"workload {text!r}: no such built-in workload or file (built-in: {', '.join(BUILTIN)})"
        )
    return parse_cdf(path.read_text(encoding="utf-8"), name=text)


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
        try:
            size, prob = float(parts[0]), float(parts[1])
        except ValueError:
            raise UserError(f"workload {name} line {lineno}: not numbers: {line!r}") from None
        if size < 0 or prob < 0:
            raise UserError(f"workload {name} line {lineno}: negative value in {line!r}")
        raw.append((size, prob))
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
    return Cdf(name=name, points=tuple(points))
