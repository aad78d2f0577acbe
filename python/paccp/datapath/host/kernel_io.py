"""The host enforcer's kernel I/O: htb leaf counters and rate changes over netlink, and the ICMP prober
that measures the queueing delay beyond the host (:mod:`paccp.datapath.host.enforcer` uses both)."""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import threading
import time
from typing import TYPE_CHECKING, Any

from paccp.errors import EnvironmentUnsupported

if TYPE_CHECKING:
    from paccp.datapath.host.enforcer import FabricLaw

ROOT_CLASS = 0x10001  # 1:1, the port's htb root class


def _realtime(priority: int) -> bool:
    """Run the calling thread under SCHED_FIFO (a host agent is a small periodic task that must not wait
    behind the load it polices; on Linux the policy is per thread). False when not permitted."""
    if priority <= 0:
        return False
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
    except (OSError, AttributeError):
        return False
    return True


class _Netlink:
    """htb leaf counters and rate changes over netlink (pyroute2): a few ms per tick, where forking tc
    takes 50-150 ms on a loaded machine."""

    def __init__(self, netns: str | None, port: str) -> None:
        self.netns, self.port = netns, port
        self.ipr: Any = None
        self.idx = 0

    def __enter__(self) -> _Netlink:
        from pyroute2 import IPRoute, NetNS

        self.ipr = NetNS(self.netns) if self.netns else IPRoute()
        found = self.ipr.link_lookup(ifname=self.port)
        if not found:
            raise EnvironmentUnsupported(f"port {self.port} not found")
        self.idx = found[0]
        return self

    def __exit__(self, *exc: object) -> None:
        if self.ipr is not None:
            self.ipr.close()

    def class_stats(self) -> dict[int, dict[str, int]]:
        out = {}
        for c in self.ipr.get_classes(index=self.idx):
            st = c.get_attr("TCA_STATS2")
            basic = st.get_attr("TCA_STATS_BASIC") if st else None
            queue = st.get_attr("TCA_STATS_QUEUE") if st else None
            out[int(c["handle"])] = {
                "bytes": int(basic["bytes"]) if basic else 0,
                "packets": int(basic["packets"]) if basic else 0,
                "drops": int(queue["drops"]) if queue else 0,
                "backlog": int(queue["backlog"]) if queue else 0,
            }
        return out

    def change_class(self, handle: int, rate: int, ceil: int, quantum: int) -> None:
        self.ipr.tc(
            "change-class",
            "htb",
            self.idx,
            handle,
            parent=ROOT_CLASS,
            rate=f"{rate}bit",
            ceil=f"{ceil}bit",
            burst=15000,
            cburst=15000,
            quantum=quantum,
            prio=1,
        )


ICMP_ECHO, ICMP_REPLY = 8, 0
SO_TIMESTAMPNS = 35  # Linux (asm-generic/socket.h); SCM_TIMESTAMPNS has the same value


def _icmp_csum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF


class _Prober:
    """ICMP echoes to the fabric peer (its kernel answers, no process to schedule on the far side): the
    round-trip time from just before sendto() to the reply's kernel receive timestamp. The queueing delay
    of a tick is its smallest RTT minus the smallest ever seen (the minima filter out scheduling noise of
    a loaded machine). ``law`` None: a no-op."""

    def __init__(self, netns: str | None, law: FabricLaw | None, rt_priority: int = 0) -> None:
        self.netns, self.law, self.rt_priority = netns, law, rt_priority
        self.sock: socket.socket | None = None
        self.thread: threading.Thread | None = None
        self.stop = threading.Event()
        self.samples: list[float] = []
        self.base: float | None = None
        self.lock = threading.Lock()

    def __enter__(self) -> _Prober:
        if self.law is None:
            return self
        got: list[socket.socket | BaseException] = []

        def opener() -> None:  # a thread of its own: setns() moves only the calling thread
            try:
                if self.netns:
                    from paccp.datapath.core.netns import setns_net

                    setns_net(self.netns)
                s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
                s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
                s.settimeout(self.law.probe_every_s if self.law else 0.05)
                got.append(s)
            except BaseException as exc:
                got.append(exc)

        t = threading.Thread(target=opener)
        t.start()
        t.join()
        if isinstance(got[0], BaseException):
            raise EnvironmentUnsupported(f"fabric probe socket: {got[0]}")
        self.sock = got[0]
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join(timeout=2)
        if self.sock is not None:
            self.sock.close()

    def _run(self) -> None:
        assert self.sock is not None and self.law is not None
        _realtime(self.rt_priority)
        ident = os.getpid() & 0xFFFF
        sent: dict[int, int] = {}
        seq = 0
        while not self.stop.is_set():
            seq = (seq + 1) & 0xFFFF
            body = struct.pack("!BBHHH", ICMP_ECHO, 0, 0, ident, seq) + b"paccp-host-probe"
            pkt = body[:2] + struct.pack("!H", _icmp_csum(body)) + body[4:]
            sent[seq] = time.time_ns()
            with contextlib.suppress(OSError):
                self.sock.sendto(pkt, (self.law.peer, 0))
            deadline = time.monotonic() + self.law.probe_every_s
            while time.monotonic() < deadline:
                try:
                    data, anc, _f, _a = self.sock.recvmsg(256, 64)
                except (TimeoutError, OSError):
                    break
                hl = (data[0] & 0x0F) * 4
                typ, _code, _ck, rid, rseq = struct.unpack("!BBHHH", data[hl : hl + 8])
                if typ != ICMP_REPLY or rid != ident or rseq not in sent:
                    continue
                rx = next(
                    (
                        struct.unpack("qq", d[:16])
                        for lvl, ty, d in anc
                        if lvl == socket.SOL_SOCKET and ty == SO_TIMESTAMPNS
                    ),
                    None,
                )
                rx_ns = rx[0] * 1_000_000_000 + rx[1] if rx else time.time_ns()
                rtt = (rx_ns - sent.pop(rseq)) / 1e9
                with self.lock:
                    self.samples.append(rtt)
                    self.base = rtt if self.base is None else min(self.base, rtt)
            if len(sent) > 256:
                sent.clear()
            left = deadline - time.monotonic()
            if left > 0:
                time.sleep(left)

    def queueing_delay(self) -> float | None:
        """Smallest RTT since the previous call minus the smallest ever seen (None: no sample yet)."""
        with self.lock:
            got, self.samples = self.samples, []
            base = self.base
        if not got or base is None:
            return None
        return max(0.0, min(got) - base)
