"""The MPTCP BG/WC scheme on the kernel's own MPTCP: load ``bpf/bgwc.bpf.o``, classify subflows, set A_l/K.

What the kernel provides: upstream MPTCP (in-kernel path manager, ``subflow`` endpoints, the ``default``
scheduler only, no BPF scheduler), htb, u32, cgroup sock_ops and struct_ops congestion controls. What is
built on it (``bpf/bgwc.bpf.c``):

- a cgroup sock_ops program that gives each subflow, at its active open, a class from its local address:
  BG (DSCP EF, ToS 0xb8, reno) or WC (DSCP CS1, ToS 0x20, the ``bgwc_wc`` congestion control);
- ``bgwc_wc``: Reno whose additive increase is (A_l / K)^2 segments per RTT, A_l and K per VM (cgroup)
  from the ``bgwc_vm`` map (K = the VM's live WC subflows unless set);
- metering: the bytes each VM's subflows delivered (acknowledged), per VM in ``bgwc_bytes``
  (:func:`vm_bytes`), what the service's agent bills;
- the tc side (per-VM BG rate limit, strict priority at switch ports) is in :mod:`paccp.datapath.mptcp.prio`.

Pins live in :data:`PIN_DIR` (root only). Layouts mirror the structs of ``bpf/bgwc.bpf.c``.
"""

from __future__ import annotations

import os
import shutil
import socket
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from paccp.datapath.core import bpfsys, cgroups, env
from paccp.errors import EnvironmentUnsupported, UserError

PIN_DIR = os.environ.get("PACCP_BGWC_PIN_DIR", "/sys/fs/bpf/paccp_bgwc")
CC_NAME = "bgwc_wc"
OPS = "bgwc_ops"
SOCKOPS = "bgwc_sockops"
OPS_BG = "bgwc_bg_ops"
PINS = ("bgwc_addr", "bgwc_vm", "bgwc_bytes", "bgwc_conf", OPS, OPS_BG, SOCKOPS)
CLASSES = {"bg": 1, "wc": 2}
TOS = {"bg": 0xB8, "wc": 0x20}
VM = struct.Struct("<IIII")  # a_l, k_set, k_live, policy
CLASS = struct.Struct("<II")  # cls, pad
U64 = struct.Struct("<Q")


def _registered() -> bool:
    return CC_NAME in Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split()


def is_loaded() -> bool:
    return _registered() and all(Path(PIN_DIR, p).exists() for p in PINS)


def _stale() -> bool:
    """The pinned object is older than the built one (its map layout may differ: reload it)."""
    try:
        return Path(env.BUILD, "bgwc.bpf.o").stat().st_mtime > Path(PIN_DIR).stat().st_mtime
    except OSError:
        return False


def load() -> bool:
    """Build if needed, register ``bgwc_wc`` and pin the maps and the sockops program (False: was loaded).

    A loaded copy older than the built object (another version of ``bpf/bgwc.bpf.c``) is replaced.
    """
    env.require_env()
    with env.lock():
        env.ensure_bpffs()
        env.build()
        if is_loaded() and not _stale():
            return False
        if _registered() or Path(PIN_DIR).exists():
            if _stale():
                _unload_locked()
            else:
                raise EnvironmentUnsupported(
                    f"{CC_NAME} is registered but {PIN_DIR} is incomplete: "
                    "`paccp datapath mptcp unload` first"
                )
        env.load_pinned("bgwc.bpf.o", PIN_DIR, "bgwc")
        return True


def _unload_locked() -> bool:
    if not Path(PIN_DIR).exists():
        return False
    for cg, at, name in cgroups.attached_cgroups((("sock_ops", SOCKOPS),)):
        cgroups.detach_cgroup_prog(cg, at, Path(PIN_DIR, name))
    for ops in (OPS, OPS_BG):
        if Path(PIN_DIR, ops).exists():
            env.run([env.loader(), "unload", PIN_DIR, ops], f"unregistering {ops}")
    shutil.rmtree(PIN_DIR, ignore_errors=True)
    return True


def unload() -> bool:
    """Detach the sockops program everywhere, unregister ``bgwc_wc``, remove the pins."""
    env.require_env()
    with env.lock():
        return _unload_locked()


def _fd(name: str) -> int:
    if not is_loaded():
        raise EnvironmentUnsupported("bgwc is not loaded: run `paccp datapath mptcp load`")
    try:
        return bpfsys.obj_get(str(Path(PIN_DIR, name)))
    except OSError as exc:
        raise EnvironmentUnsupported(f"cannot open {name}: {exc.strerror}") from None


def _addr_key(addr: str) -> bytes:
    try:
        return socket.inet_aton(addr)  # network order, as sock_ops' local_ip4 holds it
    except OSError:
        raise UserError(f"not an IPv4 address: {addr!r}") from None


def addr_set(addr: str, cls: str) -> None:
    """Subflows opened from ``addr`` are of class ``cls`` ("bg" or "wc")."""
    if cls not in CLASSES:
        raise UserError(f"class must be bg or wc, got {cls!r}")
    fd = _fd("bgwc_addr")
    try:
        bpfsys.update(fd, _addr_key(addr), CLASS.pack(CLASSES[cls], 0))
    finally:
        os.close(fd)


def set_tuning(wc_pace_div: int, bg_boost: int, wc_lowat: int, wc_fixed_pace_bps: int = 0) -> None:
    """Knobs that steer the kernel's default MPTCP scheduler (see ``bpf/bgwc.bpf.c``, map bgwc_conf).

    ``wc_pace_div``: WC subflows report their pacing estimate divided by this (0/1: unchanged);
    ``bg_boost``: BG subflows report theirs multiplied by this (0/1: unchanged; also their TCP small-queue
    budget); ``wc_lowat``: TCP_NOTSENT_LOWAT of WC subflows opened from now on (0: unset);
    ``wc_fixed_pace_bps``: every WC subflow reports this pacing rate (0: its own estimate).
    """
    if not (
        0 <= wc_pace_div <= 1_000_000
        and 0 <= bg_boost <= 1000
        and 0 <= wc_lowat <= 1 << 30
        and 0 <= wc_fixed_pace_bps <= 1 << 40
    ):
        raise UserError("bad bgwc tuning values")
    fd = _fd("bgwc_conf")
    try:
        for i, v in enumerate((wc_pace_div, bg_boost, wc_lowat, wc_fixed_pace_bps // 8)):
            bpfsys.update(fd, struct.pack("<I", i), U64.pack(v))
    finally:
        os.close(fd)


def addr_clear(addr: str) -> bool:
    fd = _fd("bgwc_addr")
    try:
        return bpfsys.delete(fd, _addr_key(addr))
    finally:
        os.close(fd)


@dataclass(frozen=True)
class VmPolicy:
    """A VM's WC competition: level A_l, K (0 = its live WC subflows), policy on/off."""

    cgroup: str
    a_l: int
    k_set: int
    k_live: int
    policy: bool
    bytes_acked: int = 0


def vm_set(cgroup: str, a_l: int, k: int = 0, policy: bool = True) -> cgroups.CgroupRef:
    """Attach the sockops program to the VM's cgroup and set its A_l and K (K 0: count live WC subflows)."""
    if not 1 <= a_l <= 1000:
        raise UserError(f"A_l must be in 1..1000, got {a_l}")
    if not 0 <= k <= 1000:
        raise UserError(f"K must be in 0..1000 (0 = count), got {k}")
    cg = cgroups.resolve_cgroup(cgroup)
    cgroups.attach_cgroup_prog(cg.path, "sock_ops", Path(PIN_DIR, SOCKOPS))
    fd = _fd("bgwc_vm")
    try:
        old = bpfsys.lookup(fd, U64.pack(cg.cgid), VM.size)
        live = VM.unpack(old)[2] if old else 0  # keep the CC's count (set VMs before their traffic)
        bpfsys.update(fd, U64.pack(cg.cgid), VM.pack(a_l, k, live, 1 if policy else 0))
    finally:
        os.close(fd)
    return cg


def vm_clear(cgroup: str) -> bool:
    cg = cgroups.resolve_cgroup(cgroup)
    cgroups.detach_cgroup_prog(cg.path, "sock_ops", Path(PIN_DIR, SOCKOPS))
    fd, fd_b = _fd("bgwc_vm"), _fd("bgwc_bytes")
    try:
        bpfsys.delete(fd_b, U64.pack(cg.cgid))
        return bpfsys.delete(fd, U64.pack(cg.cgid))
    finally:
        os.close(fd)
        os.close(fd_b)


def vm_bytes(cgroup: str) -> int | None:
    """Bytes the VM's subflows delivered (acknowledged) since it was set; None: not a VM of bgwc."""
    cg = cgroups.resolve_cgroup(cgroup)
    fd_v, fd_b = _fd("bgwc_vm"), _fd("bgwc_bytes")
    try:
        if bpfsys.lookup(fd_v, U64.pack(cg.cgid), VM.size) is None:
            return None
        got = bpfsys.lookup(fd_b, U64.pack(cg.cgid), U64.size)
        return 0 if got is None else int(U64.unpack(got)[0])  # no byte acknowledged yet
    finally:
        os.close(fd_v)
        os.close(fd_b)


def status() -> dict[str, Any]:
    """Loaded or not; classified addresses; VMs with A_l, K and live WC subflows; attached cgroups."""
    st: dict[str, Any] = {"loaded": is_loaded(), "registered": _registered(), "pin_dir": PIN_DIR}
    if not st["loaded"]:
        return st
    paths = cgroups.cgroup_paths()
    fd_a, fd_v, fd_b = _fd("bgwc_addr"), _fd("bgwc_vm"), _fd("bgwc_bytes")
    try:
        names = {v: k for k, v in CLASSES.items()}
        st["addresses"] = sorted(
            (socket.inet_ntoa(k), names.get(CLASS.unpack(v)[0], "?")) for k, v in bpfsys.items(fd_a, 4, 8)
        )
        acked = {U64.unpack(k)[0]: U64.unpack(v)[0] for k, v in bpfsys.items(fd_b, 8, U64.size)}
        vms = []
        for k, v in bpfsys.items(fd_v, 8, VM.size):
            cgid = U64.unpack(k)[0]
            a_l, k_set, k_live, pol = VM.unpack(v)
            where = paths.get(cgid, f"cgroup:{cgid}")
            vms.append(VmPolicy(where, a_l, k_set, k_live, bool(pol), acked.get(cgid, 0)).__dict__)
        st["vms"] = sorted(vms, key=lambda v: v["cgroup"])
    finally:
        os.close(fd_a)
        os.close(fd_v)
        os.close(fd_b)
    st["sockops_cgroups"] = sorted({cg for cg, _a, _n in cgroups.attached_cgroups((("sock_ops", SOCKOPS),))})
    return st


def reap() -> None:
    """Drop VM entries of removed cgroups (testbed cleanup)."""
    if not is_loaded():
        return
    live = cgroups.live_cgroups()
    for name, size in (("bgwc_vm", VM.size), ("bgwc_bytes", U64.size)):
        fd = _fd(name)
        try:
            for k, _v in bpfsys.items(fd, 8, size):
                if U64.unpack(k)[0] not in live:
                    bpfsys.delete(fd, k)
        finally:
            os.close(fd)
