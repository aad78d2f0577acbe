"""`paccp bench` (paccp.sim.bench): benchmark registry, the figures of one run, the working-set plot."""

from __future__ import annotations

from pathlib import Path

import pytest

from paccp.errors import UserError
from paccp.sim import bench as simbench


def test_every_group_member_is_a_benchmark() -> None:
    for group, keys in simbench.GROUPS.items():
        missing = [k for k in keys if k not in simbench.BENCHMARKS]
        assert not missing, f"group {group} names unknown benchmarks {missing}"


def test_unknown_benchmark_is_a_user_error_naming_the_groups() -> None:
    with pytest.raises(UserError, match=r"unknown benchmark 'nope'.*workingset"):
        simbench.run_cli(only="nope")


def test_scale_builder_sets_the_load() -> None:
    doc = simbench._scale(2, 4, 1, "2ms", 0.05)()
    assert doc["arrivals"][0]["load"] == 0.05
    assert doc["topology"]["hosts_per_leaf"] == 4


def test_one_run_reports_hosts_and_packets_in_flight(monkeypatch: pytest.MonkeyPatch) -> None:
    tiny = {"tiny": ("tiny_8hosts", simbench._scale(2, 4, 1, "2ms", 0.3))}
    monkeypatch.setattr(simbench, "BENCHMARKS", tiny)
    r = simbench.run_one("tiny")
    assert r["hosts"] == 8 and r["load"] == 0.3
    assert r["events"] > 0
    # Packets were in flight at some instant, and never more than were sent.
    assert 0 < r["peak_packets_in_flight"] <= r["packets_sent"]
    assert r["events_per_loop_cpu_s"] > 0


def test_plot_cost_writes_a_png_and_needs_points(tmp_path: Path) -> None:
    results = {
        "a": {"hosts": 240, "peak_packets_in_flight": 10_000, simbench.SCALE_METRIC: 15e6, "load": 0.3},
        "b": {"hosts": 240, "peak_packets_in_flight": 5_000, simbench.SCALE_METRIC: 19e6},
        "c": {"hosts": 10_000, "peak_packets_in_flight": 300_000, simbench.SCALE_METRIC: 9e6},
    }
    out = tmp_path / "ws.png"
    simbench.plot_cost(results, out, load_average=[1.0, 1.0, 1.0])
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5_000
    with pytest.raises(UserError, match="no leaf-spine benchmark"):
        simbench.plot_cost({"x": {"hosts": None, simbench.SCALE_METRIC: 1.0}}, tmp_path / "none.png")


def test_rounds_report_medians_and_each_rounds_metric() -> None:
    runs = [
        {"name": "x", "events": 10, simbench.SCALE_METRIC: 3.0, "hosts": 240, "load": 0.3},
        {"name": "x", "events": 10, simbench.SCALE_METRIC: 9.0, "hosts": 240, "load": 0.3},
        {"name": "x", "events": 10, simbench.SCALE_METRIC: 4.0, "hosts": 240, "load": 0.3},
    ]
    m = simbench.median_figures(runs)
    assert m[simbench.SCALE_METRIC] == 4.0 and m["events"] == 10 and m["name"] == "x"
    assert m["rounds"] == 3 and m[f"{simbench.SCALE_METRIC}_rounds"] == [3.0, 9.0, 4.0]
    # One round: the run's own figures, nothing added.
    assert simbench.median_figures(runs[:1]) == runs[0]
    with pytest.raises(UserError, match="--rounds"):
        simbench.run_cli(only="scale240", rounds=0)


def test_memory_curve_has_one_positive_latency_per_size_in_order() -> None:
    curve = simbench.memory_curve(kib=(64, 512), loads=20_000)
    assert list(curve) == ["64", "512"]
    assert all(v > 0 for v in curve.values()), curve


def test_a_failing_benchmark_subprocess_is_a_one_line_user_error() -> None:
    with pytest.raises(UserError, match=r"^benchmark nope failed: KeyError: 'nope'$"):
        simbench._in_subprocess("nope", "benchmark nope")


def test_memory_curve_defaults_to_the_engines_sizes_from_l2_to_past_the_l3() -> None:
    from paccp.sim.engine import memory_sizes_kib

    sizes = memory_sizes_kib()
    assert list(sizes) == sorted(sizes) and sizes[0] <= 1024 and sizes[-1] >= 64 * 1024
