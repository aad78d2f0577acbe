"""MPTCP BG/WC testbeds (paper's Fig. 11 topology, scaled): S_i -> sw1 =(shared link)=> sw2 -> R_i.

Every server S_i is a namespace and a cgroup (its VM) with two addresses on one veth: 10.71.i.2 (its BG
address, the connection's first subflow) and 10.72.i.2 (a ``subflow`` MPTCP endpoint: the in-kernel path
manager opens the WC subflow from it). ``bpf/bgwc.bpf.c`` marks each subflow by its source address and
gives WC subflows the (A_l/K)^2 congestion control. S_i's egress limits BG to its guarantee (htb); every
switch egress (sw1 -> sw2, sw2 -> R_i) serves BG strictly before WC (:mod:`paccp.datapath.mptcp.prio`). The
senders are MPTCP sockets (``IPPROTO_MPTCP``) writing as fast as they can; throughput per class is read from
the htb class counters of each server's egress over the measured window (bytes sent, retransmissions
included).
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from paccp.datapath.core import sim_predict
from paccp.datapath.core import usage as testbed_usage
from paccp.datapath.core.drive import CpuMeter, judge
from paccp.datapath.core.netns import Net, testbed
from paccp.datapath.mptcp import control as mptcp
from paccp.datapath.mptcp import prio
from paccp.errors import EnvironmentUnsupported, UserError

PORT = 5400
WARMUP_S = 2.0  # seconds before the measured window
# (WC pacing divisor, BG pacing boost, WC TCP_NOTSENT_LOWAT bytes): see bpf/bgwc.bpf.c. Measured at
# 100 Mbit/s (docs/howto/datapath.md): without them (1, 1, 0) the kernel's scheduler parks MBs on the WC
# subflows and the BG subflows fall to 0.65-0.90 of their guarantees; BG-only connections hold 0.986.


@dataclass(frozen=True)
class Tuning:
    """Knobs steering the kernel's default scheduler (``bpf/bgwc.bpf.c``, map bgwc_conf)."""

    wc_pace_div: int = 1  # WC subflows report pacing estimate / this
    bg_boost: int = 1  # BG subflows report pacing estimate x this (also their TSQ budget)
    wc_lowat: int = 0  # TCP_NOTSENT_LOWAT of WC subflows (0: unset)
    wc_fixed_pace: bool = False  # WC subflows all report the link rate as their pacing rate

    def apply(self, rate_bps: int) -> None:
        fixed = rate_bps if self.wc_fixed_pace else 0
        mptcp.set_tuning(self.wc_pace_div, self.bg_boost, self.wc_lowat, fixed)


TUNING = Tuning(1, 10, 32768, True)
KERNEL_DEFAULT = Tuning()
# Socket buffers (per-namespace sysctls, min default max): the paper's "large receive buffer" remedy and
# its sender-side counterpart. Measured (docs/howto/datapath.md, tools/mptcp_diag.py): with the kernel's
# defaults (wmem 16 KB default / 4 MB max) a WC segment lost in the low-priority queue stalls the connection's
# DATA_ACK; the send buffer fills with data behind the hole and the BG subflow's htb class runs dry for
# 80-300 ms at a time (s1, s2 at 0.90-0.93 of their guarantees on the wire). With 4 MB default send
# buffers every BG class sends at 1.00 of its guarantee.
SND_WMEM = "4096 4194304 16777216"
RCV_RMEM = "4096 4194304 33554432"
# The switches' low-priority (WC) queue in packets (None: the 2 ms of _queue()); see exp_table3.
SWITCH_QUEUE_PKTS: int | None = None
U_PAPER_BPS = 75_000_000  # the paper's bandwidth unit U: A_l = B_g / U
PAPER_RATE_BPS = 1_000_000_000

SINK = """
import socket, sys, threading
srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262)
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("0.0.0.0", int(sys.argv[1]))); srv.listen(64)
def drain(c):
    while c.recv(1 << 18):
        pass
while True:
    c, _ = srv.accept()
    threading.Thread(target=drain, args=(c,), daemon=True).start()
"""

SENDER = """
import socket, sys, threading, time
dst, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
start, stop = float(sys.argv[4]), float(sys.argv[5])
time.sleep(max(0.0, start))
end = time.monotonic() + stop - start
buf = b"x" * 65536
def run():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262)
    s.connect((dst, port))
    s.settimeout(0.5)
    while time.monotonic() < end:
        try:
            s.send(buf)
        except TimeoutError:
            pass
    s.close()
ts = [threading.Thread(target=run) for _ in range(n)]
[t.start() for t in ts]
[t.join() for t in ts]
"""


@dataclass
class Server:
    """One sending server (VM): guarantee, WC competition level, connections, active window (s)."""

    name: str
    guarantee_bps: int
    a_l: int = 1
    conns: int = 1
    start_s: float = 0.0
    stop_s: float | None = None  # None: until the end
    wc: bool = True  # False: no WC subflow (no subflow endpoint): BG-only
    off: tuple[float, float] | None = None  # stopped from off[0] to off[1] s (a new connection after)


@dataclass
class Result:
    """Per-server BG and WC rates (bit/s) over the window, shared-link utilisation, CPU, verdict."""

    bg_bps: dict[str, float] = field(default_factory=dict)  # goodput (bytes acked) of BG subflows
    wc_bps: dict[str, float] = field(default_factory=dict)  # goodput of WC subflows
    bg_sent_bps: dict[str, float] = field(default_factory=dict)  # bytes the VM's BG class sent (htb)
    wc_sent_bps: dict[str, float] = field(default_factory=dict)  # incl. retransmissions
    metered_bps: dict[str, float] = field(default_factory=dict)  # the datapath's meter (bgwc_bytes)
    link_bps: float = 0.0
    link_bg_bps: float = 0.0
    link_wc_bps: float = 0.0
    cpu_busy: float | None = None
    subflows: dict[str, int] = field(default_factory=dict)
    vm_policy: dict[str, dict[str, Any]] = field(default_factory=dict)  # A_l, K, live WC subflows
    # per server over the window: kernel counters of its namespace (nstat): RTOs, retransmitted
    # segments, subflows marked stale, MPTCP-level reinjections
    counters: dict[str, dict[str, int]] = field(default_factory=dict)
    window: testbed_usage.Window | None = None  # the measured window, ns since the Unix epoch


COUNTERS = ("TcpExtTCPTimeouts", "TcpRetransSegs", "MPTcpExtSubflowStale", "MPTcpExtMPTCPRetrans")


def _nstat(net: Net, node: str) -> dict[str, int]:
    res = net.exec(node, "nstat", "-az", "--json", check=False)
    try:
        data = json.loads(res.stdout)
    except json.JSONDecodeError:
        return {}
    return {k: int(v) for table in data.values() for k, v in table.items() if k in COUNTERS}


def _queue(rate_bps: int) -> int:
    return max(32 * 1514, rate_bps // 8 // 1000 * 2)  # 2 ms, at least 32 packets


def build(net: Net, servers: list[Server], rate_bps: int, policy: bool) -> dict[str, Path]:
    """Namespaces, addresses, MPTCP endpoints, tc and BPF classification; returns each server's cgroup."""
    q = switch_queue(rate_bps)
    bg, wc = mptcp.TOS["bg"], mptcp.TOS["wc"]
    net.add_node("sw1", router=True)
    net.add_node("sw2", router=True)
    up, _down = net.link("sw1", "10.90.0.1/30", "sw2", "10.90.0.2/30")
    prio.strict_priority_port(net, "sw1", up, rate_bps, q, bg, wc)
    net.ip("sw1", "route", "add", "10.80.0.0/16", "via", "10.90.0.2")
    for sub in ("10.71.0.0/16", "10.72.0.0/16"):
        net.ip("sw2", "route", "add", sub, "via", "10.90.0.1")
    cgs: dict[str, Path] = {}
    for i, s in enumerate(servers, start=1):
        sname, rname = s.name, f"r{i}"
        net.add_node(sname)
        net.add_node(rname)
        se, _sw = net.link(sname, f"10.71.{i}.2/24", "sw1", f"10.71.{i}.1/24")
        net.ip(sname, "addr", "add", f"10.72.{i}.2/24", "dev", se)
        net.ip("sw1", "addr", "add", f"10.72.{i}.1/24", "dev", _sw)
        net.ip(sname, "route", "add", "default", "via", f"10.71.{i}.1")
        _d, _re = net.link("sw2", f"10.80.{i}.1/24", rname, f"10.80.{i}.2/24")
        net.ip(rname, "route", "add", "default", "via", f"10.80.{i}.1")
        prio.strict_priority_port(net, "sw2", _d, rate_bps, q, bg, wc)
        prio.vm_port(net, sname, se, rate_bps, s.guarantee_bps, 4 * _queue(rate_bps), bg, wc)
        net.ip(sname, "mptcp", "limits", "set", "subflows", "2", "add_addr_accepted", "0")
        if s.wc:
            net.ip(sname, "mptcp", "endpoint", "add", f"10.72.{i}.2", "dev", se, "subflow")
        net.ip(rname, "mptcp", "limits", "set", "subflows", "8", "add_addr_accepted", "0")
        if SND_WMEM:
            net.exec(sname, "sysctl", "-qw", f"net.ipv4.tcp_wmem={SND_WMEM}")
        if RCV_RMEM:
            net.exec(rname, "sysctl", "-qw", f"net.ipv4.tcp_rmem={RCV_RMEM}")
        mptcp.addr_set(f"10.71.{i}.2", "bg")
        mptcp.addr_set(f"10.72.{i}.2", "wc")
        cgs[sname] = net.cgroup(sname)
        mptcp.vm_set(str(cgs[sname]), s.a_l, 0, policy)
    return cgs


def _subflows(net: Net, node: str) -> dict[str, tuple[str, int]]:
    """Established subflows of ``node`` to the sink: socket -> (class by local address, bytes acked)."""
    res = net.exec(node, "ss", "-tniH", "state", "established", f"dport = :{PORT}", check=False)
    out: dict[str, tuple[str, int]] = {}
    key = cls = ""
    for line in res.stdout.splitlines():
        if not line.startswith(("\t", " ")):
            parts = line.split()
            if len(parts) >= 4:
                key = f"{parts[-2]}>{parts[-1]}"
                cls = "wc" if parts[-2].startswith("10.72.") else "bg"
            continue
        m = re.search(r"bytes_acked:(\d+)", line)
        if key:
            out[key] = (cls, int(m.group(1)) if m else 0)
            key = ""
    return out


def _goodput(a: dict[str, tuple[str, int]], b: dict[str, tuple[str, int]], dt: float) -> dict[str, float]:
    """Bytes acked per class between two snapshots (subflows born in between count from 0), in bit/s."""
    out = {"bg": 0.0, "wc": 0.0}
    for k, (cls, acked) in b.items():
        out[cls] += (acked - a.get(k, (cls, 0))[1]) * 8 / dt
    return out


def run(
    servers: list[Server],
    rate_bps: int,
    duration_s: float,
    policy: bool = True,
    omit_s: float | None = None,
    tuning: Tuning | None = None,
) -> Result:
    """Run the servers' MPTCP connections for ``omit_s + duration_s`` and measure the last ``duration_s``.

    ``tuning``: how the kernel's scheduler is steered, see :class:`Tuning` (default :data:`TUNING`).
    """
    if rate_bps <= 0 or duration_s <= 0:
        raise UserError("rate and duration must be > 0")
    omit = WARMUP_S if omit_s is None else omit_s
    return run_windows(servers, rate_bps, [(omit, omit + duration_s)], policy, tuning)[0]


@dataclass
class _Snap:
    classes: dict[str, dict[str, int]]
    link: dict[str, int]
    subflows: dict[str, tuple[dict[str, tuple[str, int]], float]]
    t: float
    counters: dict[str, dict[str, int]]
    wall_ns: int
    metered: dict[str, int]


def _metered() -> dict[str, int]:
    """Each VM's bytes delivered as the datapath meters them, by cgroup name (the server's)."""
    return {v["cgroup"].rsplit("/", 1)[-1]: int(v["bytes_acked"]) for v in mptcp.status().get("vms", [])}


def _snap(net: Net, names: list[str]) -> _Snap:
    t = time.monotonic()
    classes = {n: prio.class_bytes(net, n, "e0") for n in names}
    link = prio.class_bytes(net, "sw1", "e0")
    subflows = {n: (_subflows(net, n), time.monotonic()) for n in names}
    metered = _metered()
    return _Snap(classes, link, subflows, t, {n: _nstat(net, n) for n in names}, time.time_ns(), metered)


def _result(a: _Snap, b: _Snap, cpu: float | None) -> Result:
    res = Result(cpu_busy=cpu, window=testbed_usage.Window(a.wall_ns, b.wall_ns))
    dt = b.t - a.t
    for n in a.classes:
        g = _goodput(a.subflows[n][0], b.subflows[n][0], b.subflows[n][1] - a.subflows[n][1])
        res.bg_bps[n], res.wc_bps[n] = g["bg"], g["wc"]
        res.bg_sent_bps[n] = (b.classes[n].get(prio.HIGH, 0) - a.classes[n].get(prio.HIGH, 0)) * 8 / dt
        res.wc_sent_bps[n] = (b.classes[n].get(prio.LOW, 0) - a.classes[n].get(prio.LOW, 0)) * 8 / dt
        res.metered_bps[n] = (b.metered.get(n, 0) - a.metered.get(n, 0)) * 8 / dt
    res.link_bg_bps = (b.link.get(prio.HIGH, 0) - a.link.get(prio.HIGH, 0)) * 8 / dt
    res.link_wc_bps = (b.link.get(prio.LOW, 0) - a.link.get(prio.LOW, 0)) * 8 / dt
    res.link_bps = (b.link.get("1:1", 0) - a.link.get("1:1", 0)) * 8 / dt
    res.subflows = {n: len(v[0]) for n, v in b.subflows.items()}  # at the window's end
    res.counters = {
        n: {k: b.counters[n].get(k, 0) - a.counters[n].get(k, 0) for k in COUNTERS} for n in a.counters
    }
    return res


def run_windows(
    servers: list[Server],
    rate_bps: int,
    windows: list[tuple[float, float]],
    policy: bool = True,
    tuning: Tuning | None = None,
) -> list[Result]:
    """Run the servers and measure each window (seconds after the senders start, in order)."""
    if rate_bps <= 0 or not windows or any(not 0 <= a < b for a, b in windows):
        raise UserError("rate must be > 0 and windows (start, end) with 0 <= start < end")
    mptcp.load()
    (TUNING if tuning is None else tuning).apply(rate_bps)
    total = max(b for _a, b in windows)
    out: list[Result] = []
    with testbed() as net:
        try:
            cgs = build(net, servers, rate_bps, policy)
            for i, _s in enumerate(servers, start=1):
                net.spawn(f"r{i}", ["python3", "-c", SINK, str(PORT)])
            for i, _s in enumerate(servers, start=1):
                net.wait_listening(f"r{i}", PORT)
            for i, s in enumerate(servers, start=1):
                spans = [(s.start_s, total + 0.5 if s.stop_s is None else s.stop_s)]
                if s.off is not None:  # off for a while, then a new connection
                    spans = [(spans[0][0], s.off[0]), (s.off[1], spans[0][1])]
                for start, stop in spans:
                    cmd = [SENDER, f"10.80.{i}.2", str(PORT), str(s.conns), str(start), str(stop)]
                    net.spawn(s.name, ["python3", "-c", *cmd], cgroup=cgs[s.name])
            t_start = time.monotonic()
            names = [s.name for s in servers]
            for a, b in windows:
                time.sleep(max(0.0, t_start + a - time.monotonic()))
                cpu = CpuMeter()
                cpu.start()
                first = _snap(net, names)
                time.sleep(max(0.0, t_start + b - time.monotonic()))
                last = _snap(net, names)
                res = _result(first, last, cpu.stop())
                res.vm_policy = {v["cgroup"].rsplit("/", 1)[-1]: v for v in mptcp.status().get("vms", [])}
                out.append(res)
        finally:
            for i, _s in enumerate(servers, start=1):
                mptcp.addr_clear(f"10.71.{i}.2")
                mptcp.addr_clear(f"10.72.{i}.2")
            net.cleanup()
            mptcp.reap()
    return out


def scaled(paper_bps: float, rate_bps: int) -> int:
    """A paper rate (on its 1 Gbit/s testbed) scaled to this testbed's link rate."""
    return round(paper_bps * rate_bps / PAPER_RATE_BPS)


def a_level(guarantee_paper_bps: int) -> int:
    """The paper's A_l = B_g / U with U = 75 Mbit/s, rounded to an integer >= 1 (400 -> 5, 100 -> 1)."""
    return max(1, round(guarantee_paper_bps / U_PAPER_BPS))


def mbps(x: float) -> float:
    return round(x / 1e6, 2)


def write_summary(out: Path, summary: dict[str, Any], records: list[Any] | None = None) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    if records is not None:
        summary["usage_records"] = len(records)
        testbed_usage.write(out, records)
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary


def driven(res: Result, rate_bps: int, demand_bps: float) -> dict[str, Any]:
    """Link verdict: a shared link whose senders demand more than it carries should be >= 0.85 busy."""
    util = res.link_bps / rate_bps
    v = judge({"shared": util} if demand_bps >= rate_bps else {"shared": 1.0}, res.cpu_busy,
              f"the {rate_bps / 1e6:g} Mbit/s shared link")  # fmt: skip
    return {"utilisation": round(util, 3), "cpu_busy": res.cpu_busy, "driven": v.driven, "line": v.line}


def switch_queue(rate_bps: int) -> int:
    """The switches' per-class queue in bytes (:data:`SWITCH_QUEUE_PKTS` or 2 ms of the link)."""
    return _queue(rate_bps) if SWITCH_QUEUE_PKTS is None else SWITCH_QUEUE_PKTS * 1514


def simulate(
    servers: list[Server], rate_bps: int, sim_s: float | None, *, star: bool = False, policy: bool = True
) -> dict[str, dict[str, float]] | None:
    """The simulator's BG / WC Mb/s per server for the same setup (None: ``sim_s`` is None)."""
    if sim_s is None:
        return None
    cfg = [(s.name, s.guarantee_bps, s.a_l, s.conns) for s in servers]
    return sim_predict.mptcp(
        cfg, rate_bps, switch_queue(rate_bps), star=star, policy=policy, duration_s=sim_s
    )


def compare_row(quantity: str, paper: Any, testbed_v: Any, sim: Any) -> dict[str, str]:
    """One row of the paper / testbed / simulator comparison."""
    return {"quantity": quantity, "paper": str(paper), "testbed": str(testbed_v),
            "simulator": "-" if sim is None else str(sim)}  # fmt: skip


def usage(experiment: str, run: str, servers: list[Server], res: Result) -> list[Any]:
    """The window's usage records (BG and WC per server), :mod:`paccp.datapath.core.usage`."""
    if res.window is None:
        return []
    g = {s.name: s.guarantee_bps for s in servers}
    return testbed_usage.mptcp_records(experiment, run, res.window, g, res.bg_bps, res.wc_bps)


def require_mptcp() -> None:
    """MPTCP must be enabled (net.mptcp.enabled)."""
    try:
        if Path("/proc/sys/net/mptcp/enabled").read_text().strip() != "1":
            raise EnvironmentUnsupported("MPTCP is disabled (sysctl net.mptcp.enabled=1)")
    except OSError:
        raise EnvironmentUnsupported("this kernel has no MPTCP (/proc/sys/net/mptcp)") from None
