"""Load/unload the PACCP BPF congestion control and manage its parameters and metering maps.

The BPF side lives in ``bpf/`` (built with ``make -C bpf`` on first use). Loading runs the small libbpf
loader ``bpf/build/paccp_loader``, which registers the struct_ops ``paccp`` and pins every map and the
sockops program under :data:`PIN_DIR` (mode 0600, root). Everything else talks to the pinned maps directly
through ``bpf(2)`` (:mod:`paccp.datapath.bpfsys`); cgroup attachment uses ``bpftool``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from paccp import limits
from paccp.datapath import bpfsys
from paccp.datapath.maps import (
    GLOBAL,
    I32,
    KIND_FLOW,
    KIND_VM,
    PARAMS,
    Q20,
    RULE_KEY,
    SLICE,
    SLICE_KEY,
    U32,
    U64,
    VM_STATE,
    FlowRec,
    SliceRec,
    VmState,
    omega_to_q20,
    pack_params,
    q20_to_omega,
)
from paccp.errors import EnvironmentUnsupported, UserError

PIN_DIR = os.environ.get("PACCP_PIN_DIR", "/sys/fs/bpf/paccp")
REPO_BPF = Path(os.environ.get("PACCP_BPF_DIR", Path(__file__).resolve().parents[3] / "bpf"))
BUILD = REPO_BPF / "build"
CC_NAME = "paccp"
SOCKOPS_NAME = "paccp_sockops"
MAP_NAMES = (
    "paccp_sk_par",
    "paccp_rules",
    "paccp_gone",
    "paccp_nrules",
    "paccp_vm_cfg",
    "paccp_vm_state",
    "paccp_flows",
    "paccp_slices",
    "paccp_global",
)
# every pin of this version's layout: a datapath loaded by an older paccp lacks some of them
PINS = (*MAP_NAMES, "paccp_ops", "paccp_sockops", "paccp_cc_guard", "paccp_cg_rmdir_link")
HOST_TENANT = "(host)"  # tenant of flows whose socket is in no VM cgroup


# --- environment ------------------------------------------------------------------------------------


def _run(cmd: list[str], what: str) -> subprocess.CompletedProcess[str]:
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
    _run(["mount", "-t", "bpf", "bpf", "/sys/fs/bpf"], "mounting bpffs")


def cgroup2_root() -> Path:
    """The cgroup v2 mount point, found from /proc/mounts (one is mounted under /run when none exists)."""
    for _d, mnt, fs in _mounts():
        if fs == "cgroup2":
            return Path(mnt)
    target = Path("/run/paccp/cgroup2")
    target.mkdir(parents=True, exist_ok=True)
    _run(["mount", "-t", "cgroup2", "none", str(target)], "mounting cgroup2")
    return target


def load_pinned(obj: str, pin_dir: str, what: str) -> None:
    """Build if needed, then load ``bpf/build/OBJ`` with the loader and pin its maps and programs in
    PIN_DIR (0700, pins 0600, root only); stale pins of a crashed load are removed first, and a failed
    load leaves no directory behind."""
    exe = loader()
    shutil.rmtree(pin_dir, ignore_errors=True)
    os.makedirs(pin_dir, mode=0o700)
    try:
        _run([exe, "load", str(BUILD / obj), pin_dir], f"loading {what}")
    except EnvironmentUnsupported:
        shutil.rmtree(pin_dir, ignore_errors=True)
        raise
    for name in os.listdir(pin_dir):
        os.chmod(Path(pin_dir, name), 0o600)


def build() -> None:
    """Build bpf/build/{paccp.bpf.o,paccp_loader} (make is incremental)."""
    if not (REPO_BPF / "Makefile").exists():
        raise EnvironmentUnsupported(f"BPF sources not found at {REPO_BPF} (set PACCP_BPF_DIR)")
    _run(["make", "-s", "-C", str(REPO_BPF)], "building the BPF objects")


def loader() -> str:
    """This checkout's ``paccp_loader``, built first: unloading also needs it, and what is loaded may
    have been loaded from another checkout (whose build this one never ran)."""
    build()
    return str(BUILD / "paccp_loader")


# --- load / unload / status ---------------------------------------------------------------------------


def is_loaded() -> bool:
    """True when the struct_ops is registered and its maps are pinned."""
    avail = Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split()
    return CC_NAME in avail and Path(PIN_DIR, "paccp_ops").exists()


def is_current() -> bool:
    """True when what is pinned has this version's layout (every pin of :data:`PINS` exists)."""
    return all(Path(PIN_DIR, name).exists() for name in PINS)


@contextlib.contextmanager
def _lock() -> Iterator[None]:
    """Serialise load/unload between concurrent paccp processes (testbeds started in parallel)."""
    path = Path(os.environ.get("PACCP_STATE_DIR", "/run/paccp")) / "load.lock"
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with path.open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def load(rcos: float = 3.0) -> bool:
    """Build if needed, register ``paccp`` and pin its maps; return False when it was already loaded."""
    rcos = check_rcos(rcos)  # before anything is loaded (nan passed a `< 1` check)
    require_env()
    with _lock():
        return _load(rcos)


def _load(rcos: float) -> bool:
    ensure_bpffs()
    if is_loaded():
        if not is_current():
            raise EnvironmentUnsupported(
                f"paccp is loaded with another map layout (an older version; {PIN_DIR} lacks some of "
                f"{', '.join(PINS)}): run `paccp datapath unload` first"
            )
        return False
    avail = Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split()
    if CC_NAME in avail:
        raise EnvironmentUnsupported(
            f"a congestion control named {CC_NAME!r} is registered but {PIN_DIR} is missing "
            "(loaded by someone else?); unregister it with `bpftool struct_ops unregister name paccp_ops`"
        )
    load_pinned("paccp.bpf.o", PIN_DIR, "paccp")
    with Maps() as m:
        cur = bpfsys.lookup(m.fd("paccp_global"), U32.pack(0), GLOBAL.size) or GLOBAL.pack(0, 0)
        _r, nxt = GLOBAL.unpack(cur)
        bpfsys.update(m.fd("paccp_global"), U32.pack(0), GLOBAL.pack(round(rcos * Q20), nxt))
    return True


# cgroup programs of a VM: (bpftool attach type, pinned program name)
CGROUP_PROGS = (("sock_ops", SOCKOPS_NAME), ("setsockopt", "paccp_cc_guard"))


def _same_type(bpftool_type: str, attach_type: str) -> bool:
    return bpftool_type in (attach_type, f"cgroup_{attach_type}")


def attached_cgroups(progs: tuple[tuple[str, str], ...] = CGROUP_PROGS) -> list[tuple[str, str, str]]:
    """(cgroup path, attach type, program name) of every attachment of ``progs`` (``bpftool cgroup tree``)."""
    root = cgroup2_root()
    res = subprocess.run(["bpftool", "-j", "cgroup", "tree", str(root)], capture_output=True, text=True)
    if res.returncode != 0 or not res.stdout.strip():
        return []
    out: set[tuple[str, str, str]] = set()
    for entry in json.loads(res.stdout):
        for prog in entry.get("programs", []):
            for at, name in progs:
                if _same_type(prog.get("attach_type", ""), at) and prog.get("name") == name:
                    out.add((entry["cgroup"], at, name))
    return sorted(out)


def attach_cgroup_prog(path: Path, attach_type: str, pinned: Path) -> None:
    """Attach a pinned cgroup program (idempotent, multi-attach)."""
    res = subprocess.run(["bpftool", "-j", "cgroup", "show", str(path)], capture_output=True, text=True)
    if res.returncode == 0 and res.stdout.strip():
        for prog in json.loads(res.stdout):
            if _same_type(prog.get("attach_type", ""), attach_type) and prog.get("name") == pinned.name[:15]:
                return
    _run(
        ["bpftool", "cgroup", "attach", str(path), attach_type, "pinned", str(pinned), "multi"],
        f"attaching {pinned.name} to {path}",
    )


def detach_cgroup_prog(path: Path | str, attach_type: str, pinned: Path) -> None:
    subprocess.run(
        ["bpftool", "cgroup", "detach", str(path), attach_type, "pinned", str(pinned)], capture_output=True
    )


def unload() -> bool:
    """Detach the sockops program everywhere, unregister ``paccp`` and remove the pins.

    Live connections that use paccp keep running it until they close (the kernel holds a reference).
    Returns False when nothing was loaded.
    """
    require_env()
    with _lock():
        return _unload()


def _unload() -> bool:
    if not Path(PIN_DIR).exists():
        return False
    for cg, at, name in attached_cgroups():
        detach_cgroup_prog(cg, at, Path(PIN_DIR, name))
    if Path(PIN_DIR, "paccp_ops").exists():
        _run([loader(), "unload", PIN_DIR, "paccp_ops"], "unregistering paccp")
    shutil.rmtree(PIN_DIR, ignore_errors=True)
    return True


def status() -> dict[str, Any]:
    """A summary: loaded or not, pin dir, attached cgroups, configured VMs and rules, live flows."""
    avail = Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split()
    st: dict[str, Any] = {"loaded": False, "registered": CC_NAME in avail, "pin_dir": PIN_DIR}
    if not is_loaded():
        return st
    st["loaded"] = True
    with Maps() as m:
        st["rcos"] = float(
            GLOBAL.unpack(m.lookup("paccp_global", U32.pack(0), GLOBAL.size) or bytes(GLOBAL.size))[0] / Q20
        )
        reap(m)
        st["vms"] = [v.__dict__ for v in list_vms(m)]
        st["rules"] = list_rules(m)
        fl = list_flows(m)
        st["flows_live"] = sum(1 for f in fl if not f.ended)
        st["flows_ended"] = sum(1 for f in fl if f.ended)
        paths = cgroup_paths()
        st["vms_removed"] = [
            {
                "cgroup": paths.get(U64.unpack(k)[0], f"cgroup:{U64.unpack(k)[0]}"),
                "removed_ns": U64.unpack(v)[0],
            }
            for k, v in bpfsys.items(m.fd("paccp_gone"), 8, 8)
        ]
    st["sockops_cgroups"] = sorted({cg for cg, _at, _n in attached_cgroups()})
    return st


# --- maps ---------------------------------------------------------------------------------------------


class Maps:
    """Open pinned maps lazily; use as a context manager to close the descriptors."""

    def __init__(self) -> None:
        if not Path(PIN_DIR, "paccp_ops").exists():
            raise EnvironmentUnsupported(f"paccp is not loaded (no {PIN_DIR}); run `paccp datapath load`")
        self._fds: dict[str, int] = {}

    def fd(self, name: str) -> int:
        if name not in self._fds:
            try:
                self._fds[name] = bpfsys.obj_get(str(Path(PIN_DIR, name)))
            except PermissionError:
                raise EnvironmentUnsupported("permission denied opening the paccp maps (root only)") from None
            except OSError as exc:
                raise EnvironmentUnsupported(f"cannot open map {name}: {exc.strerror}") from None
        return self._fds[name]

    def lookup(self, name: str, key: bytes, size: int) -> bytes | None:
        return bpfsys.lookup(self.fd(name), key, size)

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()

    def __enter__(self) -> Maps:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --- parameters -------------------------------------------------------------------------------------


def check_pair(
    theta: str | int, omega: float, theta_opt: str = "--theta", omega_opt: str = "--omega"
) -> tuple[int, float]:
    """Validate a (theta, omega) pair from user input (theta accepts "400Mbit"), by :mod:`paccp.limits`.

    Pure: called before anything touches the kernel; the pair then packs into the maps without error.
    """
    theta_bps = limits.check_rate(theta, theta_opt)
    om = limits.check_number(omega, omega_opt, 0.0, limits.MAX_DATAPATH_OMEGA, lo_open=True)
    pack_params(theta_bps, om)  # fits the map's fields (u64 theta, u32 omega Q20)
    return theta_bps, om


def check_rcos(rcos: object, option: str = "--rcos") -> float:
    """rcos of ``load``: finite, in [1, 10^6] (checked before the BPF program is loaded)."""
    return limits.check_number(rcos, option, 1.0, limits.MAX_RCOS)


@dataclass(frozen=True)
class CgroupRef:
    """A cgroup v2 directory: absolute path, path relative to the v2 root, and id (inode)."""

    path: Path
    rel: str
    cgid: int


def cgroup_path_in(path: str, root: Path, *, host_wide: bool = False, option: str = "--cgroup") -> Path:
    """The one cgroup-path resolver: ``path`` (absolute under ``root``, or relative to it) as a directory
    inside the cgroup v2 mount ``root``.

    Pure (reads the file system only): no ``..`` component, no NUL or control character, and after
    resolving symbolic links the directory must still be inside ``root``; ``root`` itself (the whole host)
    only with ``host_wide``. Errors are one line naming ``option``.
    """
    if not path:
        raise UserError(f"{option} is required")
    shown = repr(path) if len(path) <= 80 else repr(path[:80]) + "..."
    if any(ord(c) < 32 or c == "\x7f" for c in path) or len(path) > 4096:
        raise UserError(f"{option} {shown}: not a cgroup path (control characters or too long)")
    if ".." in Path(path).parts:
        raise UserError(f"{option} {shown}: '..' is not allowed (the cgroup must be inside {root})")
    root_r = root.resolve()
    p = Path(path)
    if p.is_absolute() and (p in (root, root_r) or root in p.parents or root_r in p.parents):
        cand = p
    else:
        cand = root / str(path).lstrip("/")
    try:
        real = cand.resolve(strict=True)
    except (OSError, RuntimeError):
        raise UserError(f"{option} {shown}: no such cgroup v2 directory (cgroup v2 root is {root})") from None
    if real != root_r and root_r not in real.parents:
        raise UserError(f"{option} {shown}: resolves outside the cgroup v2 tree {root}")
    if not real.is_dir() or not (real / "cgroup.procs").exists():
        raise UserError(f"{option} {shown}: no such cgroup v2 directory (cgroup v2 root is {root})")
    if real == root_r and not host_wide:
        raise UserError(
            f"{option} {shown}: is the cgroup v2 root, i.e. every process on the host; "
            "give --host-wide to mean that"
        )
    return real


def resolve_cgroup(path: str, *, host_wide: bool = False, option: str = "--cgroup") -> CgroupRef:
    """A cgroup given as an absolute path or relative to the cgroup v2 root (:func:`cgroup_path_in`)."""
    if not path:
        raise UserError(f"{option} is required")
    root = cgroup2_root()
    cand = cgroup_path_in(path, root, host_wide=host_wide, option=option)
    rel = "/" + str(cand.relative_to(root.resolve())).strip(".").strip("/")
    return CgroupRef(cand, rel, os.stat(cand).st_ino)


NAMES_FILE = Path(os.environ.get("PACCP_STATE_DIR", "/run/paccp")) / "vm-names.json"


@dataclass(frozen=True)
class Known:
    """What is remembered of a VM or rule owner (kept after its cgroup is gone, for usage records)."""

    path: str
    tenant: str | None = None


def _remember(cg: CgroupRef, tenant: str | None) -> None:
    """Keep cgroup id -> path (and tenant) after the cgroup is gone, so usage records name the VM stably."""
    known = known_cgroups()
    old = known.get(cg.cgid)
    known[cg.cgid] = Known(cg.rel, tenant or (old.tenant if old else None))
    NAMES_FILE.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = NAMES_FILE.with_suffix(".tmp")
    tmp.write_text(json.dumps({str(k): {"path": v.path, "tenant": v.tenant} for k, v in known.items()}))
    tmp.replace(NAMES_FILE)


def known_cgroups() -> dict[int, Known]:
    """The registry of VMs and rule owners (older files held a bare path per id)."""
    try:
        raw = json.loads(NAMES_FILE.read_text())
    except (OSError, ValueError):
        return {}
    out: dict[int, Known] = {}
    for k, v in raw.items():
        if isinstance(v, dict):
            out[int(k)] = Known(str(v.get("path")), v.get("tenant"))
        else:
            out[int(k)] = Known(str(v))
    return out


def live_cgroups() -> dict[int, str]:
    """Map cgroup id -> path relative to the v2 root, for the cgroups that exist now (walks the tree)."""
    root = cgroup2_root()
    out = {os.stat(root).st_ino: "/"}
    for dirpath, _dirs, _files in os.walk(root):
        try:
            out[os.stat(dirpath).st_ino] = "/" + str(Path(dirpath).relative_to(root)).strip(".").strip("/")
        except OSError:
            continue
    return out


def cgroup_paths() -> dict[int, str]:
    """Map cgroup id -> path: existing cgroups, plus remembered names of removed VMs and owners."""
    out = {k: v.path for k, v in known_cgroups().items()}
    out.update(live_cgroups())
    return out


@dataclass(frozen=True)
class Owner:
    """Who a flow or a VM slice is attributed to: tenant and VM (a cgroup path, or outside any VM)."""

    tenant: str
    vm: str


def attribute(
    vmid: int, cgid: int, paths: dict[int, str], known: dict[int, Known], default_tenant: str
) -> Owner:
    """The owner of a socket from its own cgroup: the VM it belongs to, else "outside-vm:<cgroup>".

    Never from a rule's owner: a rule only applies to sockets inside its owner's cgroup.
    """
    if vmid:
        k = known.get(vmid)
        return Owner((k.tenant if k else None) or default_tenant, paths.get(vmid, f"cgroup:{vmid}"))
    return Owner(HOST_TENANT, f"outside-vm:{paths.get(cgid, f'cgroup:{cgid}')}" if cgid else "outside-vm")


def attach_sockops(cg: CgroupRef) -> None:
    """Attach the VM programs to a cgroup: sockops (selects paccp) and the setsockopt guard (keeps it)."""
    for at, name in CGROUP_PROGS:
        attach_cgroup_prog(cg.path, at, Path(PIN_DIR, name))


def detach_sockops(cg: CgroupRef) -> None:
    for at, name in CGROUP_PROGS:
        detach_cgroup_prog(cg.path, at, Path(PIN_DIR, name))


def _check_tenant(tenant: str | None) -> str | None:
    if tenant is not None and not 1 <= len(tenant) <= 128:
        raise UserError("--tenant must be 1..128 characters")
    return tenant


def vm_set(
    cgroup: str, theta: str | int, omega: float, tenant: str | None = None, host_wide: bool = False
) -> CgroupRef:
    """Give a VM (cgroup) its (theta, omega); its connections use paccp from now on (VBP split).

    Its metering slice starts now (a VM with no traffic is metered too) and is closed by the next
    ``vm set``, by ``vm clear`` or when the cgroup is removed.
    """
    theta_bps, om = check_pair(theta, omega)
    cg = resolve_cgroup(cgroup, host_wide=host_wide)
    _check_tenant(tenant)
    _remember(cg, tenant)
    with Maps() as m:
        attach_sockops(cg)
        bpfsys.update(m.fd("paccp_vm_cfg"), U64.pack(cg.cgid), pack_params(theta_bps, om))
        fresh = VM_STATE.pack(0, 0, 0, theta_bps, omega_to_q20(om), 0, time.monotonic_ns(), 0)
        try:
            bpfsys.update(m.fd("paccp_vm_state"), U64.pack(cg.cgid), fresh, bpfsys.BPF_NOEXIST)
        except FileExistsError:
            _close_vm_slice(m, cg.cgid, theta_bps, omega_to_q20(om))
    return cg


def _close_vm_slice(m: Maps, cgid: int, theta_bps: int, omega_q20: int, end: bool = False) -> None:
    """Close the VM's current (theta, omega) metering slice now and start one at the new pair.

    With ``end`` the VM's metering state is dropped instead (its exporter series stop).

    The BPF side does the same lazily at the VM's next ACK; doing it here also closes slices of VMs with
    no traffic left. The map value is rewritten from user space, so bytes acked by the VM's flows between
    the read and the write (a few packets under traffic) can be lost from the VM counter.
    """
    key = U64.pack(cgid)
    raw = bpfsys.lookup(m.fd("paccp_vm_state"), key, VM_STATE.size)
    if raw is None:
        return
    active, pad, nbytes, ptheta, pomega, pad2, since, b0 = VM_STATE.unpack(raw)
    if (ptheta, pomega) == (theta_bps, omega_q20) and not end:
        return
    now = time.monotonic_ns()
    if pomega and now > since:
        skey = SLICE_KEY.pack(cgid, ptheta, pomega, KIND_VM, since)
        bpfsys.update(m.fd("paccp_slices"), skey, SLICE.pack(now - since, max(0, nbytes - b0)))
    if end:
        bpfsys.delete(m.fd("paccp_vm_state"), key)
        return
    bpfsys.update(
        m.fd("paccp_vm_state"),
        key,
        VM_STATE.pack(active, pad, nbytes, theta_bps, omega_q20, pad2, now, nbytes),
    )


def vm_clear(cgroup: str, detach: bool = True, host_wide: bool = False) -> bool:
    """Remove a VM's pair (its flows fall back to BE, outside any VM), close its metering slice (the
    VM's last usage record) and drop its metering state, and detach the sockops program from it."""
    cg = resolve_cgroup(cgroup, host_wide=host_wide)
    with Maps() as m:
        existed = bpfsys.delete(m.fd("paccp_vm_cfg"), U64.pack(cg.cgid))
        _close_vm_slice(m, cg.cgid, 0, Q20, end=True)
    if detach:
        detach_sockops(cg)
    return existed


def reap(m: Maps) -> list[int]:
    """Drop what belongs to removed cgroups; return their ids.

    The cgroup_rmdir tracepoint program closes a removed VM's slice at removal time; this is the fallback
    for removals it did not see (e.g. while paccp was not loaded: then the slice ends now), and it drops
    the flow rules whose owner is gone. Called by status, usage, the exporter and testbed cleanup.
    """
    live = live_cgroups()
    gone: set[int] = set()
    for k in [k for k, _v in bpfsys.items(m.fd("paccp_vm_state"), 8, VM_STATE.size)]:
        cgid = U64.unpack(k)[0]
        if cgid not in live:
            _close_vm_slice(m, cgid, 0, Q20, end=True)
            gone.add(cgid)
    for k, _v in bpfsys.items(m.fd("paccp_vm_cfg"), 8, PARAMS.size):
        if U64.unpack(k)[0] not in live:
            bpfsys.delete(m.fd("paccp_vm_cfg"), k)
            gone.add(U64.unpack(k)[0])
    dropped = False
    for k, _v in bpfsys.items(m.fd("paccp_rules"), RULE_KEY.size, PARAMS.size):
        owner = RULE_KEY.unpack(k)[0]
        if owner and owner not in live:
            bpfsys.delete(m.fd("paccp_rules"), k)
            gone.add(owner)
            dropped = True
    if dropped:
        _sync_rule_count(m)
    now = time.monotonic_ns()
    for cgid in gone:
        with contextlib.suppress(FileExistsError):
            bpfsys.update(m.fd("paccp_gone"), U64.pack(cgid), U64.pack(now), bpfsys.BPF_NOEXIST)
    return sorted(gone)


def _check_port(port: int, option: str = "--port") -> int:
    return limits.check_int(port, option, 1, limits.MAX_PORT)


def _sync_rule_count(m: Maps) -> None:
    """Write the number of rules into paccp_global (0 lets the BPF side skip every rule lookup)."""
    n = sum(1 for _ in bpfsys.items(m.fd("paccp_rules"), RULE_KEY.size, PARAMS.size))
    bpfsys.update(m.fd("paccp_nrules"), U32.pack(0), U64.pack(n))


def _rule_owner(cgroup: str | None, host_wide: bool) -> tuple[int, str]:
    """A rule's owner: a cgroup (id, path) or, explicitly, the whole host (0, "host-wide")."""
    if host_wide and cgroup:
        raise UserError("give either --cgroup (the rule's owner) or --host-wide, not both")
    if host_wide:
        return 0, "host-wide"
    if not cgroup:
        raise UserError(
            "a flow rule needs an owner: --cgroup PATH (only that cgroup's sockets get the pair), "
            "or --host-wide to give it to every process on the host"
        )
    cg = resolve_cgroup(cgroup)
    return cg.cgid, cg.rel


def rule_set(
    port: int,
    theta: str | int,
    omega: float,
    cgroup: str | None = None,
    host_wide: bool = False,
    tenant: str | None = None,
) -> str:
    """A flow rule: paccp sockets of ``cgroup`` (or its children, two levels) whose destination (or local)
    port is ``port`` use this pair; with ``host_wide`` every paccp socket on the host does. Returns the
    owner's name. Sockets outside the owner's cgroup keep the default pair (0, 1) whatever their port.
    """
    theta_bps, om = check_pair(theta, omega)
    port = _check_port(port)
    owner, name = _rule_owner(cgroup, host_wide)
    _check_tenant(tenant)
    if owner:
        _remember(resolve_cgroup(cgroup or ""), tenant)
    with Maps() as m:
        bpfsys.update(m.fd("paccp_rules"), RULE_KEY.pack(owner, port, 0), pack_params(theta_bps, om))
        _sync_rule_count(m)
    return name


def rule_clear(port: int, cgroup: str | None = None, host_wide: bool = False) -> bool:
    """Remove the rule of ``port`` owned by ``cgroup`` (or the host-wide one)."""
    port = _check_port(port)
    owner, _name = _rule_owner(cgroup, host_wide)
    with Maps() as m:
        existed = bpfsys.delete(m.fd("paccp_rules"), RULE_KEY.pack(owner, port, 0))
        _sync_rule_count(m)
    return existed


def list_rules(m: Maps) -> list[dict[str, Any]]:
    paths = cgroup_paths()
    out = []
    for k, v in bpfsys.items(m.fd("paccp_rules"), RULE_KEY.size, PARAMS.size):
        owner, port, _pad = RULE_KEY.unpack(k)
        theta, omq, _f = PARAMS.unpack(v)
        out.append(
            {
                "port": port,
                "owner": paths.get(owner, f"cgroup:{owner}") if owner else "host-wide",
                "owner_cgid": owner,
                "theta_bps": theta,
                "omega": float(q20_to_omega(omq)),
            }
        )
    return sorted(out, key=lambda r: (r["port"], r["owner"]))


def _set_sk(m: Maps, fd: int, theta_bps: int, omega: float) -> None:
    try:
        bpfsys.update(m.fd("paccp_sk_par"), I32.pack(fd), pack_params(theta_bps, omega))
    except OSError as exc:
        raise UserError(f"cannot set per-socket parameters (fd {fd}): {exc.strerror}") from None


def set_flow(sock: socket.socket | int, theta_bps: int | str = 0, omega: float = 1.0) -> None:
    """Per-socket (theta, omega) for a TCP socket of this process (sk_storage keyed by its fd).

    Overrides flow rules and the VM pair; takes effect at the next ACK. The socket must use the
    ``paccp`` congestion control (``setsockopt(TCP_CONGESTION, b"paccp")`` or a VM cgroup) to be affected.
    """
    theta, om = check_pair(theta_bps, omega)
    fd = sock if isinstance(sock, int) else sock.fileno()
    with Maps() as m:
        _set_sk(m, fd, theta, om)


def set_flow_pid(pid: int, fd: int, theta: str | int, omega: float) -> None:
    """Per-socket parameters for socket ``fd`` of a running process (via pidfd_getfd)."""
    theta_bps, om = check_pair(theta, omega)
    try:
        local = bpfsys.pidfd_getfd(pid, fd)
    except OSError as exc:
        raise UserError(f"cannot get fd {fd} of pid {pid}: {exc.strerror}") from None
    try:
        with Maps() as m:
            _set_sk(m, local, theta_bps, om)
    finally:
        os.close(local)


# --- metering -----------------------------------------------------------------------------------------


def list_vms(m: Maps) -> list[VmConf]:
    paths = cgroup_paths()
    states = {
        VmState.decode(k, v).cgid: VmState.decode(k, v)
        for k, v in bpfsys.items(m.fd("paccp_vm_state"), 8, VM_STATE.size)
    }
    out = []
    for k, v in bpfsys.items(m.fd("paccp_vm_cfg"), 8, PARAMS.size):
        cgid = U64.unpack(k)[0]
        theta, omq, _f = PARAMS.unpack(v)
        st = states.get(cgid)
        out.append(
            VmConf(
                cgid=cgid,
                cgroup=paths.get(cgid, f"cgroup:{cgid}"),
                theta_bps=theta,
                omega=float(q20_to_omega(omq)),
                active_flows=st.active if st else 0,
                bytes_acked=st.bytes_acked if st else 0,
            )
        )
    return sorted(out, key=lambda v: v.cgroup)


def status_vms() -> list[VmConf]:
    """Configured VMs with active flow counts and bytes (opens the maps itself)."""
    with Maps() as m:
        return list_vms(m)


@dataclass(frozen=True)
class VmConf:
    """A configured VM (cgroup) with its metering counters."""

    cgid: int
    cgroup: str
    theta_bps: int
    omega: float
    active_flows: int
    bytes_acked: int


def list_flows(m: Maps) -> list[FlowRec]:
    from paccp.datapath.maps import FLOW

    return sorted(
        (FlowRec.decode(k, v) for k, v in bpfsys.items(m.fd("paccp_flows"), 8, FLOW.size)),
        key=lambda f: f.flow_id,
    )


def list_vm_states(m: Maps) -> list[VmState]:
    return [VmState.decode(k, v) for k, v in bpfsys.items(m.fd("paccp_vm_state"), 8, VM_STATE.size)]


def list_slices(m: Maps) -> list[SliceRec]:
    return [SliceRec.decode(k, v) for k, v in bpfsys.items(m.fd("paccp_slices"), SLICE_KEY.size, SLICE.size)]


def flows_table(sample_s: float = 0.5, include_ended: bool = False) -> list[dict[str, Any]]:
    """Live flows with cgroup, effective theta/omega, cwnd, Wmin, srtt, bytes acked and rate.

    The rate is measured from two snapshots ``sample_s`` apart (0: average over the flow's life).
    """
    paths = cgroup_paths()
    known = known_cgroups()
    with Maps() as m:
        first = {f.flow_id: f for f in list_flows(m)}
        if sample_s > 0:
            time.sleep(sample_s)
        second = list_flows(m)
    rows = []
    for f in second:
        if f.ended and not include_ended:
            continue
        prev = first.get(f.flow_id)
        if sample_s > 0 and prev is not None and f.last_ns > prev.last_ns:
            rate = (f.bytes_acked - prev.bytes_acked) * 8e9 / (f.last_ns - prev.last_ns)
        elif sample_s > 0 and prev is not None:
            rate = 0.0
        else:
            rate = f.bytes_acked * 8e9 / max(1, f.last_ns - f.start_ns)
        owner = attribute(f.vmid, f.cgid, paths, known, "-")
        rows.append(
            {
                "flow_id": f.flow_id,
                "cgroup": paths.get(f.cgid, f"cgroup:{f.cgid}") if f.cgid else None,
                "vm": owner.vm,
                "tenant": owner.tenant,
                "src": f"{f.saddr}:{f.sport}",
                "dst": f"{f.daddr}:{f.dport}",
                "source": f.source,
                "theta_bps": f.theta_bps,
                "omega": float(q20_to_omega(f.omega_q20)) if f.omega_q20 else None,
                "cwnd": f.cwnd,
                "wmin": round(f.wmin_q20 / Q20, 3),
                "srtt_us": f.srtt_us,
                "bytes_acked": f.bytes_acked,
                "rate_bps": round(rate),
                "ended": f.ended,
            }
        )
    return rows


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip().replace("-", "")[:12]
    except OSError:
        return "noboot"


def _boot_epoch_ns() -> int:
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("btime "):
            return int(line.split()[1]) * 1_000_000_000
    return time.time_ns() - time.monotonic_ns()


def _cos(theta: int, omega: Decimal) -> str:
    from paccp.common.cos import classify

    return classify(theta, omega)


def usage_records(tenant: str, include_open: bool = False) -> list[Any]:
    """Usage records (shared schema, source "datapath"), one per (flow or VM, pair) slice.

    Each record names the VM of the flow's socket (its cgroup, or the VM cgroup above it) and that VM's
    tenant (``vm set --tenant``; ``tenant`` for VMs registered without one). Flows of sockets in no VM are
    attributed to tenant ``(host)``, VM ``outside-vm:<cgroup>``. A removed VM's last slice is closed at
    removal (cgroup_rmdir tracepoint), so its final record is here.

    Closed slices have stable record ids ``dp:<boot>:<flow|vm>:<id>:<start_ns>``. With ``include_open``
    the still-open slice of each flow/VM is added up to now, with ``:open:<end_ns>`` in its id (a snapshot:
    its id changes at each export, so do not ingest open records from two exports).
    """
    from paccp.common.usage import UsageRecord

    if not tenant:
        raise UserError("--tenant is required")
    boot = _boot_id()
    # monotonic (BPF clock, ns since boot) -> Unix epoch via the boot time (stable across exports; the
    # boot time has 1 s resolution, so absolute times may be off by < 1 s, durations are exact)
    offset = _boot_epoch_ns()
    paths = cgroup_paths()
    known = known_cgroups()
    recs: list[UsageRecord] = []
    with Maps() as m:
        reap(m)
        flows = {f.flow_id: f for f in list_flows(m)}
        vm_cfg = {v.cgid: v for v in list_vms(m)}
        slices = list_slices(m)
        states = list_vm_states(m)
    now = time.monotonic_ns()

    def owner(kind: int, ident: int) -> Owner:
        if kind == KIND_VM:
            return attribute(ident, 0, paths, known, tenant)
        f = flows.get(ident)
        if f is None:  # evicted from the LRU flow table: the slice outlived its flow record
            return Owner("(unknown)", "unknown")
        return attribute(f.vmid, f.cgid, paths, known, tenant)

    def flow_cos(f: FlowRec | None, theta: int, omega: Decimal) -> str:
        if f is not None and f.source == "vm" and f.vmid in vm_cfg:
            v = vm_cfg[f.vmid]
            return _cos(v.theta_bps, Decimal(str(v.omega)))
        return _cos(theta, omega)

    def add(kind: int, ident: int, theta: int, omq: int, start: int, end: int, nbytes: int, tag: str) -> None:
        omega = q20_to_omega(omq)
        f = flows.get(ident) if kind == KIND_FLOW else None
        cos = flow_cos(f, theta, omega) if kind == KIND_FLOW else _cos(theta, omega)
        if cos in ("be", "ds"):
            theta = 0  # schema: be/ds carry no theta (cannot happen for a consistent pair)
        kname = "flow" if kind == KIND_FLOW else "vm"
        who = owner(kind, ident)
        recs.append(
            UsageRecord(
                record_id=f"dp:{boot}:{kname}:{ident}:{start}{tag}",
                source="datapath",
                tenant=who.tenant,
                vm=who.vm,
                flow_id=f"dp:{boot}:{ident}" if kind == KIND_FLOW else None,
                cos=cos,  # type: ignore[arg-type]
                theta_bps=theta,
                omega=omega,
                start_ns=start + offset,
                end_ns=end + offset,
                bytes=max(0, nbytes),
            )
        )

    for s in sorted(slices, key=lambda s: (s.kind, s.id, s.start_ns)):
        add(s.kind, s.id, s.theta_bps, s.omega_q20, s.start_ns, s.start_ns + s.ns, s.nbytes, "")
    if include_open:
        for f in flows.values():
            if not f.ended and f.omega_q20:
                add(
                    KIND_FLOW,
                    f.flow_id,
                    f.theta_bps,
                    f.omega_q20,
                    f.pair_since_ns,
                    f.last_ns,
                    f.bytes_acked - f.pair_bytes0,
                    f":open:{f.last_ns}",
                )
        for st in states:
            if st.pair_omega_q20:
                add(
                    KIND_VM,
                    st.cgid,
                    st.pair_theta,
                    st.pair_omega_q20,
                    st.pair_since_ns,
                    now,
                    st.bytes_acked - st.pair_bytes0,
                    f":open:{now}",
                )
    return recs
