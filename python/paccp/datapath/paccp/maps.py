"""The PACCP datapath's pins and BPF maps: names, binary layouts (mirror of the structs in
``bpf/paccp.bpf.c``), their codecs and :class:`Maps`, the pinned maps opened lazily."""

from __future__ import annotations

import os
import socket
import struct
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from paccp.datapath.core import bpfsys
from paccp.errors import EnvironmentUnsupported

Q20 = 1 << 20

PARAMS = struct.Struct("<QII")  # theta_bps, omega_q20, flags
RULE_KEY = struct.Struct("<QII")  # owner cgroup id (0 = host-wide), port, pad
VM_STATE = struct.Struct("<IIQQIIQQ")  # active, pad, bytes, pair_theta, pair_omega, pad, since, bytes0
FLOW = struct.Struct("<QIIHHIQIIIIQQQQQQQQ")
SLICE_KEY = struct.Struct("<QQIIQ")  # id, theta, omega_q20, kind, start_ns
SLICE = struct.Struct("<QQ")  # ns, bytes
GLOBAL = struct.Struct("<QQ")  # rcos_q20, next_flow_id
U32 = struct.Struct("<I")
U64 = struct.Struct("<Q")
I32 = struct.Struct("<i")

SOURCES = {0: "default", 1: "vm", 2: "rule", 3: "socket"}
KIND_FLOW = 0
KIND_VM = 1


def omega_to_q20(omega: float | Decimal) -> int:
    """omega (> 0) as unsigned Q20; at least 1 (2^-20)."""
    return max(1, round(Decimal(str(omega)) * Q20))


def q20_to_omega(q: int) -> Decimal:
    """Q20 omega as a Decimal rounded to 6 places (exact for omegas with few binary digits)."""
    return (Decimal(q) / Q20).quantize(Decimal("0.000001")).normalize()


def pack_params(theta_bps: int, omega: float | Decimal) -> bytes:
    return PARAMS.pack(theta_bps, omega_to_q20(omega), 1)


def ip4(v: int) -> str:
    """An IPv4 address stored in network order read as a little-endian u32."""
    return socket.inet_ntoa(struct.pack("<I", v))


@dataclass(frozen=True)
class FlowRec:
    """One row of ``paccp_flows``."""

    flow_id: int
    cgid: int
    saddr: str
    daddr: str
    sport: int
    dport: int
    ended: bool
    theta_bps: int
    omega_q20: int
    source: str
    cwnd: int
    srtt_us: int
    wmin_q20: int
    bytes_acked: int
    start_ns: int
    last_ns: int
    pair_since_ns: int
    pair_bytes0: int
    netns: int
    vmid: int

    @classmethod
    def decode(cls, key: bytes, raw: bytes) -> FlowRec:
        v = FLOW.unpack(raw)
        return cls(
            flow_id=U64.unpack(key)[0],
            cgid=v[0],
            saddr=ip4(v[1]),
            daddr=ip4(v[2]),
            sport=v[3],
            dport=v[4],
            ended=bool(v[5]),
            theta_bps=v[6],
            omega_q20=v[7],
            source=SOURCES.get(v[8], str(v[8])),
            cwnd=v[9],
            srtt_us=v[10],
            wmin_q20=v[11],
            bytes_acked=v[12],
            start_ns=v[13],
            last_ns=v[14],
            pair_since_ns=v[15],
            pair_bytes0=v[16],
            netns=v[17],
            vmid=v[18],
        )


@dataclass(frozen=True)
class VmState:
    """One row of ``paccp_vm_state``."""

    cgid: int
    active: int
    bytes_acked: int
    pair_theta: int
    pair_omega_q20: int
    pair_since_ns: int
    pair_bytes0: int

    @classmethod
    def decode(cls, key: bytes, raw: bytes) -> VmState:
        v = VM_STATE.unpack(raw)
        return cls(U64.unpack(key)[0], v[0], v[2], v[3], v[4], v[6], v[7])


@dataclass(frozen=True)
class SliceRec:
    """One closed (theta, omega) interval of a flow (kind 0) or a cgroup (kind 1)."""

    id: int
    kind: int
    theta_bps: int
    omega_q20: int
    start_ns: int
    ns: int
    nbytes: int

    @classmethod
    def decode(cls, key: bytes, raw: bytes) -> SliceRec:
        i, theta, omega, kind, start = SLICE_KEY.unpack(key)
        ns, b = SLICE.unpack(raw)
        return cls(i, kind, theta, omega, start, ns, b)


PIN_DIR = os.environ.get("PACCP_PIN_DIR", "/sys/fs/bpf/paccp")


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


# cgroup programs of a VM: (bpftool attach type, pinned program name)
CGROUP_PROGS = (("sock_ops", SOCKOPS_NAME), ("setsockopt", "paccp_cc_guard"))


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
