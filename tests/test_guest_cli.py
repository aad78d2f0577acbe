"""``paccp testbed kvm-guest``: bad options are one-line errors (no root, no QEMU needed)."""

from __future__ import annotations

import pytest
from cli_run import cli, one_line_error


@pytest.mark.parametrize(
    ("args", "want"),
    [
        (["--guest", "bbr:8:1"], "--guest must look like CC:CONNECTIONS:OMEGA"),
        (["--ns", "reno:x:1"], "--ns: connections must be an integer"),
        (["--guest", "cubic:99:1"], "--guest: connections must be in 1..64"),
        (["--accel", "hvf"], "--accel must be tcg or kvm"),
        (["--rate", "5Gbit"], "--rate must be in 1Mbit..1Gbit"),
    ],
)
def test_bad_options_are_one_line_errors(
    args: list[str], want: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _out, err = cli(["testbed", "kvm-guest", "--out", "/tmp/paccp-kvm-guest-unused", *args], capsys)
    assert want in one_line_error(code, err)


def test_missing_qemu_or_kvm_is_a_one_line_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from paccp.datapath.guest import image, vm
    from paccp.errors import EnvironmentUnsupported

    monkeypatch.setattr(image.shutil, "which", lambda _name: None)
    with pytest.raises(EnvironmentUnsupported, match="qemu-system-x86_64 is not installed"):
        vm.require("tcg")
    monkeypatch.setattr(image.shutil, "which", lambda _name: "/usr/bin/qemu-system-x86_64")
    monkeypatch.setattr(vm.os, "access", lambda _path, _mode: False)
    with pytest.raises(EnvironmentUnsupported, match="/dev/kvm is missing"):
        vm.require("kvm")
