"""SoftBW at a host's egress port: ``bpf/softbw.bpf.c`` (per-VM lag dT) + htb unsatisfied/satisfied classes.

The port's htb has, per VM i, an unsatisfied leaf ``1:(0x100+i)`` (prio 0) and a satisfied leaf
``1:(0x200+i)`` (prio 1), each with a token rate and ceil = the port rate: htb lends the port's rate to prio
0 leaves first and round-robins (equal quantum) between leaves of one priority. So packets a VM is owed
(dT >= 0) are served before any over-satisfied packet, VMs take turns at each level whatever their flow
counts, and satisfied traffic uses only spare capacity (work conserving). The tc program (clsact egress)
picks the leaf through skb->priority. Guarantees and over-commitment are set at run time (the map).
"""

from __future__ import annotations

import os
import shutil
import socket
import struct
from pathlib import Path
from typing import Any

from paccp.datapath.core import bpfsys, env
from paccp.errors import EnvironmentUnsupported, UserError

PIN_DIR = os.environ.get("PACCP_SOFTBW_PIN_DIR", "/sys/fs/bpf/paccp_softbw")
PROG = "softbw_egress"
PINS = ("softbw_vms", "softbw_state", PROG)
VM = struct.Struct("<QII")  # rate_bps, unsat_cls, sat_cls
STATE = struct.Struct("<IIqQQQ")  # lock, pad, lag_ns, last_ns, unsat_bytes, sat_bytes
QUANTUM = "15140"


def is_loaded() -> bool:
    return all(Path(PIN_DIR, p).exists() for p in PINS)


def load() -> bool:
    """Build if needed and pin the tc program and its maps (False: already loaded)."""
    env.require_env()
    with env.lock():
        env.ensure_bpffs()
        if is_loaded():
            return False
        env.load_pinned("softbw.bpf.o", PIN_DIR, "softbw")
        return True


def unload() -> bool:
    """Remove the pins (the program stays attached where a port still uses it, until the port goes)."""
    env.require_env()
    if not Path(PIN_DIR).exists():
        return False
    shutil.rmtree(PIN_DIR, ignore_errors=True)
    return True


def _fd(name: str) -> int:
    if not is_loaded():
        raise EnvironmentUnsupported("softbw is not loaded: run `paccp datapath softbw load`")
    return bpfsys.obj_get(str(Path(PIN_DIR, name)))


def _key(addr: str) -> bytes:
    try:
        return socket.inet_aton(addr)
    except OSError:
        raise UserError(f"not an IPv4 address: {addr!r}") from None


def unsat_class(i: int) -> str:
    return f"1:{0x100 + i:x}"


def sat_class(i: int) -> str:
    return f"1:{0x200 + i:x}"


def _clsid(text: str) -> int:
    major, minor = text.split(":")
    return (int(major, 16) << 16) | int(minor, 16)


def vm_set(addr: str, index: int, guarantee_bps: int) -> None:
    """VM ``index`` (its classes on the port) sends from ``addr`` with guarantee B = ``guarantee_bps``."""
    if guarantee_bps <= 0:
        raise UserError("a SoftBW guarantee must be > 0")
    if not 1 <= index <= 0xFF:
        raise UserError("VM index must be in 1..255")
    fd = _fd("softbw_vms")
    try:
        val = VM.pack(guarantee_bps, _clsid(unsat_class(index)), _clsid(sat_class(index)))
        bpfsys.update(fd, _key(addr), val)
    finally:
        os.close(fd)


def vm_clear(addr: str) -> bool:
    out = False
    for name in ("softbw_vms", "softbw_state"):
        fd = _fd(name)
        try:
            out = bpfsys.delete(fd, _key(addr)) or out
        finally:
            os.close(fd)
    return out


def status() -> dict[str, Any]:
    """Loaded or not; per VM address: guarantee, classes, lag and bytes steered to each class."""
    st: dict[str, Any] = {"loaded": is_loaded(), "pin_dir": PIN_DIR}
    if not st["loaded"]:
        return st
    fd_v, fd_s = _fd("softbw_vms"), _fd("softbw_state")
    try:
        vms = []
        for k, v in bpfsys.items(fd_v, 4, VM.size):
            rate, uc, sc = VM.unpack(v)
            raw = bpfsys.lookup(fd_s, k, STATE.size)
            _l, _p, lag, _last, ub, sb = STATE.unpack(raw) if raw else (0, 0, 0, 0, 0, 0)
            vms.append(
                {"addr": socket.inet_ntoa(k), "guarantee_bps": rate, "unsat_class": f"1:{uc & 0xFFFF:x}",
                 "sat_class": f"1:{sc & 0xFFFF:x}", "lag_ns": lag, "unsat_bytes": ub, "sat_bytes": sb}
            )  # fmt: skip
        st["vms"] = sorted(vms, key=lambda v: v["addr"])
    finally:
        os.close(fd_v)
        os.close(fd_s)
    return st


def _nsenter(ns: str, *cmd: str) -> None:
    """Run in a network namespace without remounting /sys (so the pinned program stays reachable)."""
    env.run(["nsenter", f"--net=/run/netns/{ns}", *cmd], " ".join(cmd[:4]))


def _htb_class(ns: str, dev: str, cls: str, rate: int, ceil: int, prio: int | None) -> None:
    cmd = ["tc", "class", "add", "dev", dev, "parent", "1:" if cls == "1:1" else "1:1", "classid", cls, "htb"]
    cmd += ["rate", str(rate), "ceil", str(ceil), "quantum", QUANTUM, "burst", "15k", "cburst", "15k"]
    _nsenter(ns, *cmd, *(["prio", str(prio)] if prio is not None else []))


def port_setup(
    ns: str, dev: str, rate_bps: int, n_vms: int, limit_bytes: int, scheduler: bool = True
) -> None:
    """The port's htb (a default leaf 1:ff for other traffic) and, with ``scheduler``, the tc program."""
    _nsenter(ns, "tc", "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "ff")
    _htb_class(ns, dev, "1:1", rate_bps, rate_bps, None)
    leaves = [("1:ff", 0, rate_bps // 20)]
    if scheduler:
        for i in range(1, n_vms + 1):
            leaves += [(unsat_class(i), 0, 8000), (sat_class(i), 1, 8000)]
    for cls, prio, rate in leaves:
        _htb_class(ns, dev, cls, rate, rate_bps, prio)
        _nsenter(ns, "tc", "qdisc", "add", "dev", dev, "parent", cls, "bfifo", "limit", str(limit_bytes))
    if scheduler:
        prog = str(Path(PIN_DIR, PROG))
        _nsenter(ns, "tc", "qdisc", "add", "dev", dev, "clsact")
        _nsenter(
            ns, "tc", "filter", "add", "dev", dev, "egress", "bpf", "object-pinned", prog, "direct-action"
        )
