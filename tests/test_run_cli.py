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
