"""`paccp run` on a small dumbbell, `paccp reproduce` argument errors."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from paccp.cli import main
from paccp.common.usage import read_usage
from paccp.sim.rundir import FLOW_COLUMNS

REPO = Path(__file__).resolve().parents[1]


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        main(argv)
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def test_run_dumbbell_writes_everything_and_is_deterministic(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scen = REPO / "scenarios" / "dumbbell.toml"
    dirs = [tmp_path / "a", tmp_path / "b"]
    for d in dirs:
        code, _, err = _cli(["run", str(scen), "--out", str(d)], capsys)
        assert code == 0, err
    a = dirs[0]
    for f in ("summary.json", "scenario.toml", "flows.parquet", "flows.csv", "channels.csv", "usage.jsonl"):
        assert (a / f).is_file(), f
    assert list(a.glob("rate_*.png"))
    assert (a / "scenario.toml").read_text() == scen.read_text()
    table = pq.read_table(a / "flows.parquet")
    assert tuple(table.column_names) == FLOW_COLUMNS
    rows = {r["id"]: r for r in table.to_pylist()}
    assert rows["be"]["cos"] == "be" and rows["ds"]["cos"] == "ds" and rows["mrg"]["cos"] == "mrg"
    assert rows["mrg"]["tenant"] == "globex" and rows["be"]["tenant"] == "acme"
    assert rows["short"]["size_class"] == "medium" and rows["be"]["size_class"] is None
    assert rows["short"]["deadline_ns"] == 35_000_000
    with (a / "flows.csv").open() as fh:
        assert tuple(next(csv.reader(fh))) == FLOW_COLUMNS
    recs = list(read_usage(a / "usage.jsonl"))
    be = [r for r in recs if r.flow_id == "be"]
    assert len(be) == 2  # FBP upgrade at 60 ms -> two slices
    assert be[0].cos == "be" and be[1].cos == "ds" and be[1].omega == 2
    assert be[0].end_ns == be[1].start_ns
    assert sum(r.bytes for r in be) == rows["be"]["bytes_acked"]
    assert len(recs) == len(rows) + 1
    # bit-identical reruns (apart from wall_s)
    sa, sb = (json.loads((d / "summary.json").read_text()) for d in dirs)
    sa.pop("wall_s"), sb.pop("wall_s")
    assert sa == sb
    for f in ("flows.parquet", "flows.csv", "channels.csv", "usage.jsonl"):
        assert (a / f).read_bytes() == (dirs[1] / f).read_bytes(), f


def test_run_seed_override(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _cli(
        ["run", str(REPO / "scenarios" / "dumbbell.toml"), "--out", str(tmp_path), "--seed", "7"], capsys
    )
    assert code == 0, err
    assert json.loads((tmp_path / "summary.json").read_text())["seed"] == 7


def test_unknown_experiment(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _cli(["reproduce", "fig99", "--out", str(tmp_path)], capsys)
    assert code == 2
    line = err.strip()
    assert "\n" not in line and "unknown experiment 'fig99'" in line and "fig4a" in line


def test_bad_duration(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _cli(["reproduce", "fig4a", "--out", str(tmp_path), "--duration", "abc"], capsys)
    assert code == 2 and err.startswith("paccp: error:")


def test_missing_scenario(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _cli(["run", str(tmp_path / "nope.toml"), "--out", str(tmp_path / "o")], capsys)
    assert code == 2 and "no such scenario file" in err


def test_reproduce_quick_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _cli(
        ["reproduce", "fig4c", "--quick", "--duration", "20ms", "--seed", "2", "--out", str(tmp_path)], capsys
    )
    assert code == 0, err
    assert "fig4c" in out and "normalised utility" in out
    s = json.loads((tmp_path / "fig4c" / "summary.json").read_text())
    assert s["seed"] == 2 and s["duration_s"] == 0.02


def _longlived_dumbbell(tmp_path: Path) -> Path:
    """scenarios/dumbbell.toml without its FBP change and its finite flow: the optimum applies."""
    text = (REPO / "scenarios" / "dumbbell.toml").read_text()
    text = text.replace('changes = [{at = "60ms", theta = "0bit", omega = 2.0}]\n', "")
    text = text[: text.index('[[flows]]\nid = "short"')]
    scen = tmp_path / "longlived.toml"
    scen.write_text(text)
    return scen


def test_run_ends_with_a_per_class_table_with_the_optimum(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import paccp.sim.plots as plots

    drawn: dict[str, object] = {}
    real = plots.plot_class_rates

    def spy(*args: object, **kw: object) -> object:
        drawn.update(kw)
        return real(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(plots, "plot_class_rates", spy)
    code, out, err = _cli(["run", str(_longlived_dumbbell(tmp_path)), "--out", str(tmp_path / "r")], capsys)
    assert code == 0, err
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    cl = summary["classes"]
    # weights 1, 2, 2 and MRG theta 5 Gb/s on a 10 Gb/s bottleneck: BE 1.67, DS 3.33, MRG 5 Gb/s
    assert cl["MRG"]["optimal_bps"] == pytest.approx(5e9, rel=0.02)
    assert cl["BE"]["optimal_bps"] == pytest.approx(1.67e9, rel=0.02)
    assert cl["MRG"]["theta_bps"] == 5e9 and "theta_bps" not in cl["BE"]
    for head in ("class", "rate per flow", "theta per flow", "optimum per flow", "rate/optimum"):
        assert head in out
    assert "wrote" in out and "0 finished" not in out
    for lab, c in cl.items():
        line = next(ln for ln in out.splitlines() if f" {lab} " in ln)
        assert f"{c['mean_rate_bps'] / 1e9:.3g} Gb/s" in line and f"{c['optimal_bps'] / 1e9:.3g} Gb/s" in line
    assert "none finishes" in out  # long-lived: no FCT column, said once
    # the plots draw the guarantee (theta) and the optimum per class
    assert drawn["theta_bps"] == {"MRG": 5e9}
    assert set(drawn["reference_bps"]) == {"BE", "DS", "MRG"}  # type: ignore[arg-type]


def test_run_with_finite_flows_shows_fct_and_no_optimum(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scen = REPO / "scenarios" / "dumbbell.toml"
    code, out, err = _cli(["run", str(scen), "--out", str(tmp_path / "r")], capsys)
    assert code == 0, err
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert all("optimal_bps" not in c for c in summary["classes"].values())
    assert "mean FCT" in out and "optimum per flow" not in out
    be = summary["classes"]["BE"]
    assert f"{be['mean_fct_ns'] / 1e6:.3g} ms" in out
