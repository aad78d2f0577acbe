"""Metrics over flow tables and the deadline rules (SPEC section 8)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from paccp.sim.metrics import combine_seeds, fct_norm_to_be, flow_stats, mean_ci, meet_rates, with_deadlines
from paccp.traffic.workload import ActiveShareDeadline, SizeClassDeadline, active_at_start, deadlines_ns

MS = 1_000_000


def row(cos: str, size: int, start: int, finish: int | None, src: str = "h0") -> dict[str, Any]:
    return {"cos": cos, "src": src, "size_bytes": size, "start_ns": start, "finish_ns": finish}


def test_size_class_rule_matches_paper_values() -> None:
    rule = SizeClassDeadline()
    d = deadlines_ns(rule, [100_000, 100_001, 3_000_000], ["h0"] * 3, ["mrg"] * 3, [0, 0, 0], [1, 1, 1])
    # 3 MB at 3 Gb/s = 8 ms
    assert d == [700_000, 2_000_000, 8 * MS]


def test_active_at_start_counts_overlaps_per_group() -> None:
    # flows of h0: [0,10), [5,20), [10, never); flow of h1 at 6
    n = active_at_start(["h0", "h0", "h0", "h1"], [0, 5, 10, 6], [10, 20, None, 7])
    assert n == [1, 2, 2, 1]  # at t=10 the first flow has just ended


def test_vbp_rule_splits_the_guarantee_and_has_a_floor() -> None:
    rule = ActiveShareDeadline(rate_bps=5e9)
    # two overlapping 2.5 MB MRG flows at h0: each gets 2.5 Gb/s -> 8 ms; a small one alone -> 1 ms floor
    d = deadlines_ns(
        rule, [2_500_000, 2_500_000, 1000], ["h0", "h0", "h1"], ["mrg"] * 3, [0, 1, 0], [30 * MS, 30 * MS, 5]
    )
    assert d == [4 * MS, 8 * MS, MS]


def test_fbp_rule_caps_by_host_link_share() -> None:
    rule = ActiveShareDeadline(rate_bps=2.5e9, split=False, link_bps=10e9)
    # 5 active MRG flows: min(2.5, 10/5 = 2) Gb/s; 1 MB -> 4 ms
    d = deadlines_ns(rule, [1_000_000] * 5, ["h0"] * 5, ["mrg"] * 5, [0, 1, 2, 3, 4], [None] * 5)
    assert d[-1] == 4 * MS
    assert d[0] == math.ceil(1_000_000 * 8e9 / 2.5e9)


def test_unfinished_flow_past_deadline_is_missed_and_future_is_undetermined() -> None:
    rows = [
        row("be", 1000, 0, 2 * MS),  # fct 2 ms > 0.7 ms: missed
        row("be", 1000, 0, 100_000),  # met
        row("be", 1000, 0, None),  # unfinished, deadline 0.7 ms < end: missed
        row("be", 1000, 99 * MS + 900_000, None),  # deadline after end: undetermined
    ]
    out = with_deadlines(rows, SizeClassDeadline(), end_ns=100 * MS)
    assert [r["deadline_met"] for r in out] == [False, True, False, None]
    st = flow_stats(out)
    be = st["by_cos"]["be"]["overall"]
    assert be["unfinished"] == 2
    assert be["deadline_undetermined"] == 1
    assert be["deadline_meet_rate"] == pytest.approx(1 / 3)


def test_flow_stats_per_class_warmup_and_normalisation() -> None:
    rows = [
        row("be", 1000, 5 * MS, 7 * MS),  # small BE, fct 2 ms
        row("be", 1000, 5 * MS, 9 * MS),  # small BE, fct 4 ms
        row("ds", 1000, 5 * MS, 6 * MS),  # small DS, fct 1 ms
        row("be", 500_000, 5 * MS, 15 * MS),  # medium BE 10 ms
        row("ds", 500_000, 5 * MS, 10 * MS),  # medium DS 5 ms
        row("ds", 500_000, 0, 1 * MS),  # in warm-up: excluded
        {"cos": "be", "src": "h0", "size_bytes": None, "start_ns": 5 * MS, "finish_ns": None},  # long-lived
    ]
    st = flow_stats(rows, warmup_ns=MS)
    assert st["excluded_warmup"] == 1
    assert st["by_cos"]["be"]["small"]["mean_fct_ns"] == pytest.approx(3 * MS)
    assert st["by_cos"]["all"]["overall"]["flows"] == 5
    norm = fct_norm_to_be(st)
    assert norm["ds"]["small"] == pytest.approx(1 / 3)
    assert norm["ds"]["medium"] == pytest.approx(0.5)
    assert norm["be"]["overall"] == pytest.approx(1.0)
    assert norm["ds"]["big"] is None  # no big flows
    assert meet_rates(st)["be"]["overall"] is None  # no deadlines assigned


def test_mean_ci_uses_student_t() -> None:
    r = mean_ci([1.0, 2.0, 3.0])
    # sd 1, sem 1/sqrt(3), t(0.975, 2) = 4.3027
    assert r["mean"] == pytest.approx(2.0)
    assert r["ci95"] == pytest.approx(4.302653 / math.sqrt(3), rel=1e-5)
    assert mean_ci([5.0])["ci95"] is None
    assert mean_ci([None])["n"] == 0


def test_combine_seeds_aligns_keys() -> None:
    out = combine_seeds([{"ds": {"overall": 0.5}}, {"ds": {"overall": 0.7}}])
    assert out["ds"]["overall"]["mean"] == pytest.approx(0.6)
    assert out["ds"]["overall"]["n"] == 2
