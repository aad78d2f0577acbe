"""Datapath tests need root, BTF, bpftool/clang, network namespaces and iperf3: skip with a reason if not."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest


def missing() -> str | None:
    if os.geteuid() != 0:
        return "needs root (BPF struct_ops, network namespaces, cgroups)"
    if not Path("/sys/kernel/btf/vmlinux").exists():
        return "kernel without BTF: no BPF struct_ops"
    for tool in ("bpftool", "clang", "gcc", "make", "iperf3", "ip", "tc"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (tools/install-system-deps.sh)"
    return None


@pytest.fixture(scope="session")
def loaded() -> Iterator[None]:
    """paccp registered for the session (unloaded at the end only if this session loaded it)."""
    reason = missing()
    if reason:
        pytest.skip(reason)
    from paccp.datapath.paccp import lifecycle

    if lifecycle.is_loaded() and not lifecycle.is_current():
        lifecycle.unload()  # loaded by another version of paccp (older map layout): these tests need this one
    fresh = lifecycle.load()
    yield
    if fresh:
        lifecycle.unload()
