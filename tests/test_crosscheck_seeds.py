"""The finite cross-check over seeds (``paccp.crosscheck.seeds``), without ns-3: stub results."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import pytest

from paccp.cli import main
from paccp.crosscheck import scenarios, seeds
from paccp.errors import UserError


def _flow(fid: str, size: int, fct_ms: float | None, timeouts: int = 0, retx: int = 0) -> dict[str, Any]:
    fct = None if fct_ms is None else round(fct_ms * 1e6)
    return {"id": fid, "size_bytes": size, "fct_ns": fct, "retransmits": retx, "timeouts": timeouts}


def _res(fcts: dict[int, list[float | None]], drops: int, timeouts: int = 0, retx: int = 0) -> dict[str, Any]:
    """A side's result: flows of each size with these FCTs (ms); the timeouts and retransmissions on the
    first flow; ``drops`` on one channel."""
    flows = [_flow(f"f{sz}-{i}", sz, t) for sz, ts in fcts.items() for i, t in enumerate(ts)]
    flows[0] |= {"timeouts": timeouts, "retransmits": retx}
    return {"flows": flows, "channels": {"left->right": {"drops": drops, "tx_bytes": 0}}}


SC = scenarios.finite(False)
K10, M10 = 10_000, 10_000_000


def _runs() -> dict[int, tuple[dict[str, Any], dict[str, Any]]]:
    # seed 1: ns-3's 10 MB median raised by timeouts (ratio 0.5); seed 2: equal. Median of the per-seed
    # medians (engine 2.5, ns-3 4) differs from the median over the pooled flows (engine 3, ns-3 3).
    return {
        1: (
            _res({K10: [1.0, 1.0, 1.0], M10: [1.0, 2.0, 9.0]}, 10, timeouts=1, retx=5),
            _res({K10: [1.0, 1.0, 1.0], M10: [1.0, 4.0, 9.0]}, 20, timeouts=2, retx=7),
        ),
        2: (
            _res({K10: [1.0, 1.0, 2.0], M10: [3.0, 3.0, 3.0]}, 30, timeouts=0, retx=1),
            _res({K10: [1.0, 1.0, 2.0], M10: [3.0, 3.0, 3.0]}, 40, timeouts=1, retx=1),
        ),
    }


def test_pooled_median_is_over_the_flows_of_all_seeds_and_counts_are_summed() -> None:
    s = seeds.summarise(SC, _runs())
    cmp = s["compare"]
    assert s["seeds"] == [1, 2]
    eng10m = [1.0, 2.0, 9.0, 3.0, 3.0, 3.0]
    assert cmp["fct_med_ms[10000K]"]["engine"] == pytest.approx(statistics.median(eng10m)) == 3.0
    assert cmp["fct_med_ms[10000K]"]["ref"] == pytest.approx(3.0)
    assert cmp["fct_med_ms[10000K]"]["ratio"] == pytest.approx(1.0)
    # not the median of the per-seed medians (2.5 vs 3.5 would give 0.714)
    per = [s["per_seed"][k]["fct_med_ms[10000K]"] for k in ("1", "2")]
    assert [p["ratio"] for p in per] == pytest.approx([0.5, 1.0])
    assert s["spread"]["fct_med_ms[10000K]"] == {"ratios": pytest.approx([0.5, 1.0]), "min": 0.5, "max": 1.0}
    # p99 over the pooled flows (6 flows: the highest)
    assert cmp["fct_p99_ms[10000K]"]["engine"] == pytest.approx(9.0)
    assert (cmp["drops"]["engine"], cmp["drops"]["ref"]) == (40, 60)
    assert cmp["drops"]["ratio"] == pytest.approx(40 / 60)
    assert (cmp["timeouts"]["engine"], cmp["timeouts"]["ref"]) == (1, 3)
    assert (cmp["retransmits"]["engine"], cmp["retransmits"]["ref"]) == (6, 8)
    assert s["spread"]["timeouts"]["ratios"] == [0.5, 0.0]
    assert (cmp["timeouts[10K]"]["engine"], cmp["timeouts[10K]"]["ref"]) == (1, 3)
    assert "not_established" not in cmp  # records without conn_delay_ns
    # per flow, matched by seed and id: 10 MB ratios 1, 0.5, 1, 1, 1, 1
    assert s["paired"]["10000K"] == {"flows": 6, "median_ratio": 1.0, "within_tol": 5}


def test_seed_bootstrap_resamples_whole_seeds_on_both_sides() -> None:
    # 10 MB: seeds {1, 1} give 2 / 4 = 0.5, {2, 2} and {1, 2} 1.0; 10 KB always 1.0
    boot = seeds.summarise(SC, _runs())["bootstrap"]
    assert boot["fct_med_ms[10000K]"] == {"lo": 0.5, "hi": 1.0, "level": seeds.BOOTSTRAP_LEVEL}
    assert (boot["fct_med_ms[10K]"]["lo"], boot["fct_med_ms[10K]"]["hi"]) == (1.0, 1.0)
    # timeouts: seeds {1, 1} 2 / 4, {2, 2} 0 / 2, {1, 2} 1 / 3
    assert (boot["timeouts"]["lo"], boot["timeouts"]["hi"]) == (0.0, 0.5)
    assert seeds.summarise(SC, _runs())["bootstrap"] == boot  # seeded
    assert seeds.summarise(SC, {1: _runs()[1]})["bootstrap"] == {}
    rows = seeds.checks({"newreno": seeds.summarise(SC, _runs())})
    assert rows[0]["ours"].endswith("seed bootstrap 90% 1.000-1.000 / 0.500-1.000")
    assert rows[1]["ours"].endswith("seed bootstrap 90% 0.000-0.500")


def test_unfinished_flows_are_summed_and_left_out_of_the_medians() -> None:
    runs = _runs()
    runs[2][1]["flows"].append(_flow("late", M10, None) | {"conn_delay_ns": None})
    runs[2][0]["flows"].append(_flow("late", M10, 50.0) | {"conn_delay_ns": 24_000})
    s = seeds.summarise(SC, runs)
    cmp = s["compare"]
    assert cmp["unfinished[10000K]"] == {"engine": None, "ref": 1, "ratio": None}
    assert cmp["fct_med_ms[10000K]"]["ref"] == pytest.approx(3.0)
    assert cmp["fct_med_ms[10000K]"]["engine"] == pytest.approx(3.0)
    assert (cmp["not_established"]["engine"], cmp["not_established"]["ref"]) == (0, 1)
    # counted as later than every finished flow: ns-3's 7 flows 1, 3, 3, 3, 4, 9, unfinished
    assert cmp["fct_med_all_ms[10000K]"]["ref"] == pytest.approx(3.0)
    runs[1][1]["flows"].append(_flow("late2", M10, None))
    cmp = seeds.summarise(SC, runs)["compare"]
    assert cmp["fct_med_all_ms[10000K]"]["ref"] == pytest.approx(3.5)
    assert cmp["fct_med_ms[10000K]"]["ref"] == pytest.approx(3.0)
    assert s["paired"]["10000K"]["flows"] == 6  # finished on one side only: not paired


def test_checks_hold_on_matching_pooled_figures_and_fail_otherwise() -> None:
    ok = seeds.summarise(SC, _runs())
    rows = seeds.checks({"newreno": ok, "sack": ok})
    # medians all 1.00 pooled; timeouts 1 vs 3: beyond 2x
    assert [r["holds"] for r in rows] == [True, False, True]
    assert "per seed 1.000-1.000 / 0.500-1.000" in rows[0]["ours"]
    assert "engine 1 vs ns-3 3" in rows[1]["ours"] and "1/2, 0/1" in rows[1]["ours"]
    # an engine class 20 % slow fails the median check
    runs = _runs()
    for s in runs:
        for f in runs[s][0]["flows"]:
            if f["size_bytes"] == K10:
                f["fct_ns"] = round(f["fct_ns"] * 1.2)
        runs[s][0]["flows"][0]["timeouts"] = 2  # 2 vs 3: within 2x
    bad = seeds.summarise(SC, runs)
    rows = seeds.checks({"newreno": bad, "sack": None})
    assert [r["holds"] for r in rows] == [False, True, None]
    assert rows[2]["ours"] == "not run"


def test_timeout_check_bounds_both_ways_and_none_on_both_sides_holds() -> None:
    def summary(e: int, r: int) -> dict[str, Any]:
        return {"seeds": [1], "compare": {"timeouts": {"engine": e, "ref": r}}, "per_seed": {}}

    assert seeds.timeout_check("NewReno", summary(6, 12))["holds"] is True
    assert seeds.timeout_check("NewReno", summary(5, 12))["holds"] is False
    assert seeds.timeout_check("NewReno", summary(25, 12))["holds"] is False
    assert seeds.timeout_check("NewReno", summary(0, 0))["holds"] is True
    assert seeds.timeout_check("NewReno", summary(0, 1))["holds"] is False


def test_each_seed_runs_its_own_matched_scenario_on_both_sides(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, Any]] = []

    def fake_engine(sc: scenarios.Scenario, prr: Any = None) -> tuple[dict[str, Any], Any]:
        calls.append(("engine", [(f.id, f.src, f.dst, f.size_bytes, f.start_ns) for f in sc.flows]))
        paths = {
            f.id: {"data": [f.src, "left", "right", f.dst], "ack": [f.dst, "right", "left", f.src]}
            for f in sc.flows
        }
        flows = [_flow(f.id, f.size_bytes or 0, 1.0) for f in sc.flows]
        return {"flows": flows, "channels": {"left->right": {"drops": 1, "tx_bytes": 0}}}, paths

    def fake_ns3(spec: dict[str, Any], cache: Any = None) -> dict[str, Any]:
        calls.append(
            ("ns3", [(f["id"], f["src"], f["dst"], f["size_bytes"], f["start_ns"]) for f in spec["flows"]])
        )
        flows = [_flow(f["id"], f["size_bytes"], 1.0) for f in spec["flows"]]
        return {"flows": flows, "channels": {"left->right": {"drops": 2, "tx_bytes": 0}}}

    monkeypatch.setattr(seeds, "run_engine", fake_engine)
    monkeypatch.setattr(seeds, "run_ns3", fake_ns3)
    logs: list[str] = []
    out = seeds.run_finite_seeds([1, 2, 3], logs.append, sacks=(False,))
    assert [c[0] for c in calls] == ["engine", "ns3"] * 3
    for k in range(3):
        assert calls[2 * k][1] == calls[2 * k + 1][1]  # the same flows on both sides
    assert len({str(calls[2 * k][1]) for k in range(3)}) == 3  # other flows per seed
    assert calls[0][1] == [
        (f.id, f.src, f.dst, f.size_bytes, f.start_ns) for f in scenarios.finite(False).flows
    ]
    nr = out["newreno"]
    assert nr["compare"]["drops"] == {"engine": 3, "ref": 6, "ratio": 0.5}
    assert len(nr["ns3_flows"]["2"]) == 160
    assert [r["holds"] for r in out["checks"]] == [True, True, None]
    assert any(line.startswith("[holds] finite NewReno: every size class") for line in logs)


def test_seed_list() -> None:
    assert seeds.seed_list(1) == [1]
    assert seeds.seed_list(5) == [1, 2, 3, 4, 5]
    with pytest.raises(UserError, match="--seeds"):
        seeds.seed_list(0)


@pytest.mark.parametrize(
    ("args", "want"),
    [
        (["--seeds", "0"], "--seeds must be at least 1"),
        (["--seeds", "3", "--only", "single"], "add finite to --only"),
    ],
)
def test_bad_seeds_are_one_line_exit_2(
    args: list[str], want: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["crosscheck", "--no-kernel", "--out", str(tmp_path / "o"), *args])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and want in err, err


def test_check_rows_share_one_shape_run_or_not_run() -> None:
    s = seeds.summarise(SC, _runs())
    med, rto = seeds.median_check("SACK", s), seeds.timeout_check("NewReno", s)
    assert med["statement"].endswith("within 10% of ns-3's (flows of 2 seeds pooled)")
    assert rto["statement"].endswith("within 2x of ns-3's (summed over 2 seeds)")
    for row in (seeds.median_check("SACK", None), seeds.timeout_check("NewReno", None)):
        assert (row["ours"], row["holds"]) == ("not run", None)
        assert "seeds" not in row["statement"]
    # without a bootstrap (one seed) neither row names one
    one = seeds.summarise(SC, {1: _runs()[1]})
    assert "bootstrap" not in seeds.median_check("NewReno", one)["ours"]
    assert "bootstrap" not in seeds.timeout_check("NewReno", one)["ours"]
