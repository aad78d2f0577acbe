"""Network-namespace testbeds that run a real kernel datapath with iperf3 or small Python senders.

Every run gets a unique id; namespaces are ``<id>-<node>``, cgroups live under ``<cgroup2>/paccp-<id>/``.
Routers shape their egress with HTB + a byte-limited bfifo (no netem on this kernel: the RTT is the tiny
veth RTT plus queueing). Everything created is removed on exit, including on Ctrl-C/SIGTERM.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from paccp.datapath.core import env
from paccp.errors import EnvironmentUnsupported

# The receivers' processing delay: tcpdump at the receivers (dumbbell and Fig. 7) put the time from a data
# segment's arrival to the ACK it triggers at 4-10 us median, 57-110 us p90, 26-47 us mean; the engine's
# twins draw it from an exponential with a 30 us mean (``ack_delay``). Without it the deterministic engine
# locks two-way and small-window flows into phase patterns the kernel's timing noise breaks
# (docs/explanation/fidelity.md).
ACK_DELAY_NS = 30_000
FRAME_BYTES = 1514  # a full-size frame as HTB and bfifo count it (Ethernet header included)


def _sh(cmd: list[str], check: bool = True) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(cmd, capture_output=True, text=True)
    if check and res.returncode != 0:
        raise EnvironmentUnsupported(f"{' '.join(cmd)}: {res.stderr.strip().splitlines()[-1:]}")
    return res


@dataclass
class Net:
    """Namespaces, links, cgroups and processes of one run; :meth:`cleanup` removes all of them."""

    run_id: str = field(
        default_factory=lambda: os.environ.get("PACCP_NETNS_PREFIX", "p") + secrets.token_hex(3)
    )
    namespaces: list[str] = field(default_factory=list)
    procs: list[subprocess.Popen[str]] = field(default_factory=list)
    cgroups: list[Path] = field(default_factory=list)
    cg_parent: Path | None = None
    gso: bool = False
    # when _run_flows started each iperf3 client, seconds after the first (for the simulation's starts)
    client_starts: list[float] = field(default_factory=list)
    # run after everything is removed (a scheme drops what belonged to the removed cgroups)
    on_cleanup: list[Callable[[], None]] = field(default_factory=list)
    _ifn: dict[str, int] = field(default_factory=dict)

    def ns(self, node: str) -> str:
        return f"{self.run_id}-{node}"

    def add_node(self, node: str, router: bool = False) -> None:
        name = self.ns(node)
        _sh(["ip", "netns", "add", name])
        self.namespaces.append(name)
        self.ip(node, "link", "set", "lo", "up")
        if router:
            self.exec(node, "sysctl", "-qw", "net.ipv4.ip_forward=1")

    def exec(self, node: str, *cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return _sh(["ip", "netns", "exec", self.ns(node), *cmd], check=check)

    def ip(self, node: str, *args: str) -> None:
        _sh(["ip", "-n", self.ns(node), *args])

    def _ifname(self, node: str) -> str:
        n = self._ifn.get(node, 0)
        self._ifn[node] = n + 1
        return f"e{n}"

    def link(self, a: str, a_addr: str, b: str, b_addr: str, no_gso: bool | None = None) -> tuple[str, str]:
        """A veth pair between nodes a and b with /24 (or given prefix) addresses; returns the if names."""
        ia, ib = self._ifname(a), self._ifname(b)
        _sh(
            [
                "ip",
                "link",
                "add",
                ia,
                "netns",
                self.ns(a),
                "type",
                "veth",
                "peer",
                "name",
                ib,
                "netns",
                self.ns(b),
            ]
        )
        for node, ifn, addr in ((a, ia, a_addr), (b, ib, b_addr)):
            self.ip(node, "addr", "add", addr, "dev", ifn)
            self.ip(node, "link", "set", ifn, "up")
            # no TSO/GSO super-packets: realistic per-packet drops at the byte-limited queue
            if (not self.gso) if no_gso is None else no_gso:
                _sh(["ip", "-n", self.ns(node), "link", "set", ifn, "gso_max_segs", "1"], check=False)
        return ia, ib

    def shape(self, node: str, ifname: str, rate_bps: int, limit_bytes: int) -> None:
        """HTB at ``rate_bps`` + byte-limited bfifo on the egress of ``ifname``; u32 sends all to it."""
        dev = ["dev", ifname]
        self.exec(node, "tc", "qdisc", "add", *dev, "root", "handle", "1:", "htb", "default", "10")
        self.exec(
            node, "tc", "class", "add", *dev, "parent", "1:", "classid", "1:10", "htb",
            "rate", str(rate_bps), "ceil", str(rate_bps), "burst", "15k", "cburst", "15k", "quantum", "30000",
        )  # fmt: skip
        self.exec(
            node,
            "tc",
            "qdisc",
            "add",
            *dev,
            "parent",
            "1:10",
            "handle",
            "10:",
            "bfifo",
            "limit",
            str(limit_bytes),
        )
        self.exec(
            node, "tc", "filter", "add", *dev, "parent", "1:", "protocol", "ip", "prio", "1",
            "u32", "match", "u32", "0", "0", "flowid", "1:10",
        )  # fmt: skip

    def class_bytes(self, node: str, ifname: str) -> int:
        """Bytes sent by the shaped class (from ``tc -s class show``)."""
        res = self.exec(node, "tc", "-s", "class", "show", "dev", ifname, check=False)
        m = re.search(r"class htb 1:10 .*?Sent (\d+) bytes", res.stdout, re.S)
        return int(m.group(1)) if m else 0

    def cgroup(self, vm: str) -> Path:
        if self.cg_parent is None:
            self.cg_parent = env.cgroup2_root() / f"paccp-{self.run_id}"
            self.cg_parent.mkdir()
        p = self.cg_parent / vm
        p.mkdir()
        self.cgroups.append(p)
        return p

    def spawn(
        self, node: str, cmd: list[str], cgroup: Path | None = None, out: Path | None = None
    ) -> subprocess.Popen[str]:
        """Start ``cmd`` in a namespace (and a cgroup: it is moved there before exec)."""
        full = ["ip", "netns", "exec", self.ns(node), *cmd]
        if cgroup is not None:
            full = ["sh", "-c", f'echo $$ > "{cgroup}/cgroup.procs" && exec "$@"', "sh", *full]
        stdout = open(out, "w") if out is not None else subprocess.DEVNULL  # noqa: SIM115
        p = subprocess.Popen(full, stdout=stdout, stderr=subprocess.PIPE, text=True, start_new_session=True)
        self.procs.append(p)
        return p

    def wait_listening(self, node: str, *ports: int, timeout_s: float = 10.0) -> None:
        """Return once TCP ``ports`` all listen in ``node`` (servers just spawned; MPTCP listeners show
        as TCP ones); :class:`EnvironmentUnsupported` if they do not within ``timeout_s``."""
        want = {str(p) for p in ports}
        deadline = time.monotonic() + timeout_s
        while True:
            res = self.exec(node, "ss", "-Htln", check=False)
            rows = [line.split() for line in res.stdout.splitlines()]
            listening = {r[3].rsplit(":", 1)[-1] for r in rows if len(r) > 3}
            if want <= listening:
                return
            if time.monotonic() > deadline:
                raise EnvironmentUnsupported(
                    f"{self.ns(node)}: ports {sorted(want - listening)} not listening after {timeout_s:g} s"
                )
            time.sleep(0.02)

    def cleanup(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    p.wait(timeout=5)
        for name in self.namespaces:
            res = _sh(["ip", "netns", "pids", name], check=False)
            for pid in res.stdout.split():
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(pid), signal.SIGKILL)
            _sh(["ip", "netns", "del", name], check=False)
        # removing a VM's cgroup closes its metering (final slice, exporter series stop): the BPF
        # cgroup_rmdir program does it at rmdir, the scheme's reap (on_cleanup) is the fallback
        for cg in [*reversed(self.cgroups), *([self.cg_parent] if self.cg_parent else [])]:
            for _ in range(50):
                try:
                    cg.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.1)
        for hook in self.on_cleanup:
            with contextlib.suppress(Exception):
                hook()
        self.namespaces.clear()
        self.procs.clear()
        self.cgroups.clear()


@contextlib.contextmanager
def testbed() -> Iterator[Net]:
    """A :class:`Net` that is cleaned up on exit, Ctrl-C or SIGTERM (each scheme loads its own datapath)."""
    env.require_env()
    if shutil.which("iperf3") is None:
        raise EnvironmentUnsupported("iperf3 is not installed")
    net = Net()
    old = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP)}

    def _raise(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    for s in old:
        signal.signal(s, _raise)
    try:
        yield net
    finally:
        net.cleanup()
        for s, h in old.items():
            signal.signal(s, h)


def queue_bytes(rate_bps: int) -> int:
    """Bottleneck buffer: 1 ms at the bottleneck rate, at least 32 full-size packets."""
    return max(32 * 1514, rate_bps // 8 // 1000)


def build_dumbbell(net: Net, rate_bps: int, n_pairs: int) -> str:
    """Routers L and R joined by one link, shaped on L's side at ``rate_bps`` (a bfifo of
    :func:`queue_bytes`); pair i is sender ``s{i}`` (10.201.i.2) behind L and receiver ``d{i}``
    (10.202.i.2) behind R. Returns L's bottleneck interface."""
    net.add_node("L", router=True)
    net.add_node("R", router=True)
    l_if, _r_if = net.link("L", "10.200.0.1/30", "R", "10.200.0.2/30")
    net.shape("L", l_if, rate_bps, queue_bytes(rate_bps))
    for i in range(n_pairs):
        s, d = f"s{i}", f"d{i}"
        net.add_node(s)
        net.add_node(d)
        net.link(s, f"10.201.{i}.2/24", "L", f"10.201.{i}.1/24")
        net.link(d, f"10.202.{i}.2/24", "R", f"10.202.{i}.1/24")
        net.ip(s, "route", "add", "default", "via", f"10.201.{i}.1")
        net.ip(d, "route", "add", "default", "via", f"10.202.{i}.1")
    net.ip("L", "route", "add", "10.202.0.0/16", "via", "10.200.0.2")
    net.ip("R", "route", "add", "10.201.0.0/16", "via", "10.200.0.1")
    return l_if


def setns_net(name: str) -> None:
    """Move the calling thread into network namespace ``name`` (setns; mounts, hence /sys/fs/bpf, unchanged).

    Unlike ``ip netns exec``, this does not remount /sys, so pinned maps stay reachable.
    """
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(f"/run/netns/{name}", os.O_RDONLY)
    try:
        if libc.setns(fd, 0x40000000) != 0:  # CLONE_NEWNET
            err = ctypes.get_errno()
            raise OSError(err, f"setns({name}): {os.strerror(err)}")
    finally:
        os.close(fd)
