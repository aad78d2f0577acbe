"""Issue 30, the cases left after the first pass: each through the real CLI, a one-line error naming the
field (exit 2) with nothing left behind, or a correct result; and what a SIGKILL leaves for the next run.
The property suite of the same parsers is tests/test_hardening_surfaces_props.py."""

from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from cli_run import cli, one_line_error

ROOT = Path(__file__).resolve().parents[1]
DUMBBELL = ROOT / "scenarios" / "dumbbell.toml"
SMALL = (  # a 30 ms run of the dumbbell (its short flow and change moved in)
    DUMBBELL.read_text()
    .replace('duration = "100ms"', 'duration = "30ms"')
    .replace('start = "30ms"', 'start = "1ms"')
    .replace('at = "60ms"', 'at = "20ms"')
)


def _left(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir())


# ---------------------------------------------------------------------------------------------------
# tracebacks that became one-line errors


@pytest.mark.parametrize("key", ["size_scale", "time_scale"])
def test_mapreduce_scale_is_bounded(tmp_path: Path, capsys: pytest.CaptureFixture[str], key: str) -> None:
    text = (ROOT / "scenarios" / "compare-clos-mapreduce.toml").read_text()
    assert f"{key} = 0.001" in text
    (tmp_path / "c.toml").write_text(text.replace(f"{key} = 0.001", f"{key} = 1e300", 1))
    code, _, err = cli(["compare", str(tmp_path / "c.toml"), "--quick", "--out", str(tmp_path / "o")], capsys)
    assert f"compare.traffic.{key}" in one_line_error(code, err)
    assert _left(tmp_path) == ["c.toml"]


def test_mapreduce_scaling_refuses_what_does_not_fit() -> None:
    from paccp.errors import UserError
    from paccp.traffic.mapreduce import Scaling

    for bad in (1e300, float("nan"), float("inf"), 0.0, -1.0):
        with pytest.raises(UserError, match="size_scale"):
            Scaling(size_scale=bad)
        with pytest.raises(UserError, match="time_scale"):
            Scaling(time_scale=bad)


def _mptcp(tmp_path: Path, edit: Any) -> Path:
    from paccp.experiments import mptcp_bgwc as exp
    from paccp.scenario import to_toml

    sc = copy.deepcopy(exp.bg_scenario(udp=False, quick=True))
    edit(sc)
    path = tmp_path / "s.toml"
    path.write_text(to_toml(sc))
    return path


def _beta(sc: dict[str, Any]) -> None:
    sc["scheme"].update(receive_buffer="dynamic", rcvbuf_beta=1e300)


def _levels(sc: dict[str, Any]) -> None:
    sc["scheme"]["competition_levels"] = {sc["vms"][0]["id"]: 9_000_000_000_000_000_000}


def _unit(sc: dict[str, Any]) -> None:
    sc["scheme"]["unit"] = "1bit"


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (_beta, "scheme.rcvbuf_beta: Input should be less than or equal to 1000"),
        (_levels, "scheme.competition_levels.vm1: A_l must be in 1..1000000"),
        (_unit, "scheme.unit: 1 bit/s makes A_l"),
    ],
)
def test_mptcp_scheme_numbers_refused_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: Any, needle: str
) -> None:
    """rcvbuf_beta = 1e300 failed in pyarrow after the run; an A_l above the weight limit said "omega:
    Value error, ..." after the run, naming no file or field."""
    scen = _mptcp(tmp_path, edit)
    code, _, err = cli(["run", str(scen), "--out", str(tmp_path / "o")], capsys)
    line = one_line_error(code, err)
    assert needle in line and "Value error" not in line and "s.toml" in line
    assert _left(tmp_path) == ["s.toml"]


def test_a_unit_of_1bit_is_fine_where_a_l_is_not_used(tmp_path: Path) -> None:
    from paccp.scenario import load_scenario

    def edit(sc: dict[str, Any]) -> None:
        sc["scheme"].update(unit="1bit", variant="bg_only")

    load_scenario(_mptcp(tmp_path, edit))  # no error: bg_only has no WC subflows


def test_measurement_window_without_a_whole_sample_interval(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The old case of issue 15: warm-up 29 ms of a 30 ms run sampled every 5 ms ended in a ValueError
    traceback after the run."""
    text = SMALL.replace('warmup = "20ms"', 'warmup = "29ms"').replace(
        'sample_interval = "1ms"', 'sample_interval = "5ms"'
    )
    (tmp_path / "s.toml").write_text(text)
    code, _, err = cli(["run", str(tmp_path / "s.toml"), "--out", str(tmp_path / "o")], capsys)
    assert "run.warmup: no whole sample_interval (5 ms)" in one_line_error(code, err)
    assert _left(tmp_path) == ["s.toml"]
    # one whole interval after the warm-up is enough
    (tmp_path / "s.toml").write_text(text.replace('warmup = "29ms"', 'warmup = "25ms"'))
    code, _, err = cli(["run", str(tmp_path / "s.toml"), "--out", str(tmp_path / "o")], capsys)
    assert code == 0, err


def test_validation_messages_have_no_pydantic_prefix() -> None:
    from pydantic import BaseModel, ValidationError, field_validator

    from paccp.errors import validation_error

    class M(BaseModel):
        x: int

        @field_validator("x")
        @classmethod
        def _pos(cls, v: int) -> int:
            if v < 0:
                raise ValueError("must be >= 0")
            return v

    with pytest.raises(ValidationError) as exc:
        M(x=-1)
    assert validation_error(exc.value) == ("x", "must be >= 0")
    assert validation_error(object(), "input") == ("input", "invalid")


def test_compare_validator_message_reads_as_ours(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = (ROOT / "scenarios" / "compare-leafspine-websearch.toml").read_text()
    assert "[compare.traffic]" in text
    (tmp_path / "c.toml").write_text(
        text.replace("[compare.traffic]", "[compare.traffic]\nstarts = [2.0]", 1)
    )
    code, _, err = cli(["compare", str(tmp_path / "c.toml"), "--out", str(tmp_path / "o")], capsys)
    line = one_line_error(code, err)
    assert "compare.traffic: starts: each is a fraction of the run" in line and "Value error" not in line


# ---------------------------------------------------------------------------------------------------
# sweeps: the grid counted before it is expanded; a damaged cache entry is a miss


def test_sweep_grid_counted_before_expanding(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "s.toml").write_text(DUMBBELL.read_text())
    grid = "\n".join(f'"flows.0.x{i}" = [{", ".join(map(str, range(10)))}]' for i in range(8))
    (tmp_path / "sw.toml").write_text(f'[sweep]\nscenario = "s.toml"\nseeds = [1, 2]\n\n[grid]\n{grid}\n')
    t0 = time.monotonic()
    code, _, err = cli(["sweep", str(tmp_path / "sw.toml"), "--out", str(tmp_path / "o")], capsys)
    line = one_line_error(code, err)
    assert "grid: 10 x 10 x 10 x 10 x 10 x 10 x 10 x 10 x 2 = 200,000,000 points; at most 100,000" in line
    assert time.monotonic() - t0 < 10  # counted, not expanded (10^8 points took many GB)
    assert not (tmp_path / "o").exists()


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("sweep")
    (d / "s.toml").write_text(SMALL)
    (d / "sw.toml").write_text('[sweep]\nname = "c"\nscenario = "s.toml"\n')
    res = subprocess.run(
        [sys.executable, "-m", "paccp.cli", "sweep", "sw.toml", "--out", "o", "--workers", "1"],
        cwd=d,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr
    return d


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b'{"params": {', "Expecting property name"),
        (b"\xff\xfe\x00", "can't decode byte 0xff"),
        (b"[1, 2]", "a JSON list, not an object"),
        (b"{}", "no 'params'"),
    ],
)
def test_damaged_sweep_cache_entry_is_a_miss(
    swept: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], data: bytes, why: str
) -> None:
    """Four exception types before (JSONDecodeError, UnicodeDecodeError, TypeError, KeyError); now a
    warning naming the file, the point computed again, and its file rewritten."""
    import shutil

    work = tmp_path / "w"
    shutil.copytree(swept, work)
    (entry,) = (work / "o" / "cache").glob("*.json")
    good = json.loads(entry.read_text())
    entry.write_bytes(data)
    old = os.getcwd()
    os.chdir(work)
    try:
        code, _, err = cli(["sweep", "sw.toml", "--out", "o", "--workers", "1"], capsys)
    finally:
        os.chdir(old)
    assert code == 0, err
    (line,) = [x for x in err.splitlines() if x.startswith("paccp: warning:")]
    assert f"sweep cache o/cache/{entry.name}: unreadable (" in line and why in line
    again = json.loads(entry.read_text())
    assert {k: v for k, v in again.items() if k != "wall_s"} == {
        k: v for k, v in good.items() if k != "wall_s"
    }


# ---------------------------------------------------------------------------------------------------
# crosscheck and testbed arguments


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--out", "{F}"], "--out {F}: exists and is not a directory"),
        (["--min-rto-ms", "nan"], "--min-rto-ms must be a finite number, got nan"),
        (["--min-rto-ms", "inf"], "--min-rto-ms must be a finite number, got inf"),
        (["--min-rto-ms", "0"], "--min-rto-ms must be in (0"),
        (["--warmup-ms", "-1"], "--warmup-ms must be in [0"),
        (["--duration-ms", "9000000000000"], "--duration-ms must be in (0"),
        (["--kernel-duration", "0"], "--kernel-duration must be an integer in [1, 3600], got 0"),
        (["--kernel-duration", "-1"], "--kernel-duration must be an integer in [1, 3600], got -1"),
        (["--kernel-duration", "100000000"], "--kernel-duration must be an integer in [1, 3600]"),
    ],
)
def test_crosscheck_arguments(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], needle: str
) -> None:
    """Checked before anything runs (--kernel-duration 0 used to start the kernel dumbbell as root and
    leave its directory; -1 ended in a traceback, a huge value ran for hours)."""
    f = tmp_path / "F"
    f.write_text("x")
    argv = ["crosscheck", "--out", str(tmp_path / "o"), "--only", "", *[a.format(F=f) for a in args]]
    code, _, err = cli(argv, capsys)
    assert needle.format(F=f) in one_line_error(code, err)
    assert _left(tmp_path) == ["F"]


def test_crosscheck_output_is_staged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """crosscheck.json appears in a directory moved into place; the ns-3 result cache is carried over
    into the new directory (hard links), not lost; no temporary directory stays."""
    out = tmp_path / "o"
    (out / "ns3-cache").mkdir(parents=True)
    (out / "ns3-cache" / "k.json").write_text("{}")
    (out / "crosscheck.json").write_text("{}")
    (out / "stale").write_text("from an older run")
    code, stdout, err = cli(["crosscheck", "--out", str(out), "--only", "", "--no-kernel"], capsys)
    assert code == 0, err
    assert f"wrote {out / 'crosscheck.json'}" in stdout
    assert _left(out) == ["crosscheck.json", "ns3-cache"]
    assert (out / "ns3-cache" / "k.json").read_text() == "{}"
    assert json.loads((out / "crosscheck.json").read_text())["ns3"] == {}
    assert _left(tmp_path) == ["o"]


@pytest.mark.parametrize("cmd", [["dumbbell"], ["fig7"]])
def test_testbed_out_where_no_directory_can_be(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], cmd: list[str]
) -> None:
    """OSError tracebacks before; checked before any namespace is made."""
    (tmp_path / "F").write_text("x")
    for out, needle in (("/proc/x", "--out /proc/x: "), (str(tmp_path / "F" / "x"), "is not a directory")):
        code, _, err = cli(["testbed", *cmd, "--out", out], capsys)
        assert needle in one_line_error(code, err)
    assert _left(tmp_path) == ["F"]


# ---------------------------------------------------------------------------------------------------
# kill -9: what a killed staged command leaves, and what the next run does with it


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_remove_stale_only_touches_dead_processes(tmp_path: Path) -> None:
    from paccp.common.outdir import remove_stale

    dead, live = _dead_pid(), os.getppid()
    (tmp_path / f".o.tmp-{dead}-abc").mkdir()
    (tmp_path / f".o.tmp-{dead}-abc" / "flows.csv").write_text("partial")
    (tmp_path / f".k.json.tmp-{dead}-xyz").write_text("half")
    (tmp_path / f".o.tmp-{live}-abc").mkdir()  # another command building beside us
    (tmp_path / f".r.old-{dead}-q").mkdir()  # a swap killed between its renames: r is missing
    (tmp_path / f".r.old-{dead}-q" / "summary.json").write_text("{}")
    (tmp_path / "o").mkdir()
    (tmp_path / ".hidden").write_text("not ours")
    remove_stale(tmp_path)
    assert _left(tmp_path) == [".hidden", f".o.tmp-{live}-abc", "o", "r"]
    assert (tmp_path / "r" / "summary.json").read_text() == "{}"


def _paccp(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "paccp.cli", *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )


def test_kill_9_mid_run_then_the_next_run_cleans_up(tmp_path: Path) -> None:
    """SIGKILL while ``paccp run`` builds its directory leaves ``.o.tmp-PID-*`` (a killed process cannot
    clean up); the next run beside it removes it and writes a complete ``o``."""
    long = tmp_path / "long.toml"
    long.write_text(DUMBBELL.read_text().replace('duration = "100ms"', 'duration = "5s"'))
    short = tmp_path / "short.toml"
    short.write_text(SMALL)
    proc = _paccp("run", str(long), "--out", str(tmp_path / "o"))
    deadline = time.monotonic() + 120
    while not list(tmp_path.glob(f".o.tmp-{proc.pid}-*")):
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.stderr else ""
        time.sleep(0.02)
    time.sleep(0.3)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL
    assert [p.name for p in tmp_path.glob(".o.tmp-*")], "the kill left its staging directory"
    assert not (tmp_path / "o").exists()
    done = _paccp("run", str(short), "--out", str(tmp_path / "o"))
    assert done.wait(timeout=600) == 0, done.stderr.read() if done.stderr else ""
    assert _left(tmp_path) == ["long.toml", "o", "short.toml"]
    assert (tmp_path / "o" / "summary.json").is_file()


def test_compare_purchase_the_book_cannot_price_fails_before_any_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A SoftBW guarantee at or above the book's capacity failed in the aggregation after every run (one
    line naming no file or purchase, and a partial output directory); now it is refused first."""
    text = (ROOT / "scenarios" / "compare-overcommit.toml").read_text()
    assert 'guarantee = "700Mbit"' in text
    (tmp_path / "c.toml").write_text(text.replace('guarantee = "700Mbit"', 'guarantee = "70Gbit"', 1))
    code, _, err = cli(["compare", str(tmp_path / "c.toml"), "--quick", "--out", str(tmp_path / "o")], capsys)
    line = one_line_error(code, err)
    assert "c.toml: compare.purchases: 'gold' (scheme softbw, price book 'default')" in line
    assert "below the capacity C = 10Gbit" in line
    assert _left(tmp_path) == ["c.toml"]
