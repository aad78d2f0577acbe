"""Sweep executor: grid expansion, cache (interrupt + resume), local pool vs in-process vs Ray."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from paccp.cli import app
from paccp.errors import UserError
from paccp.experiments._workload_lib import Size, scenario_dict
from paccp.sim.sweep import Point, evaluate, load_sweep, point_key, run_points, set_path

TINY = Size(2, 1, 4, warmup_ms=1, measure_ms=6, drain_ms=3)
VBP_DEADLINE = {"kind": "active_share", "rate": "5Gbit", "split": True}


def tiny_points(n_seeds: int = 2, loads: tuple[float, ...] = (0.3, 0.6)) -> list[Point]:
    return [
        Point(
            scenario=scenario_dict("vbp", "websearch", load, seed, TINY),
            params={"load": load, "seed": seed},
            deadline=VBP_DEADLINE,
        )
        for load in loads
        for seed in range(1, n_seeds + 1)
    ]


def cli_main(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """Run the real entry point (with its UserError handling); return (exit code, stderr)."""
    from paccp.cli import main

    code = 0
    try:
        main(args)
    except SystemExit as exc:
        code = int(exc.code or 0)
    return code, capsys.readouterr().err


def _strip(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k not in ("cached", "wall_s")} for r in results]


def test_interrupted_sweep_resumes_without_recomputing(tmp_path: Path) -> None:
    points = tiny_points()
    calls: list[dict[str, Any]] = []

    def failing(p: Point) -> dict[str, Any]:
        if len(calls) == 2:
            raise KeyboardInterrupt  # the user interrupts during the third point
        calls.append(p.params)
        return evaluate(p)

    with pytest.raises(KeyboardInterrupt):
        run_points(points, tmp_path, workers=1, progress=False, evaluate_fn=failing)
    assert len(list((tmp_path / "cache").glob("*.json"))) == 2

    resumed: list[dict[str, Any]] = []

    def counting(p: Point) -> dict[str, Any]:
        resumed.append(p.params)
        return evaluate(p)

    res = run_points(points, tmp_path, workers=1, progress=False, evaluate_fn=counting)
    assert resumed == [points[2].params, points[3].params]  # only the unfinished ones
    assert [r["cached"] for r in res] == [True, True, False, False]

    again: list[Point] = []

    def recording(p: Point) -> dict[str, Any]:
        again.append(p)
        return evaluate(p)

    res2 = run_points(points, tmp_path, workers=1, progress=False, evaluate_fn=recording)
    assert again == []
    assert _strip(res2) == _strip(res)


def test_cache_key_depends_on_content_and_seed() -> None:
    a, b = tiny_points(n_seeds=2, loads=(0.3,))
    assert point_key(a) != point_key(b)  # seed
    same = Point(scenario=json.loads(json.dumps(a.scenario)), params={"other": 1}, deadline=VBP_DEADLINE)
    assert point_key(same) == point_key(a)  # params are labels, not content
    nodl = Point(scenario=a.scenario, deadline=None)
    assert point_key(nodl) != point_key(a)


def test_cache_key_changes_with_the_engine_build(monkeypatch: pytest.MonkeyPatch) -> None:
    (a,) = tiny_points(n_seeds=1, loads=(0.3,))
    before = point_key(a)
    monkeypatch.setattr("paccp.sim.engine.source_hash", lambda: "another-engine-build")
    assert point_key(a) != before


def test_pool_matches_in_process(tmp_path: Path) -> None:
    points = tiny_points(n_seeds=1)
    serial = run_points(points, tmp_path / "a", workers=1, progress=False)
    pooled = run_points(points, tmp_path / "b", workers=2, progress=False)
    assert _strip(serial) == _strip(pooled)
    assert all(r["stats"]["by_cos"]["all"]["overall"]["flows"] > 0 for r in serial)


def test_ray_matches_local(tmp_path: Path) -> None:
    ray = pytest.importorskip("ray", reason="ray is not installed")
    points = tiny_points(n_seeds=1)
    local = run_points(points, tmp_path / "local", workers=1, progress=False)
    try:
        ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    except Exception as exc:  # pragma: no cover - depends on the machine
        pytest.skip(f"Ray cannot start here: {exc}")
    try:
        remote = run_points(points, tmp_path / "ray", executor="ray", progress=False)
    finally:
        ray.shutdown()
    assert _strip(remote) == _strip(local)


def test_sweep_file_grid_and_cli(tmp_path: Path, repo: Path) -> None:
    base = tmp_path / "base.toml"
    from paccp.scenario import to_toml

    base.write_text(to_toml(scenario_dict("fbp", "websearch", 0.3, 1, TINY)), encoding="utf-8")
    sw = tmp_path / "s.toml"
    sw.write_text(
        '[sweep]\nname = "t"\nscenario = "base.toml"\nseeds = [1, 2]\n'
        'deadline = {kind = "active_share", rate = "2.5Gbit", split = false}\n'
        '[grid]\nload = [0.2, 0.4]\n"cc.rcos" = [2.0, 3.0]\n',
        encoding="utf-8",
    )
    name, points = load_sweep(sw)
    assert name == "t" and len(points) == 8
    assert points[0].params == {"load": 0.2, "cc.rcos": 2.0, "seed": 1}
    assert points[-1].scenario["cc"]["rcos"] == 3.0 and points[-1].scenario["arrivals"][0]["load"] == 0.4

    # the CLI on a smaller grid, twice: the second run comes entirely from the cache
    sw.write_text(sw.read_text().replace('"cc.rcos" = [2.0, 3.0]\n', "").replace("[1, 2]", "[1]"))
    runner = CliRunner()
    out = tmp_path / "out"
    r1 = runner.invoke(app, ["sweep", str(sw), "--out", str(out)])
    assert r1.exit_code == 0, r1.output
    r2 = runner.invoke(app, ["sweep", str(sw), "--out", str(out)])
    assert "2 from the cache" in r2.output
    summary = json.loads((out / "summary.json").read_text())
    assert len(summary["points"]) == 2
    assert (out / "sweep.csv").read_text().startswith("load,seed,")


@pytest.mark.parametrize(
    "body, needle",
    [
        ("[sweep]\nscenario = 'nope.toml'\n", "no such file"),
        ("[sweep]\nscenario = 'base.toml'\nseeds = [-1]\n", "seeds"),
        ("[sweep]\nscenario = 'base.toml'\n[grid]\nload = []\n", "non-empty"),
        ("[sweep]\nscenario = 'base.toml'\ndeadline = {kind = 'x'}\n", "deadline"),
        ("[sweep]\nscenario = 'base.toml'\n[grid]\n'topology.leaves' = [0]\n", "leaves"),
        ("[sweep]\nscenario = 'base.toml'\n[grid]\n'arrivals.5.load' = [0.1]\n", "index"),
        ("[sweep\n", "malformed"),
        ("[sweep]\nscenario = 'base.toml'\n[grid]\nworkload = ['TMP/bad.cdf']\n", "not monotone"),
        ("[sweep]\nscenario = 'base.toml'\n[grid]\nworkload = ['TMP/nope.cdf']\n", "no such built-in"),
    ],
)
def test_bad_sweep_files_are_one_line_errors(
    tmp_path: Path, body: str, needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from paccp.scenario import to_toml

    (tmp_path / "base.toml").write_text(to_toml(scenario_dict("fbp", "websearch", 0.3, 1, TINY)))
    (tmp_path / "bad.cdf").write_text("100 0.5\n50 0.7\n1000 1\n")
    sw = tmp_path / "s.toml"
    sw.write_text(body.replace("TMP", str(tmp_path)))
    with pytest.raises(UserError, match=needle):
        load_sweep(sw)
    code, err = cli_main(["sweep", str(sw), "--out", str(tmp_path / "o")], capsys)
    assert code == 2
    assert err.startswith("paccp: error:") and len(err.strip().splitlines()) == 1


def test_set_path_lists_and_dicts() -> None:
    d: dict[str, Any] = {"a": [{"b": 1}]}
    set_path(d, "a.0.b", 2)
    set_path(d, "c.d", 3)
    assert d == {"a": [{"b": 2}], "c": {"d": 3}}


def test_bad_executor_is_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="executor"):
        run_points(tiny_points(1, (0.3,)), tmp_path, executor="slurm", progress=False)
