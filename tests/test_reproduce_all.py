"""``paccp reproduce all`` and its groups: one line per experiment, groups, resume, failures, one real run."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from paccp.errors import UserError
from paccp.sim import reproduce_all as rall

ROOT = Path(__file__).resolve().parents[1]


def test_every_experiment_and_comparison_has_one_job() -> None:
    from paccp.experiments import load_all

    ids = [j.id for j in rall.JOBS]
    assert len(ids) == len(set(ids))
    assert sorted(j.id for j in rall.JOBS if not j.is_compare) == sorted(load_all())
    files = sorted(p.stem for p in (ROOT / "scenarios").glob("compare-*.toml"))
    assert sorted(j.id for j in rall.JOBS if j.group == "compare") == files
    # every comparison file has its ablation job, which runs paccp-host and its ablations on that file
    assert sorted(j.scenario for j in rall.JOBS if j.group == "ablation") == files
    ab = next(j for j in rall.JOBS if j.id == "ablation-overcommit")
    argv = ab.argv(Path("/o"), quick=False, scenarios=ROOT / "scenarios")
    assert argv[1] == str(ROOT / "scenarios" / "compare-overcommit.toml")
    assert (
        argv[argv.index("--schemes") + 1] == "ablations"
        and argv[argv.index("--out") + 1] == "/o/ablation-overcommit"
    )
    assert ab.done_file(Path("/o")) == Path("/o/ablation-overcommit/compare.json")
    assert {j.group for j in rall.JOBS} == set(rall.GROUPS)
    assert rall.default_scenarios() == ROOT / "scenarios"


def test_groups_expand() -> None:
    # all: every group but the ablation, which is asked for by name
    assert [j.id for j in rall.expand(["all"])] == [j.id for j in rall.JOBS if j.group != "ablation"]
    assert {j.id for j in rall.expand(["all", "ablation"])} == {j.id for j in rall.JOBS}
    assert {j.id for j in rall.expand(["softbw"])} == {j.id for j in rall.JOBS if j.group == "softbw"}
    assert [j.id for j in rall.expand(["compare-overcommit", "fig4a", "fig4a"])] == [
        "fig4a",
        "compare-overcommit",
    ]
    with pytest.raises(UserError, match="unknown experiment or group 'nope'"):
        rall.expand(["nope"])


def _fake(calls: list[list[str]], fail: str | None = None):  # type: ignore[no-untyped-def]
    """A runner that writes the job's done file instead of running it (or fails the job ``fail``)."""

    def run(cmd: list[str], log: Path, started: object = None) -> rall._Result:
        calls.append(cmd)
        job = log.stem
        if job == fail:
            return rall._Result("failed", 0.1, 0.0, 3)
        out = Path(cmd[cmd.index("--out") + 1])
        compare = job.startswith(("compare-", "ablation-"))
        target = out if compare else out / job
        target.mkdir(parents=True, exist_ok=True)
        name = "compare.json" if compare else "summary.json"
        (target / name).write_text(json.dumps({"title": job, "checks": []}))
        return rall._Result("done", 0.2, 0.1, 0)

    return run


def test_resume_skips_complete_jobs_and_records_attempts(tmp_path: Path) -> None:
    calls: list[list[str]] = []
    rec = rall.reproduce_all(["softbw"], tmp_path, workers=1, echo=lambda s: None, runner=_fake(calls))
    n = len([j for j in rall.JOBS if j.group == "softbw"])
    assert len(calls) == n and all(v["status"] == "done" for v in rec["jobs"].values())
    # the longest job starts first
    assert calls[0][calls[0].index("reproduce") + 1] == "softbw-oc"
    calls.clear()
    rec = rall.reproduce_all(
        ["softbw", "compare-overcommit"], tmp_path, echo=lambda s: None, runner=_fake(calls)
    )
    assert len(calls) == 1 and "compare" in calls[0]  # only the new job ran
    assert rec["jobs"]["softbw-oc"]["status"] == "skipped"
    saved = json.loads((tmp_path / rall.RECORD).read_text())
    assert len(saved["earlier_attempts"]) == 1 and saved["wall_s"] >= 0 and len(saved["load_avg_start"]) == 3


def test_a_failed_job_does_not_stop_the_others(tmp_path: Path) -> None:
    calls: list[list[str]] = []
    lines: list[str] = []
    slow = _fake(calls, "fig4c")

    def run(cmd: list[str], log: Path, started: Any = None) -> rall._Result:
        started(object())  # the job counts as running (a real runner passes its process)
        time.sleep(0.5 if log.stem == "fig4a" else 0)  # long enough for a heartbeat line
        return slow(cmd, log)

    with pytest.raises(UserError, match="1 job\\(s\\) failed: fig4c"):
        rall.reproduce_all(
            ["fig4a", "fig4c", "fig5"], tmp_path, workers=1, echo=lines.append, heartbeat_s=0.1, runner=run
        )
    assert any(line.endswith("running: fig4a") for line in lines), lines
    calls.clear()
    tmp_path = tmp_path / "again"
    with pytest.raises(UserError, match="1 job\\(s\\) failed: fig4c"):
        rall.reproduce_all(
            ["fig4a", "fig4c", "fig5"], tmp_path, workers=1, echo=lambda s: None, runner=_fake(calls, "fig4c")
        )
    assert len(calls) == 3
    saved = json.loads((tmp_path / rall.RECORD).read_text())
    assert saved["jobs"]["fig4c"]["status"] == "failed" and saved["jobs"]["fig5"]["status"] == "done"


def test_the_record_is_kept_after_every_job_and_sigterm_stops_cleanly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os
    import signal
    import threading
    from types import SimpleNamespace

    seen: list[dict[str, str]] = []
    fake = _fake([])
    killed = threading.Event()  # the handler stopped the running job's process group
    real_killpg = os.killpg

    def killpg(pgid: int, sig: int) -> None:
        if pgid == -4242:  # the fake job below: record it instead of signalling
            killed.set()
        else:
            real_killpg(pgid, sig)

    monkeypatch.setattr(rall.os, "killpg", killpg)

    def run(cmd: list[str], log: Path, started: Callable[[object], None] | None = None) -> rall._Result:
        rec = json.loads((tmp_path / rall.RECORD).read_text())
        seen.append({k: v["status"] for k, v in rec["jobs"].items()})
        if log.stem == "fig4c":
            assert started is not None
            started(SimpleNamespace(pid=-4242))  # a running job, as a real child registers itself
            os.kill(os.getpid(), signal.SIGTERM)  # as `kill PID` of the reproduction
            # the handler runs in the main thread: wait until it has stopped this job (bounded, not a
            # fixed sleep, which a loaded machine can outlast)
            assert killed.wait(60), "the SIGTERM handler never stopped the running job"
            return rall._Result("failed", 0.1, 0.0, -15)
        return fake(cmd, log)

    with pytest.raises(UserError, match="interrupted: rerun the same command to resume"):
        rall.reproduce_all(["fig4a", "fig4c", "fig5"], tmp_path, workers=1, echo=str, runner=run)
    assert seen[0] == {"fig4a": "pending", "fig4c": "pending", "fig5": "pending"}
    assert seen[1]["fig4a"] == "done"  # written after the first job
    saved = json.loads((tmp_path / rall.RECORD).read_text())
    assert saved["interrupted"] is True and saved["finished_utc"] is not None
    assert [saved["jobs"][j]["status"] for j in ("fig4a", "fig4c", "fig5")] == [
        "done",
        "interrupted",
        "pending",
    ]
    rall.reproduce_all(["fig4a", "fig4c", "fig5"], tmp_path, workers=1, echo=str, runner=_fake([]))
    saved = json.loads((tmp_path / rall.RECORD).read_text())
    assert saved["jobs"]["fig4a"]["status"] == "skipped" and saved["earlier_attempts"][0]["interrupted"]


def test_bad_options_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="--workers must be >= 1"):
        rall.reproduce_all(["all"], tmp_path, workers=0)
    with pytest.raises(UserError, match="not found"):
        rall.reproduce_all(["compare"], tmp_path, scenarios=tmp_path)


def test_cli_group_runs_real_jobs_and_resumes(tmp_path: Path) -> None:
    """Two real jobs (--quick) as child processes; a rerun skips both."""
    from typer.testing import CliRunner

    from paccp.cli import app

    out = tmp_path / "r"
    args = ["reproduce", "softbw-share", "compare-overcommit", "--quick", "--out", str(out)]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    assert (out / "softbw-share" / "summary.json").is_file()
    assert (out / "compare-overcommit" / "compare.json").is_file()
    assert (out / "report.html").is_file() and (out / "logs" / "softbw-share.log").is_file()
    rec = json.loads((out / rall.RECORD).read_text())
    assert {v["status"] for v in rec["jobs"].values()} == {"done"} and rec["quick"] is True
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0 and "2 already complete" in res.output
    bad = CliRunner().invoke(app, ["reproduce", "all", "--seed", "3", "--out", str(out)])
    assert bad.exit_code != 0


@pytest.mark.parametrize("opt", [["--seeds", "5"], ["--loads", "0.8"], ["--drain", "3s"], ["--from-cache"]])
def test_options_of_experiment_ids_are_refused_with_groups(
    opt: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A group would ignore the workload experiments' sizing options: refused, nothing written."""
    from cli_run import cli, one_line_error

    out = tmp_path / "o"
    code, _, err = cli(["reproduce", "paccp", "--out", str(out), *opt], capsys)
    line = one_line_error(code, err)
    assert "apply to experiment ids, not to groups" in line and opt[0] in line
    assert not out.exists()
