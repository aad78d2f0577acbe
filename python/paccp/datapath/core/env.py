"""The datapath's environment: root, BTF and tools, bpffs and cgroup v2 mounts, the BPF build and the
libbpf loader (``bpf/build/paccp_loader``) that loads an object and pins its maps and programs."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

from paccp.errors import EnvironmentUnsupported

REPO_BPF = Path(os.environ.get("PACCP_BPF_DIR", Path(__file__).resolve().parents[4] / "bpf"))
BUILD = REPO_BPF / "build"


def run(cmd: list[str], what: str) -> subprocess.CompletedProcess[str]:
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise EnvironmentUnsupported(
            f"{what}: {cmd[0]} is not installed (tools/install-system-deps.sh)"
        ) from None
    if res.returncode != 0:
        lines = [ln for ln in (res.stderr or res.stdout).strip().splitlines() if ln.strip()]
        detail = lines[-1] if lines else f"exit {res.returncode}"
        raise EnvironmentUnsupported(f"{what} failed: {detail}")
    return res


def require_env() -> None:
    """Fail with a clear one-line message when root, BTF or the tools are missing."""
    if os.geteuid() != 0:
        raise EnvironmentUnsupported("the datapath needs root (CAP_BPF, CAP_NET_ADMIN, CAP_SYS_ADMIN)")
    if not Path("/sys/kernel/btf/vmlinux").exists():
        raise EnvironmentUnsupported(
            "the kernel has no BTF (/sys/kernel/btf/vmlinux): struct_ops is unavailable"
        )
    for tool in ("bpftool", "clang", "make", "gcc"):
        if shutil.which(tool) is None:
            raise EnvironmentUnsupported(f"{tool} is not installed (run tools/install-system-deps.sh)")


def _mounts() -> list[tuple[str, str, str]]:
    out = []
    for line in Path("/proc/mounts").read_text().splitlines():
        parts = line.split()
        if len(parts) >= 3:
            out.append((parts[0], parts[1], parts[2]))
    return out


def ensure_bpffs() -> None:
    """Mount bpffs at /sys/fs/bpf when it is not mounted."""
    if any(fs == "bpf" and mnt == "/sys/fs/bpf" for _d, mnt, fs in _mounts()):
        return
    run(["mount", "-t", "bpf", "bpf", "/sys/fs/bpf"], "mounting bpffs")


def cgroup2_root() -> Path:
    """The cgroup v2 mount point, found from /proc/mounts (one is mounted under /run when none exists)."""
    for _d, mnt, fs in _mounts():
        if fs == "cgroup2":
            return Path(mnt)
    target = Path("/run/paccp/cgroup2")
    target.mkdir(parents=True, exist_ok=True)
    run(["mount", "-t", "cgroup2", "none", str(target)], "mounting cgroup2")
    return target


def load_pinned(obj: str, pin_dir: str, what: str) -> None:
    """Build if needed, then load ``bpf/build/OBJ`` with the loader and pin its maps and programs in
    PIN_DIR (0700, pins 0600, root only); stale pins of a crashed load are removed first, and a failed
    load leaves no directory behind."""
    exe = loader()
    shutil.rmtree(pin_dir, ignore_errors=True)
    os.makedirs(pin_dir, mode=0o700)
    try:
        run([exe, "load", str(BUILD / obj), pin_dir], f"loading {what}")
    except EnvironmentUnsupported:
        shutil.rmtree(pin_dir, ignore_errors=True)
        raise
    for name in os.listdir(pin_dir):
        os.chmod(Path(pin_dir, name), 0o600)


def build() -> None:
    """Build bpf/build/{paccp.bpf.o,paccp_loader} (make is incremental)."""
    if not (REPO_BPF / "Makefile").exists():
        raise EnvironmentUnsupported(f"BPF sources not found at {REPO_BPF} (set PACCP_BPF_DIR)")
    run(["make", "-s", "-C", str(REPO_BPF)], "building the BPF objects")


def loader() -> str:
    """This checkout's ``paccp_loader``, built first: unloading also needs it, and what is loaded may
    have been loaded from another checkout (whose build this one never ran)."""
    build()
    return str(BUILD / "paccp_loader")


@contextlib.contextmanager
def lock() -> Iterator[None]:
    """Serialise load/unload between concurrent paccp processes (testbeds started in parallel)."""
    path = Path(os.environ.get("PACCP_STATE_DIR", "/run/paccp")) / "load.lock"
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with path.open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
