"""The testbeds' "can this machine drive its links" verdict (no root needed)."""

from __future__ import annotations

import time

from paccp.datapath.core import drive


def test_judge_flags_undriven_links_with_cpu_cause() -> None:
    v = drive.judge({"a": 0.45, "b": 0.97}, 0.99, "3 x 1000 Mbit/s leaf uplinks")
    assert not v.driven and v.min_utilisation == 0.45
    assert "3 x 1000 Mbit/s" in v.line and "CPU-bound" in v.line and "\n" not in v.line
    idle = drive.judge({"a": 0.5}, 0.3, "x")
    assert not idle.driven and "not CPU-bound" in idle.line
    ok = drive.judge({"a": 0.9, "b": 0.86}, 0.99, "x")
    assert ok.driven and ok.line == ""


def test_auto_rates_step_down_and_stop() -> None:
    assert drive.lower_rate(1_000_000_000) == 500_000_000
    assert drive.lower_rate(200_000_000) == 100_000_000
    assert drive.lower_rate(drive.AUTO_RATES_BPS[-1]) is None
    assert drive.first_auto_rate() in drive.AUTO_RATES_BPS


def test_cpu_meter_measures_a_fraction() -> None:
    m = drive.CpuMeter()
    m.mark()
    # /proc/stat counts in clock ticks (10 ms): work for 50 ms so that some ticks pass whatever the speed
    # (a fixed amount of work finished within one tick on a fast moment, and busy is None then by design)
    end = time.monotonic() + 0.05
    while time.monotonic() < end:
        sum(i * i for i in range(10_000))
    m.mark()
    assert m.busy is not None and 0.0 <= m.busy <= 1.0
