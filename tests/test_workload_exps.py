"""Workload experiments (rcos, fig8-fig11) in --quick mode: setups, outputs, cache reuse."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from paccp.experiments import ExperimentOptions, load_all
from paccp.experiments._workload_lib import QUICK, host_roles, scenario_dict
from paccp.experiments.workload import SPECS, run_spec
from paccp.experiments.workload_checks import checks_price
from paccp.scenario import parse_scenario, to_engine

MS = 1_000_000


def test_all_five_are_registered() -> None:
    reg = load_all()
    for exp in ("rcos", "fig8", "fig9", "fig10", "fig11"):
        assert exp in reg


def test_vbp_setup_per_rack_shares_and_pairs() -> None:
    roles = host_roles(QUICK, "vbp")
    rack0 = [roles[f"h{j}"] for j in range(QUICK.hosts_per_leaf)]
    assert rack0.count("be") == 8 and rack0.count("ds") == 4 and rack0.count("mrg") == 4
    eng = to_engine(parse_scenario(scenario_dict("vbp", "websearch", 0.5, 1, QUICK)))
    pairs = {(v["label"], v["theta_bps"], v["omega"]) for v in eng["vms"]}
    assert pairs == {("BE", 0, 1.0), ("DS", 0, 2.0), ("MRG", 5_000_000_000, 2.0)}
    arr = eng["arrivals"][0]
    assert arr["cos"] == {"kind": "by_vm"} and arr["destination"] == "other_leaf"
    assert arr["stop_ns"] == QUICK.measure_ms * MS < eng["duration_ns"]  # drain after the last arrival


def test_fbp_mix_and_rcos_one_is_theta_zero() -> None:
    eng = to_engine(parse_scenario(scenario_dict("fbp", "datamining", 0.5, 1, QUICK)))
    classes = eng["arrivals"][0]["cos"]["classes"]
    assert [(c["label"], c["prob"], c["theta_bps"], c["omega"]) for c in classes] == [
        ("BE", 0.6, 0, 1.0),
        ("DS", 0.2, 0, 2.0),
        ("MRG", 0.2, 2_500_000_000, 2.0),
    ]
    r1 = to_engine(parse_scenario(scenario_dict("rcos", "websearch", 0.3, 1, QUICK, rcos=1.0)))
    r3 = to_engine(parse_scenario(scenario_dict("rcos", "websearch", 0.3, 1, QUICK, rcos=3.0)))
    assert {v["theta_bps"] for v in r1["vms"]} == {0}  # rcos = 1: MRG behaves as BE
    assert {v["theta_bps"] for v in r3["vms"]} == {0, 3_000_000_000}
    assert r3["cc"]["rcos"] == 3.0


def test_load_converts_with_leaf_spine_capacity() -> None:
    from paccp.traffic.workload import load_cdf

    eng = to_engine(parse_scenario(scenario_dict("vbp", "websearch", 0.5, 1, QUICK)))
    cap = QUICK.leaves * QUICK.spines * 40e9
    assert eng["arrivals"][0]["rate_per_s"] == pytest.approx(
        0.5 * cap / (8 * load_cdf("websearch").mean_bytes)
    )


@pytest.mark.parametrize("exp", ["fig8", "fig11", "rcos"])
def test_quick_run_writes_outputs_and_reuses_cache(tmp_path: Path, exp: str) -> None:
    opts = ExperimentOptions(out_dir=tmp_path, seed=1, quick=True)
    s = run_spec(SPECS[exp], opts, show=False)
    out = tmp_path / exp
    on_disk = json.loads((out / "summary.json").read_text())
    assert on_disk["experiment"] == exp and "load" in on_disk["load_definition"]
    assert (out / "table.md").read_text().count("|") > 8
    # --quick is a smoke test: the paper statements are listed with our numbers but never judged.
    assert s["checks"] and all(c["holds"] is None for c in s["checks"])
    assert "smoke test" in on_disk["smoke_test"] and "n/a" in (out / "table.md").read_text()
    pngs = sorted(p.name for p in out.glob("*.png"))
    assert pngs == (["rcos.png"] if exp == "rcos" else ["fct_norm.png", "meet_rate.png"])
    row = s["loads"][-1]
    for cos in ("be", "mrg"):
        v = row["cos"][cos]
        assert v["flows"] > 0
        assert set(v["fct_norm_to_be"]) == {"overall", "small", "medium", "big"}
        assert v["unfinished"] >= 0
    assert row["cos"]["be"]["fct_norm_to_be"]["overall"] == pytest.approx(1.0)
    rate = row["cos"]["mrg"]["deadline_meet_rate"]["overall"]
    assert rate is not None and 0.0 <= rate <= 1.0
    # flow records with deadlines
    flows = next((out / "points").glob("*/flows.parquet"))
    t = pq.read_table(flows).to_pylist()
    finite = [r for r in t if r["size_bytes"] is not None and r["deadline_ns"] is not None]
    assert finite
    for r in finite[:50]:
        if r["finish_ns"] is not None:
            assert r["deadline_met"] == (r["finish_ns"] <= r["deadline_ns"])
    # a rerun comes entirely from the cache and gives the same numbers
    s2 = run_spec(SPECS[exp], opts, show=False)
    assert s2["points_from_cache"] == s2["points"]
    assert s2["loads"] == s["loads"]


def _row(load: float, norm: dict[str, dict[str, float]], meet: dict[str, float]) -> dict[str, object]:
    cos = {
        c: {
            "fct_norm_to_be": norm.get(c, {}),
            "fct_norm_to_be_ci95": {g: 0.05 for g in norm.get(c, {})},
            "deadline_meet_rate": {"overall": meet[c]},
        }
        for c in ("be", "ds", "mrg")
    }
    return {"load": load, "cos": cos}


def test_price_checks_name_the_worst_point_and_judge_each_statement() -> None:
    rows = [
        _row(
            0.3,
            {
                "ds": {"overall": 0.9, "small": 1.04, "medium": 0.7},
                "mrg": {"overall": 0.8, "small": 0.9, "medium": 0.6},
            },
            {"be": 0.9, "ds": 0.92, "mrg": 0.95},
        ),
        _row(
            0.8,
            {
                "ds": {"overall": 0.5, "small": 0.95, "medium": 0.75},
                "mrg": {"overall": 0.9, "small": 0.8, "medium": 0.5},
            },
            {"be": 0.7, "ds": 0.8, "mrg": 0.85},
        ),
    ]
    checks = {c["statement"]: c for c in checks_price(SPECS["fig8"], rows)}
    assert checks["DS overall FCT / BE at the highest load (80%) below 0.85"]["holds"] is True
    assert checks["MRG overall FCT / BE at the highest load (80%) below 0.85"]["holds"] is False
    small = checks["small flows: DS and MRG FCT below BE's at every load"]
    assert small["holds"] is False
    assert small["ours"] == "max 1.040 (DS at 30%, 95 % CI +/- 0.05)"
    medium = checks["medium flows: DS and MRG FCT below BE's at every load"]
    assert medium["holds"] is True and medium["ours"].startswith("max 0.750 (DS at 80%")
    assert checks["small and medium DS/MRG FCT below 0.8 of BE's at every load"]["holds"] is False
    assert checks["MRG deadline meet rate above BE's at 80%"]["holds"] is True
    assert checks["MRG deadline meet rate >= 0.90 at 80%"]["holds"] is False


def test_per_load_figures_are_titled_by_what_they_show() -> None:
    """fig8's meet_rate.png was titled "FCT normalised to BE and deadline meet rates" (the spec's title)."""
    from paccp.experiments.workload import SPECS, plot_title

    meet = plot_title(SPECS["fig8"], "deadline_meet_rate")
    norm = plot_title(SPECS["fig8"], "fct_norm_to_be")
    assert "deadline meet rate" in meet and "FCT" not in meet
    assert "FCT" in norm and "normalised to BE" in norm and "meet" not in norm
    assert meet.startswith("fig8 (VBP, websearch)")
