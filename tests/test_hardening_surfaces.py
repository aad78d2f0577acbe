"""Targeted tests of the second hardening pass (issue 30), one or more per class: billing is in
tests/pricing/test_billing_hardening.py; here the datapath scope, the engine's memory bound, atomic
outputs, refused options, and the tracebacks and unclear errors of the issue. The property suite is
tests/test_hardening_surfaces_props.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from paccp.cli import main
from paccp.errors import UserError


def cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """The real entry point in this process: (exit code, stdout, stderr)."""
    try:
        main(args)
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def one_line_error(code: int, err: str) -> str:
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("paccp: error: "), err
    assert "Traceback" not in err
    return lines[0]


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
    from paccp.datapath.core import cgroup_path_in

    with pytest.raises(UserError, match=needle.replace("(", r"\(")) as exc:
        cgroup_path_in(path, cg_root, host_wide=host_wide)
    assert "--cgroup" in exc.value.message and "\n" not in exc.value.message


def test_cgroup_resolver_accepts_paths_inside(cg_root: Path) -> None:
    from paccp.datapath.core import cgroup_path_in

    real = cg_root.resolve()
    assert cgroup_path_in("vm1", cg_root) == real / "vm1"
    assert cgroup_path_in("/deep/vm2", cg_root) == real / "deep" / "vm2"
    assert cgroup_path_in(str(cg_root / "vm1"), cg_root) == real / "vm1"
    assert cgroup_path_in("/", cg_root, host_wide=True) == real


class KernelSpy:
    """Records every call that would change kernel state (maps, attachments, loads, mounts, commands)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, root: Path) -> None:
        from paccp.datapath import bpfsys, core

        self.calls: list[str] = []
        for mod, name in [
            (bpfsys, "update"), (bpfsys, "delete"), (bpfsys, "obj_get"), (core, "attach_cgroup_prog"),
            (core, "detach_cgroup_prog"), (core, "load_pinned"), (core, "ensure_bpffs"), (core, "_run"),
            (core, "_remember"), (core, "unload"),
        ]:  # fmt: skip
            monkeypatch.setattr(mod, name, self._spy(f"{mod.__name__}.{name}"))
        monkeypatch.setattr(core.subprocess, "run", self._spy("subprocess.run"))
        monkeypatch.setattr(core, "require_env", lambda: None)  # as if root with BTF and the tools
        monkeypatch.setattr(core, "cgroup2_root", lambda: root)

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
    from paccp.datapath.core import check_pair

    assert check_pair("1000Tbit", limits.MAX_DATAPATH_OMEGA) == (
        limits.MAX_RATE_BPS,
        limits.MAX_DATAPATH_OMEGA,
    )
    with pytest.raises(UserError, match="--theta"):
        check_pair("1e30bit", 1.0)
