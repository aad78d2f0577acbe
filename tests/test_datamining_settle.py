"""Issue 32: the workload grid options (--seeds, --loads, --drain) and the settled FCT ratios (pooled over
seeds, unfinished flows at their elapsed time, seed-bootstrap intervals) that judge Figs. 9 and 11."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from cli_run import cli, one_line_error

from paccp.experiments import ExperimentOptions
from paccp.experiments.workload import SPECS, build_points, run_spec
from paccp.experiments.workload_checks import below_one, checks_settled, judged_interval
from paccp.sim.metrics import fct_totals, pooled_ratio_ci

MS = 1_000_000


def row(cos: str, size: int, start: int, finish: int | None) -> dict[str, Any]:
    return {"cos": cos, "size_bytes": size, "start_ns": start, "finish_ns": finish}


def test_totals_count_unfinished_flows_at_their_elapsed_time_and_skip_the_warmup() -> None:
    rows = [
        row("be", 1_000, 1 * MS, None),  # in the warm-up: excluded
        row("be", 50_000, 10 * MS, 12 * MS),  # small, 2 ms
        row("be", 5_000_000, 10 * MS, None),  # big, unfinished: 90 ms elapsed at the end (100 ms)
        row("ds", 500_000, 20 * MS, 21 * MS),  # medium, 1 ms
        {"cos": "be", "size_bytes": None, "start_ns": 10 * MS, "finish_ns": None},  # long-lived: ignored
    ]
    t = fct_totals(rows, warmup_ns=5 * MS, end_ns=100 * MS)
    be = t["be"]["overall"]
    assert be == {
        "flows": 2,
        "unfinished": 1,
        "sum_fct_ns": 2 * MS,
        "sum_elapsed_ns": 90 * MS,
        "sum_bytes": 5_050_000,
    }
    assert t["be"]["big"]["unfinished"] == 1 and t["be"]["small"]["sum_fct_ns"] == 2 * MS
    assert t["ds"]["medium"]["flows"] == 1 and "small" not in t["ds"]
    assert t["all"]["overall"]["flows"] == 3


def test_pooled_ratio_pools_totals_and_its_interval_covers_it() -> None:
    # seed totals (sum, count): the pooled means are 30/3 = 10 and 40/8 = 5, ratio 2 (not the mean of ratios)
    num = [(10.0, 1.0), (20.0, 2.0)]
    den = [(30.0, 6.0), (10.0, 2.0)]
    r = pooled_ratio_ci(num, den)
    assert r["ratio"] == pytest.approx(2.0)
    assert r["lo"] is not None and r["hi"] is not None and r["lo"] <= 2.0 <= r["hi"]
    assert r == pooled_ratio_ci(num, den)  # a fixed resampling stream: rerun-identical
    same = pooled_ratio_ci([(2.0, 1.0)] * 5, [(4.0, 1.0)] * 5)
    assert same["lo"] == same["hi"] == pytest.approx(0.5) and same["half"] == 0.0
    one = pooled_ratio_ci([(2.0, 1.0)], [(4.0, 1.0)])
    assert one["ratio"] == pytest.approx(0.5) and one["lo"] is None and one["half"] is None
    assert pooled_ratio_ci([(1.0, 1.0)], [(0.0, 0.0)])["ratio"] is None  # no BE flows: no ratio


def test_interval_wider_with_noisier_seeds() -> None:
    calm = pooled_ratio_ci([(9.0 + i % 2, 1.0) for i in range(8)], [(10.0, 1.0)] * 8)
    noisy = pooled_ratio_ci([(5.0 + 10 * (i % 2), 1.0) for i in range(8)], [(10.0, 1.0)] * 8)
    assert calm["half"] is not None and noisy["half"] is not None and noisy["half"] > 3 * calm["half"]


def test_verdict_needs_the_whole_interval_on_one_side() -> None:
    assert below_one({"lo": 0.7, "hi": 0.95, "seeds": 3}) is True
    assert below_one({"lo": 1.02, "hi": 1.3, "seeds": 3}) is False
    assert below_one({"lo": 0.8, "hi": 1.1, "seeds": 3}) is None
    assert below_one({"lo": None, "hi": None, "seeds": 3}) is None
    assert below_one({"lo": 0.7, "hi": 0.95, "seeds": 2}) is None  # two seeds: no verdict


def _settled(lo: float, hi: float) -> dict[str, Any]:
    ci = {"ratio": (lo + hi) / 2, "lo": lo, "hi": hi, "half": (hi - lo) / 2, "seeds": 8}
    return {"sized": ci, "plain": ci, "finished_only": ci, "unfinished": 0, "unfinished_be": 0}


def test_settled_checks_decide_by_intervals() -> None:
    below, straddle, above = _settled(0.6, 0.9), _settled(0.9, 1.1), _settled(1.1, 1.4)
    low = {c: {"overall": below, "small": below, "medium": straddle} for c in ("ds", "mrg")}
    high = {
        "ds": {"overall": straddle, "small": below, "medium": below},
        "mrg": {"overall": above, "small": below, "medium": below},
    }
    rows = [{"load": 0.3, "settled": low}, {"load": 0.8, "settled": high}]
    checks = checks_settled(SPECS["fig9"], rows)
    holds = {c["statement"].split(",")[0]: c["holds"] for c in checks}
    assert holds["DS mean FCT / BE's below 1 at 30%"] is True
    assert holds["DS mean FCT / BE's below 1 at 80%"] is None  # undecided
    assert holds["MRG mean FCT / BE's below 1 at 80%"] is False
    small = next(c for c in checks if c["statement"].startswith("small"))
    medium = next(c for c in checks if c["statement"].startswith("medium"))
    assert small["holds"] is True and medium["holds"] is None and "at 30%" in medium["ours"]


def test_grid_options_set_seeds_loads_and_drain_and_defaults_stay() -> None:
    spec = SPECS["fig9"]
    default = build_points(spec, ExperimentOptions(out_dir=Path("x")), Path("x"))
    assert sorted({p.params["seed"] for p in default}) == [1, 2, 3] and len(default) == 8 * 3
    assert {p.scenario["run"]["duration"] for p in default} == {"900ms"}  # 800 ms arrivals + 100 ms drain
    opts = ExperimentOptions(out_dir=Path("x"), seed=5, seeds=4, loads=(0.8, 0.3), drain_ns=3_000 * MS)
    pts = build_points(spec, opts, Path("x"))
    assert sorted({p.params["seed"] for p in pts}) == [5, 6, 7, 8]
    assert sorted({p.params["load"] for p in pts}) == [0.3, 0.8] and len(pts) == 8
    assert {p.scenario["run"]["duration"] for p in pts} == {"3800ms"}
    assert {p.scenario["arrivals"][0]["stop"] for p in pts} == {"800ms"}


def test_a_small_full_fabric_run_writes_settled_ratios(tmp_path: Path) -> None:
    opts = ExperimentOptions(
        out_dir=tmp_path, seed=1, duration_ns=12 * MS, seeds=2, loads=(0.3,), drain_ns=30 * MS
    )
    s = run_spec(SPECS["fig11"], opts, show=False)
    st = s["loads"][0]["settled"]["ds"]["overall"]
    assert st["sized"]["seeds"] == 2 and st["flows"] > 0 and st["flows_be"] > 0
    assert st["plain"]["ratio"] is not None and st["plain"]["lo"] <= st["plain"]["ratio"] <= st["plain"]["hi"]
    # --from-cache: the finished points of a longer run (seeds 1-2 of 1-4), nothing run
    cached = run_spec(SPECS["fig11"], replace(opts, seeds=4, from_cache=True), show=False)
    assert (
        cached["points"] == 2 and cached["points_from_cache"] == 2 and cached["loads"][0]["seeds"] == [1, 2]
    )
    on_disk = json.loads((tmp_path / "fig11" / "summary.json").read_text())
    assert on_disk["setup"]["drain_ms"] == 30 and any(
        "seed-bootstrap" in c["statement"] for c in on_disk["checks"]
    )


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["fig4a", "--seeds", "4"], "--seeds: experiment 'fig4a'"),
        (["fig9", "--seeds", "0"], "--seeds must be 1..1000"),
        (["fig9", "--loads", "0.3,abc"], "--loads expects comma-separated numbers"),
        (["fig9", "--loads", "0.3,1.5"], "a load is a fraction in (0, 1]"),
        (["fig9", "--loads", "0.3,0.3"], "given twice"),
        (["fig9", "--drain", "-1s"], "--drain"),
    ],
)
def test_bad_grid_options_are_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], needle: str
) -> None:
    code, _, err = cli(["reproduce", *args, "--out", str(tmp_path / "o")], capsys)
    assert needle in one_line_error(code, err)


def test_few_seeds_are_judged_with_the_wider_student_t_interval_too() -> None:
    r = pooled_ratio_ci([(7.0, 1.0), (9.0, 1.0), (8.0, 1.0)], [(10.0, 1.0)] * 3)
    assert r["t_lo"] is not None and r["t_hi"] is not None and r["half"] is not None
    assert r["t_lo"] < r["lo"] and r["t_hi"] > r["hi"]  # 3 seeds: t(2 df) is wider than the bootstrap
    assert judged_interval(r) == (r["t_lo"], r["t_hi"])
    assert r["hi"] < 1.0 and below_one(r) is None  # the bootstrap alone would have said "below 1"
    assert judged_interval({"lo": 0.5, "hi": 0.7, "t_lo": 0.6, "t_hi": 0.8, "seeds": 3}) == (0.5, 0.8)


def test_results_table_is_generated_from_the_summaries(tmp_path: Path) -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "dm_table", Path(__file__).parents[1] / "tools/datamining_table.py"
    )
    assert spec is not None and spec.loader is not None
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    ci = {
        "ratio": 0.8,
        "lo": 0.7,
        "hi": 0.9,
        "half": 0.1,
        "t_lo": 0.6,
        "t_hi": 0.95,
        "t_half": 0.17,
        "seeds": 4,
    }
    group = {"sized": ci, "plain": ci, "finished_only": ci, "flows": 10, "flows_be": 20, "unfinished": 0}
    group["unfinished_be"] = 1
    settled = {cos: dict.fromkeys(("overall", "small", "medium", "big"), group) for cos in ("ds", "mrg")}
    (tmp_path / "fig9").mkdir()
    (tmp_path / "fig9" / "summary.json").write_text(
        json.dumps({"loads": [{"load": 0.8, "settled": settled}]})
    )
    text = tool.table(tmp_path)
    # the judging interval is the union [0.60, 0.95]; per-seed sd = 0.17 * 2 / t(3) = 0.107, and
    # t(6) * 0.107 / sqrt(7) = 0.099: 7 seeds for +/- 0.1
    assert "| fig9 | 80% | DS | 4 | 0.80 [0.60, 0.95] | 0.17 | below 1 | 7 |" in text
    no_t = {**ci, "t_lo": None, "t_hi": None, "t_half": None, "lo": 0.5, "hi": 1.0}
    assert tool.seeds_needed(no_t, target=0.125) == 16  # without a t interval: 4 * (0.25 / 0.125)^2
    assert text.count("| fig9 |") == 2 and "| 10 / 20 | 0 / 1 |" in text
    narrow = {**ci, "lo": 0.75, "hi": 0.85, "t_lo": None, "t_hi": None}
    assert tool.seeds_needed(narrow) == 4  # already within 0.1: the seeds it has
