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

from paccp.datapath import bpfsys
from paccp.datapath.maps import (
    GLOBAL,
    I32,
    KIND_FLOW,
    KIND_VM,
    PARAMS,
    Q20,
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
from paccp.units import parse_rate_bps

PIN_DIR = os.environ.get("PACCP_PIN_DIR", "/sys/fs/bpf/paccp")
REPO_BPF = Path(os.environ.get("PACCP_BPF_DIR", Path(__file__).resolve().parents[3] / "bpf"))
BUILD = REPO_BPF / "build"
CC_NAME = "paccp"
SOCKOPS_NAME = "paccp_sockops"
MAP_NAMES = (
    "paccp_sk_par",
    "paccp_sk_meta",
    "paccp_rules",
    "paccp_vm_cfg",
    "paccp_vm_state",
    "paccp_flows",
    "paccp_slices",
    "paccp_global",
)


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


def build() -> None:
    """Build bpf/build/{paccp.bpf.o,paccp_loader} (make is incremental)."""
    if not (REPO_BPF / "Makefile").exists():
        raise EnvironmentUnsupported(f"BPF sources not found at {REPO_BPF} (set PACCP_BPF_DIR)")
    _run(["make", "-s", "-C", str(REPO_BPF)], "building the BPF objects")


# --- load / unload / status ---------------------------------------------------------------------------


def is_loaded() -> bool:
    """True when the struct_ops is registered and its maps are pinned."""
    avail = Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split()
    return CC_NAME in avail and Path(PIN_DIR, "paccp_ops").exists()


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
    require_env()
    if rcos < 1:
        raise UserError(f"rcos must be >= 1, got {rcos}")
    with _lock():
        return _load(rcos)


def _load(rcos: float) -> bool:
    ensure_bpffs()
    if is_loaded():
        return False
    avail = Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split()
    if CC_NAME in avail:
        raise EnvironmentUnsupported(
            f"a congestion control named {CC_NAME!r} is registered but {PIN_DIR} is missing "
            "(loaded by someone else?); unregister it with `bpftool struct_ops unregister name paccp_ops`"
        )
    build()
    if Path(PIN_DIR).exists():
        shutil.rmtree(PIN_DIR)  # stale pins of a crashed load
    os.makedirs(PIN_DIR, mode=0o700)
    try:
        _run([str(BUILD / "paccp_loader"), "load", str(BUILD / "paccp.bpf.o"), PIN_DIR], "loading paccp")
    except EnvironmentUnsupported:
        shutil.rmtree(PIN_DIR, ignore_errors=True)
        raise
    for name in os.listdir(PIN_DIR):
        os.chmod(Path(PIN_DIR, name), 0o600)
    with Maps() as m:
        cur = bpfsys.lookup(m.fd("paccp_global"), U32.pack(0), GLOBAL.size) or GLOBAL.pack(0, 0)
        _r, nxt = GLOBAL.unpack(cur)
        bpfsys.update(m.fd("paccp_global"), U32.pack(0), GLOBAL.pack(round(rcos * Q20), nxt))
    return True


def _attached_cgroups() -> list[str]:
    """Cgroup paths where the paccp sockops program is attached (from ``bpftool cgroup tree``)."""
    root = cgroup2_root()
    res = subprocess.run(["bpftool", "-j", "cgroup", "tree", str(root)], capture_output=True, text=True)
    if res.returncode != 0 or not res.stdout.strip():
        return []
    out: list[str] = []
    for entry in json.loads(res.stdout):
        for prog in entry.get("programs", []):
            if (
                prog.get("attach_type") in ("sock_ops", "cgroup_sock_ops")
                and prog.get("name") == SOCKOPS_NAME
            ):
                out.append(entry["cgroup"])
    return sorted(set(out))


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
    pinned = str(Path(PIN_DIR, "sockops"))
    for cg in _attached_cgroups():
        subprocess.run(["bpftool", "cgroup", "detach", cg, "sock_ops", "pinned", pinned], capture_output=True)
    if Path(PIN_DIR, "paccp_ops").exists():
        _run([str(BUILD / "paccp_loader"), "unload", PIN_DIR], "unregistering paccp")
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
            GLOBAL.unpack(m.lookup("paccp_global", U32.pack(0), GLOBAL.size) or bytes(16))[0] / Q20
        )
        st["vms"] = [v.__dict__ for v in list_vms(m)]
        st["rules"] = list_rules(m)
        fl = list_flows(m)
        st["flows_live"] = sum(1 for f in fl if not f.ended)
        st["flows_ended"] = sum(1 for f in fl if f.ended)
    st["sockops_cgroups"] = _attached_cgroups()
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


def check_pair(theta: str | int, omega: float) -> tuple[int, float]:
    """Validate a (theta, omega) pair from user input; theta accepts "400Mbit"."""
    theta_bps = parse_rate_bps(theta)
    try:
        om = float(omega)
    except (TypeError, ValueError):
        raise UserError(f"omega must be a number, got {omega!r}") from None
    if not om > 0 or om != om or om > 4000:
        raise UserError(f"omega must be > 0 (and <= 4000), got {omega}")
    return theta_bps, om


@dataclass(frozen=True)
class CgroupRef:
    """A cgroup v2 directory: absolute path, path relative to the v2 root, and id (inode)."""

    path: Path
    rel: str
    cgid: int


def resolve_cgroup(path: str) -> CgroupRef:
    """Resolve a cgroup given as an absolute path or relative to the cgroup v2 root."""
    if not path:
        raise UserError("--cgroup is required")
    root = cgroup2_root()
    p = Path(path)
    cand = p if p.is_absolute() and str(p).startswith(str(root)) else root / str(path).lstrip("/")
    if not cand.is_dir() or not (cand / "cgroup.procs").exists():
        raise UserError(f"no such cgroup v2 directory: {path} (cgroup v2 root is {root})")
    rel = "/" + str(cand.relative_to(root)).strip(".").strip("/")
    return CgroupRef(cand, rel, os.stat(cand).st_ino)


NAMES_FILE = Path(os.environ.get("PACCP_STATE_DIR", "/run/paccp")) / "vm-names.json"


def _remember_name(cg: CgroupRef) -> None:
    """Keep cgroup id -> path after the cgroup is gone, so usage records name the VM stably."""
    names = _known_names()
    names[cg.cgid] = cg.rel
    NAMES_FILE.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = NAMES_FILE.with_suffix(".tmp")
    tmp.write_text(json.dumps({str(k): v for k, v in names.items()}))
    tmp.replace(NAMES_FILE)


def _known_names() -> dict[int, str]:
    try:
        return {int(k): str(v) for k, v in json.loads(NAMES_FILE.read_text()).items()}
    except (OSError, ValueError):
        return {}


def cgroup_paths() -> dict[int, str]:
    """Map cgroup id -> path relative to the v2 root (walks the tree; remembered names of removed VMs)."""
    root = cgroup2_root()
    out = _known_names()
    out[os.stat(root).st_ino] = "/"
    for dirpath, _dirs, _files in os.walk(root):
        try:
            out[os.stat(dirpath).st_ino] = "/" + str(Path(dirpath).relative_to(root)).strip(".").strip("/")
        except OSError:
            continue
    return out


def attach_sockops(cg: CgroupRef) -> None:
    """Attach the paccp sockops program to a cgroup (idempotent, multi-attach)."""
    res = subprocess.run(["bpftool", "-j", "cgroup", "show", str(cg.path)], capture_output=True, text=True)
    if res.returncode == 0 and res.stdout.strip():
        for prog in json.loads(res.stdout):
            if (
                prog.get("attach_type") in ("sock_ops", "cgroup_sock_ops")
                and prog.get("name") == SOCKOPS_NAME
            ):
                return
    _run(
        [
            "bpftool",
            "cgroup",
            "attach",
            str(cg.path),
            "sock_ops",
            "pinned",
            str(Path(PIN_DIR, "sockops")),
            "multi",
        ],
        f"attaching sockops to {cg.rel}",
    )


def detach_sockops(cg: CgroupRef) -> None:
    subprocess.run(
        ["bpftool", "cgroup", "detach", str(cg.path), "sock_ops", "pinned", str(Path(PIN_DIR, "sockops"))],
        capture_output=True,
    )


def vm_set(cgroup: str, theta: str | int, omega: float) -> CgroupRef:
    """Give a VM (cgroup) its (theta, omega); its connections use paccp from now on (VBP split)."""
    theta_bps, om = check_pair(theta, omega)
    cg = resolve_cgroup(cgroup)
    with Maps() as m:
        attach_sockops(cg)
        bpfsys.update(m.fd("paccp_vm_cfg"), U64.pack(cg.cgid), pack_params(theta_bps, om))
        _close_vm_slice(m, cg.cgid, theta_bps, omega_to_q20(om))
    _remember_name(cg)
    return cg


def _close_vm_slice(m: Maps, cgid: int, theta_bps: int, omega_q20: int) -> None:
    """Close the VM's current (theta, omega) metering slice now and start one at the new pair.

    The BPF side does the same lazily at the VM's next ACK; doing it here also closes slices of VMs with
    no traffic left. The map value is rewritten from user space, so bytes acked by the VM's flows between
    the read and the write (a few packets under traffic) can be lost from the VM counter.
    """
    key = U64.pack(cgid)
    raw = bpfsys.lookup(m.fd("paccp_vm_state"), key, VM_STATE.size)
    if raw is None:
        return
    active, pad, nbytes, ptheta, pomega, pad2, since, b0 = VM_STATE.unpack(raw)
    if (ptheta, pomega) == (theta_bps, omega_q20):
        return
    now = time.monotonic_ns()
    if pomega and now > since:
        skey = SLICE_KEY.pack(cgid, ptheta, pomega, KIND_VM, since)
        bpfsys.update(m.fd("paccp_slices"), skey, SLICE.pack(now - since, max(0, nbytes - b0)))
    bpfsys.update(
        m.fd("paccp_vm_state"),
        key,
        VM_STATE.pack(active, pad, nbytes, theta_bps, omega_q20, pad2, now, nbytes),
    )


def vm_clear(cgroup: str, detach: bool = True) -> bool:
    """Remove a VM's pair (its flows fall back to BE) and detach the sockops program from it."""
    cg = resolve_cgroup(cgroup)
    with Maps() as m:
        existed = bpfsys.delete(m.fd("paccp_vm_cfg"), U64.pack(cg.cgid))
        _close_vm_slice(m, cg.cgid, 0, Q20)  # the BPF side treats an unconfigured VM as BE (0, 1)
    if detach:
        detach_sockops(cg)
    return existed


def _check_port(port: int) -> int:
    if not 1 <= int(port) <= 65535:
        raise UserError(f"port must be in 1..65535, got {port}")
    return int(port)


def rule_set(port: int, theta: str | int, omega: float) -> None:
    """A flow rule: paccp sockets whose destination (or local) port is ``port`` use this pair."""
    theta_bps, om = check_pair(theta, omega)
    with Maps() as m:
        bpfsys.update(m.fd("paccp_rules"), U32.pack(_check_port(port)), pack_params(theta_bps, om))


def rule_clear(port: int) -> bool:
    with Maps() as m:
        return bpfsys.delete(m.fd("paccp_rules"), U32.pack(_check_port(port)))


def list_rules(m: Maps) -> list[dict[str, Any]]:
    out = []
    for k, v in bpfsys.items(m.fd("paccp_rules"), 4, PARAMS.size):
        theta, omq, _f = PARAMS.unpack(v)
        out.append({"port": U32.unpack(k)[0], "theta_bps": theta, "omega": float(q20_to_omega(omq))})
    return sorted(out, key=lambda r: r["port"])


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
        rows.append(
            {
                "flow_id": f.flow_id,
                "cgroup": paths.get(f.cgid, f"cgroup:{f.cgid}") if f.cgid else None,
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
    from paccp.cos import classify

    return classify(theta, omega)


def usage_records(tenant: str, include_open: bool = False) -> list[Any]:
    """Usage records (shared schema, source "datapath"), one per (flow or cgroup, pair) slice.

    Closed slices have stable record ids ``dp:<boot>:<flow|vm>:<id>:<start_ns>``. With ``include_open``
    the still-open slice of each flow/VM is added up to now, with ``:open:<end_ns>`` in its id (a snapshot:
    its id changes at each export, so do not ingest open records from two exports).
    """
    from paccp.usage import UsageRecord

    if not tenant:
        raise UserError("--tenant is required")
    boot = _boot_id()
    # monotonic (BPF clock, ns since boot) -> Unix epoch via the boot time (stable across exports; the
    # boot time has 1 s resolution, so absolute times may be off by < 1 s, durations are exact)
    offset = _boot_epoch_ns()
    paths = cgroup_paths()
    recs: list[UsageRecord] = []
    with Maps() as m:
        flows = {f.flow_id: f for f in list_flows(m)}
        vm_cfg = {v.cgid: v for v in list_vms(m)}
        slices = list_slices(m)
        states = list_vm_states(m)
    now = time.monotonic_ns()

    def vm_name(cgid: int) -> str:
        return paths.get(cgid, f"cgroup:{cgid}") if cgid else "host"

    def flow_cos(f: FlowRec | None, theta: int, omega: Decimal) -> str:
        if f is not None and f.source == "vm" and f.cgid in vm_cfg:
            v = vm_cfg[f.cgid]
            return _cos(v.theta_bps, Decimal(str(v.omega)))
        return _cos(theta, omega)

    def add(
        kind: int, ident: int, cgid: int, theta: int, omq: int, start: int, end: int, nbytes: int, tag: str
    ) -> None:
        omega = q20_to_omega(omq)
        f = flows.get(ident) if kind == KIND_FLOW else None
        cos = flow_cos(f, theta, omega) if kind == KIND_FLOW else _cos(theta, omega)
        if cos in ("be", "ds"):
            theta = 0  # schema: be/ds carry no theta (cannot happen for a consistent pair)
        kname = "flow" if kind == KIND_FLOW else "vm"
        recs.append(
            UsageRecord(
                record_id=f"dp:{boot}:{kname}:{ident}:{start}{tag}",
                source="datapath",
                tenant=tenant,
                vm=vm_name(cgid),
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
        cgid = s.id if s.kind == KIND_VM else (flows[s.id].cgid if s.id in flows else 0)
        add(s.kind, s.id, cgid, s.theta_bps, s.omega_q20, s.start_ns, s.start_ns + s.ns, s.nbytes, "")
    if include_open:
        for f in flows.values():
            if not f.ended and f.omega_q20:
                add(
                    KIND_FLOW,
                    f.flow_id,
                    f.cgid,
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
                    st.cgid,
                    st.pair_theta,
                    st.pair_omega_q20,
                    st.pair_since_ns,
                    now,
                    st.bytes_acked - st.pair_bytes0,
                    f":open:{now}",
                )
    return recs
