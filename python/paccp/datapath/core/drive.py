"""Can this machine drive a testbed's links? CPU busy time and link utilisation against demand.

Namespace testbeds forward every packet in software: on a small machine the CPU, not the shaped links, can
be the bottleneck, and a run then measures the CPU. Every testbed whose flows are meant to saturate their
links records the CPU's busy fraction over the measured window and the utilisation of each shaped link;
:func:`judge` turns them into a verdict and one line saying so.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

# a link whose bulk TCP flows are meant to fill it counts as driven at this utilisation or more
DRIVEN_UTILISATION = 0.85
# starting rates for "auto", highest first (the testbeds step down through them)
AUTO_RATES_BPS = (1_000_000_000, 500_000_000, 200_000_000, 100_000_000, 50_000_000)
# first guess of what one core forwards through a few router namespaces with GSO off (measured on the
# project's 2-core machine: Fig. 7's three 200 Mbit/s links are driven, three 500 Mbit/s links are not)
PER_CORE_BPS = 100_000_000


def _cpu_times() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs from /proc/stat."""
    with open("/proc/stat") as fh:
        parts = [int(x) for x in fh.readline().split()[1:]]
    idle = parts[3] + (parts[4] if len(parts) > 4 else 0)  # idle + iowait
    return sum(parts) - idle, sum(parts)


class CpuMeter:
    """Busy fraction of all CPUs between :meth:`start` and :meth:`stop` (the whole machine, not one run)."""

    def __init__(self) -> None:
        self._t0: tuple[int, int] | None = None
        self.busy: float | None = None

    def start(self) -> None:
        self._t0 = _cpu_times()

    def mark(self) -> None:
        """Start at the first call, stop (update :attr:`busy`) at every later one."""
        if self._t0 is None:
            self.start()
        else:
            self.stop()

    def stop(self) -> float | None:
        if self._t0 is None:
            return None
        b1, t1 = _cpu_times()
        b0, t0 = self._t0
        self.busy = (b1 - b0) / (t1 - t0) if t1 > t0 else None
        return self.busy


@dataclass(frozen=True)
class Verdict:
    """Whether the links were driven; ``line`` is the one-line explanation when they were not."""

    driven: bool
    min_utilisation: float
    cpu_busy: float | None
    line: str


def judge(utilisation: dict[str, float], cpu_busy: float | None, what: str) -> Verdict:
    """Links below :data:`DRIVEN_UTILISATION` while their flows demand more: the machine did not drive them.

    ``what`` names the links (e.g. "3 x 1 Gbit/s leaf uplinks").
    """
    low = min(utilisation.values()) if utilisation else 0.0
    if low >= DRIVEN_UTILISATION:
        return Verdict(True, low, cpu_busy, "")
    cpu = f"the CPU {cpu_busy:.0%} busy" if cpu_busy is not None else "CPU busy unknown"
    cause = "CPU-bound" if cpu_busy is not None and cpu_busy > 0.85 else "not CPU-bound: check the setup"
    return Verdict(
        False,
        low,
        cpu_busy,
        f"this machine did not drive {what}: utilisation {low:.2f} (< {DRIVEN_UTILISATION}) while bulk "
        f"flows demand more, with {cpu} ({cause}); the result measures the machine, not the scheme",
    )


def first_auto_rate() -> int:
    """The highest of :data:`AUTO_RATES_BPS` at or below :data:`PER_CORE_BPS` x cores (a first guess)."""
    budget = PER_CORE_BPS * (os.cpu_count() or 1)
    return next((r for r in AUTO_RATES_BPS if r <= budget), AUTO_RATES_BPS[-1])


def lower_rate(rate_bps: int) -> int | None:
    """The next rate of :data:`AUTO_RATES_BPS` below ``rate_bps`` (None below the last)."""
    return next((r for r in AUTO_RATES_BPS if r < rate_bps), None)
