"""Targeted tests of the second hardening pass (issue 30), one or more per class: billing is in
tests/pricing/test_billing_hardening.py; here the datapath scope, the engine's memory bound, atomic
outputs, refused options, and the tracebacks and unclear errors of the issue. The property suite is
tests/test_hardening_surfaces_props.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cli_run import cli, one_line_error

from paccp.errors import UserError

# ---------------------------------------------------------------------------------------------------
# datapath scope: one cgroup resolver, every argument checked before any kernel state changes


@pytest.fixture()
def cg_root(tmp_path: Path) -> Path:
    """A fake cgroup v2 tree: root/{cgroup.procs, vm1/, deep/vm2/}, a v1-like sibling and an escaping link."""
    root = tmp_path / "cgroup2"
    for d in (root, root / "vm1", root / "deep" / "vm2", tmp_path / "cpu"):
        d.mkdir(parents=True)
        (d / "cgroup.procs").write_text("")
    (root / "escape").symlink_to(tmp_path / "cpu")
    return root


@pytest.mark.parametrize(
    ("path", "host_wide", "needle"),
    [
        ("../cpu", False, "'..' is not allowed"),
        ("vm1/../../cpu", False, "'..' is not allowed"),
        (f"/{'x'}/../cpu", False, "'..' is not allowed"),
        ("/", False, "--host-wide"),
        ("", False, "--cgroup is required"),
        ("escape", False, "outside the cgroup v2 tree"),
        ("nope", False, "no such cgroup v2 directory"),
        ("vm1\n", False, "control characters"),
    ],
)
def test_cgroup_resolver_refuses_escapes(cg_root: Path, path: str, host_wide: bool, needle: str) -> None:
    from paccp.datapath.core.cgroups import cgroup_path_in

    with pytest.raises(UserError, match=needle.replace("(", r"\(")) as exc:
        cgroup_path_in(path, cg_root, host_wide=host_wide)
    assert "--cgroup" in exc.value.message and "\n" not in exc.value.message


def test_cgroup_resolver_accepts_paths_inside(cg_root: Path) -> None:
    from paccp.datapath.core.cgroups import cgroup_path_in

    real = cg_root.resolve()
    assert cgroup_path_in("vm1", cg_root) == real / "vm1"
    assert cgroup_path_in("/deep/vm2", cg_root) == real / "deep" / "vm2"
    assert cgroup_path_in(str(cg_root / "vm1"), cg_root) == real / "vm1"
    assert cgroup_path_in("/", cg_root, host_wide=True) == real


class KernelSpy:
    """Records every call that would change kernel state (maps, attachments, loads, mounts, commands)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, root: Path) -> None:
        import subprocess

        from paccp.datapath.core import bpfsys, cgroups, env
        from paccp.datapath.paccp import lifecycle

        self.calls: list[str] = []
        for mod, name in [
            (bpfsys, "update"), (bpfsys, "delete"), (bpfsys, "obj_get"), (cgroups, "attach_cgroup_prog"),
            (cgroups, "detach_cgroup_prog"), (env, "load_pinned"), (env, "ensure_bpffs"), (env, "run"),
            (cgroups, "remember"), (lifecycle, "unload"),
        ]:  # fmt: skip
            monkeypatch.setattr(mod, name, self._spy(f"{mod.__name__}.{name}"))
        monkeypatch.setattr(subprocess, "run", self._spy("subprocess.run"))
        monkeypatch.setattr(env, "require_env", lambda: None)  # as if root with BTF and the tools
        monkeypatch.setattr(env, "cgroup2_root", lambda: root)

    def _spy(self, name: str) -> Any:
        def record(*_a: object, **_k: object) -> None:
            self.calls.append(name)
            raise RuntimeError(f"kernel state touched: {name}")

        return record


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["datapath", "vm", "set", "--cgroup", "vm1", "--theta", "1e30bit"], "--theta"),
        (["datapath", "vm", "set", "--cgroup", "vm1", "--theta", "-5Mbit"], "--theta: rate must not be neg"),
        (["datapath", "vm", "set", "--cgroup", "vm1", "--theta", "2000Tbit"], "--theta"),
        (["datapath", "vm", "set", "--cgroup", "vm1", "--omega", "nan"], "--omega"),
        (["datapath", "vm", "set", "--cgroup", "vm1", "--omega", "1e300"], "--omega"),
        (["datapath", "vm", "set", "--cgroup", "../cpu"], "'..' is not allowed"),
        (["datapath", "vm", "set", "--cgroup", "/"], "--host-wide"),
        (["datapath", "vm", "set", "--cgroup", "escape"], "outside the cgroup v2 tree"),
        (["datapath", "vm", "clear", "--cgroup", "../cpu"], "'..' is not allowed"),
        (["datapath", "load", "--rcos", "nan"], "--rcos"),
        (["datapath", "load", "--rcos", "inf"], "--rcos"),
        (["datapath", "load", "--rcos", "0.5"], "--rcos"),
        (["datapath", "flow", "set", "--port", "80", "--cgroup", "vm1", "--theta", "1e30bit"], "--theta"),
        (["datapath", "flow", "set", "--port", "80", "--cgroup", "/"], "--host-wide"),
        (["datapath", "flow", "set", "--port", "80", "--cgroup", "../cpu"], "'..'"),
        (["datapath", "flow", "set", "--port", "99999", "--host-wide"], "--port"),
        (["datapath", "flow", "set", "--port", "80"], "needs an owner"),
        (["datapath", "flow", "set", "--pid", "1", "--fd", "-1"], "--fd"),
    ],
)  # fmt: skip
def test_datapath_arguments_fail_before_any_kernel_state_changes(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    cg_root: Path,
    args: list[str],
    needle: str,
) -> None:
    spy = KernelSpy(monkeypatch, cg_root)
    code, _, err = cli(args, capsys)
    assert needle in one_line_error(code, err)
    assert spy.calls == []


def test_datapath_limits_are_the_limits_module() -> None:
    """The pair the checks accept packs into the maps (u64 theta, u32 omega Q20) at the limits."""
    from paccp import limits
    from paccp.datapath.paccp.params import check_pair

    assert check_pair("1000Tbit", limits.MAX_DATAPATH_OMEGA) == (
        limits.MAX_RATE_BPS,
        limits.MAX_DATAPATH_OMEGA,
    )
    with pytest.raises(UserError, match="--theta"):
        check_pair("1e30bit", 1.0)


# ---------------------------------------------------------------------------------------------------
# engine memory: no allocation proportional to a rate; the work estimated and refused beyond the limit


def _udp_scenario(tmp_path: Path, rate: str, duration: str) -> Path:
    from paccp.experiments import mptcp_bgwc as exp
    from paccp.scenario import to_toml

    sc = exp.bg_scenario(udp=True, quick=True)
    sc["scheme"]["udp"] = sc["scheme"]["udp"][:1]
    sc["scheme"]["udp"][0]["rate"] = rate
    sc["run"]["duration"] = duration
    path = tmp_path / "udp.toml"
    path.write_text(to_toml(sc))
    return path


def test_a_udp_flow_far_faster_than_its_nic_runs_in_bounded_memory(tmp_path: Path) -> None:
    """10 Tbit/s through a 1 Gbit/s VM shaper: the lossless host queue used to keep every datagram
    (5 GB here; 100 Tbit/s aborted); now the host drops what its queue has no room for."""
    import subprocess
    import sys

    scen = _udp_scenario(tmp_path, "10Tbit", "150ms")
    args = ["run", str(scen), "--out", str(tmp_path / "o")]
    code = (
        "import resource, sys; from paccp.cli import main\n"
        "try:\n    main(sys.argv[1:])\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
        "print('maxrss', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
    )
    res = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    rss_kb = int(res.stdout.split("maxrss")[-1])
    assert rss_kb < 1_000_000, rss_kb  # about 160 MB


def test_udp_work_beyond_the_limit_is_refused_with_the_estimate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scen = _udp_scenario(tmp_path, "100Tbit", "200ms")
    code, _, err = cli(["run", str(scen), "--out", str(tmp_path / "o")], capsys)
    line = one_line_error(code, err)
    assert "scheme.udp[0].rate" in line and "1.67e+09 datagrams" in line
    assert not (tmp_path / "o").exists()


# ---------------------------------------------------------------------------------------------------
# atomic outputs: every experiment's directory built beside its place; refused options


def _reproduce(out: Path, *extra: str) -> Any:
    import subprocess
    import sys

    code = "import sys; from paccp.cli import main; main(sys.argv[1:])"
    args = ["reproduce", "softbw-share", "--quick", "--out", str(out), *extra]
    return subprocess.Popen(
        [sys.executable, "-c", code, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )


def test_kill_9_mid_reproduce_leaves_nothing_half_written(tmp_path: Path) -> None:
    """softbw-share (a peer experiment that writes its own directory) is staged by reproduce: SIGKILL
    while it runs leaves no DIR/softbw-share/ (before: empty or only summary.json), and a previous
    complete run's directory is left as it was."""
    import signal
    import time

    out = tmp_path / "D"

    def kill_while_staged() -> None:
        proc = _reproduce(out)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not list(out.glob(".softbw-share.tmp-*/.stage/softbw-share")):
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.02)
        time.sleep(0.5)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert proc.returncode == -signal.SIGKILL

    kill_while_staged()
    assert not (out / "softbw-share").exists()
    proc = _reproduce(out)  # a complete run, then a killed one over it
    assert proc.wait(timeout=600) == 0
    before = {p.name: p.read_bytes() for p in (out / "softbw-share").iterdir()}
    assert "summary.json" in before
    kill_while_staged()
    assert {p.name: p.read_bytes() for p in (out / "softbw-share").iterdir()} == before


@pytest.mark.parametrize(
    "exp", ["softbw-share", "softbw-short", "softbw-converge", "mptcp-bg", "mptcp-sched"]
)
def test_duration_is_refused_where_an_experiment_ignores_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], exp: str
) -> None:
    code, _, err = cli(["reproduce", exp, "--duration", "20ms", "--out", str(tmp_path / "D")], capsys)
    assert f"--duration: experiment {exp!r} sets its own run lengths" in one_line_error(code, err)
    assert not (tmp_path / "D").exists()


def test_softbw_oc_duration_is_bounded_before_allocating(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--duration 1e9s asked for 5.8 TiB and left its directory; now refused with the estimate."""
    out = tmp_path / "D"
    code, _, err = cli(["reproduce", "softbw-oc", "--quick", "--duration", "1e9s", "--out", str(out)], capsys)
    assert "--duration: softbw-oc would draw" in one_line_error(code, err)
    assert not (out / "softbw-oc").exists() and not [p for p in out.iterdir() if p.name != "softbw-oc"]


# ---------------------------------------------------------------------------------------------------
# comparison files: checked again once compare.quick.set is applied; the window fits the run

LEAFSPINE = Path(__file__).resolve().parents[1] / "scenarios" / "compare-leafspine-websearch.toml"
QUICK_SET = 'set = { "topology.hosts_per_leaf" = 8,'


def _qs(extra: str) -> tuple[str, str]:
    return QUICK_SET, QUICK_SET.replace("{ ", "{ " + extra + ", ")


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (_qs('"softbw.overcommit" = 8'), "[softbw] is not allowed"),
        (_qs('"vms" = []'), "[vms] is not allowed"),
        (_qs('"arrivals.9.stop" = "1ms"'), "compare.quick.set"),
        (('"run.warmup" = "4ms"', '"run.warmup" = "18ms"'), "compare.window"),
        (('window = "5ms"', 'window = "10s"'), "compare.window"),
    ],
)  # fmt: skip
def test_comparison_file_checked_after_quick_set(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: tuple[str, str], needle: str
) -> None:
    text = LEAFSPINE.read_text()
    assert edit[0] in text
    f = tmp_path / "c.toml"
    f.write_text(text.replace(*edit, 1))
    out = tmp_path / "o"
    code, _, err = cli(["compare", str(f), "--quick", "--out", str(out)], capsys)
    line = one_line_error(code, err)
    assert needle in line and "grid:" not in line
    assert not out.exists()


def test_compare_workers_zero_leaves_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "o"
    code, _, err = cli(["compare", str(LEAFSPINE), "--quick", "--workers", "0", "--out", str(out)], capsys)
    assert "--workers" in one_line_error(code, err)
    assert not out.exists()
