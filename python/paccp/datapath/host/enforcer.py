"""The host agent: PACCP enforced at the host side of each VM's interface, whatever runs in the guest.

API (independent of how the guest is made: a namespace's veth or a QEMU guest's tap, given its name)::

    enf = HostEnforcer(port="e0", rate_bps=100_000_000, netns="h")   # netns None: this namespace
    enf.add_vm("vm1", "tap0", theta_bps=30_000_000, omega=1.0)
    enf.apply()            # builds the port's htb, attaches the BPF programs, starts the agent loop
    enf.usage()            # per VM: bytes offered/sent, drops, backlog, allocation, rate (VmUsage)
    enf.close()            # stops the loop, removes what apply() added (also on error)

What it sets up (all in the host's namespace):

- **The host's port** (``port``, the interface towards the fabric) gets an htb: root ``1:1`` at
  ``rate_bps`` (the port), a leaf ``1:ff`` (prio 0, 1 % of the port) for the host's own traffic, and per
  VM i a leaf ``1:(0x100+i)`` (prio 1) with a byte-limited bfifo. A VM's whole traffic is one leaf: its
  connection count inside the guest does not matter, and UDP waits (and is dropped) in its own leaf.
- **BPF** (``bpf/host.bpf.c``): ``host_vm_in`` on the clsact ingress of each VM interface (the guest's
  packets) counts them and marks them with the VM's leaf; ``host_port_out`` on the port's clsact egress
  turns the mark into skb->priority, which htb takes as the leaf. Keyed by interface, not by address.
- **The agent loop** (a thread, every ``interval_s``): reads each leaf's counters over netlink; a VM is
  *active* while its leaf has a backlog or it sent more than 0.5 % of the port in the last tick (held
  ``hold_s``). It solves PACCP's objective on the port among the active VMs (:func:`water_fill`: max
  sum omega log x, sum x <= port, x >= theta) and sets each active leaf's htb rate to its x_i (idle VMs:
  a floor of 0.5 % of the port); ceil = the VM's cap (default the port), quantum in proportion to x_i.
  htb serves every leaf up to its rate and lends what a leaf leaves unused to the others in proportion
  to their quanta, so the split is PACCP's optimum among backlogged VMs and the port stays work
  conserving.
- **Fabric law** (optional, :class:`FabricLaw`): for a bottleneck beyond the port, shared with other
  hosts, the host measures the queueing delay on the path itself (ICMP echo to a peer host, answered by
  the peer's kernel; kernel receive timestamps; the minimum per tick minus the minimum ever seen) and
  shapes each VM's aggregate to r_i = max(theta_i, omega_i lam) where lam, one number per host, follows
  AIMD: a tick with delay above ``target_s``: lam (1 - alpha / 2), alpha DCTCP's moving share of such
  ticks; else, while the VMs use their rates, lam + ``step_frac`` x port. The leaf's rate and ceil are
  min(r_i, x_i) (not work conserving beyond r_i). Hosts that see the same fabric queue converge to the
  same lam, so the split at the shared link is PACCP's optimum, whatever the guests' transports.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from paccp.datapath.core import bpfsys, env
from paccp.datapath.host.kernel_io import _Netlink, _Prober, _realtime
from paccp.datapath.paccp.params import check_pair
from paccp.errors import EnvironmentUnsupported, UserError

PIN_ROOT = os.environ.get("PACCP_HOST_PIN_DIR", "/sys/fs/bpf/paccp_host")
PROG_IN, PROG_OUT = "host_vm_in", "host_port_out"
VM_MAP = "host_vms"
VM_VAL = struct.Struct("<IIQQ")  # classid, pad, packets, bytes (bpf/host.bpf.c struct host_vm)
HOST_CLASS = 0x100FF  # 1:ff, the host's own traffic (default class)
HOST_SHARE = 0.01  # of the port, reserved for the host's own traffic (probes, control)
IDLE_FLOOR = 0.005  # of the port: the rate of an idle VM's leaf until the agent sees it active
ACTIVE_SHARE = 0.005  # of the port per tick: a VM that sent more than this is active
FRAME = 1514
DECREASE_ROUND_S = 0.05  # the fabric law decreases at most once per this long
USED_SHARE = 0.9  # the fabric law increases only while the VMs send at least this share of their rates
SAMPLE_SLACK_S = 0.003  # a counter sample is recorded only if reading it took at most this (median 0.7 ms)
MAX_VMS = 0xEF00


def vm_class(index: int) -> int:
    """The htb leaf of VM ``index`` (1-based): 1:(0x100 + index)."""
    return 0x10000 | (0x100 + index)


def water_fill(cap_bps: float, pairs: list[tuple[float, float]]) -> list[float]:
    """PACCP's optimum on one link: x_i = max(theta_i, omega_i * lam) with sum x = ``cap_bps``.

    ``pairs`` = (theta_bps, omega) with omega > 0. Guarantees summing above the capacity are scaled by
    one factor first (every VM gets the same fraction of its guarantee, as the simulator's paccp-host).
    """
    if not pairs:
        return []
    sum_theta = sum(t for t, _ in pairs)
    scale = cap_bps / sum_theta if sum_theta > cap_bps else 1.0
    theta = [t * scale for t, _ in pairs]
    pinned: set[int] = set()
    lam = 0.0
    for _ in range(len(pairs) + 1):
        free_cap = cap_bps - sum(theta[i] for i in pinned)
        free_omega = sum(o for i, (_, o) in enumerate(pairs) if i not in pinned)
        lam = max(0.0, free_cap / free_omega) if free_omega > 0 else 0.0
        now = {i for i, (_, o) in enumerate(pairs) if theta[i] > o * lam}
        if now == pinned:
            break
        pinned = now
    return [max(theta[i], o * lam) for i, (_, o) in enumerate(pairs)]


@dataclass
class FabricLaw:
    """The fabric reaction: probe ``peer`` (an IPv4 address beyond the shared bottleneck)."""

    peer: str
    target_s: float = 0.002  # queueing delay above this marks a tick
    step_frac: float = 0.002  # additive increase per agent interval and unit of omega, as a share of the port
    gain: float = 1 / 16  # DCTCP's gain of the marked share
    probe_every_s: float = 0.002


@dataclass
class VmUsage:
    """One VM as the host sees it (cumulative counters since :meth:`HostEnforcer.apply`)."""

    name: str
    ifname: str
    theta_bps: int
    omega: float
    offered_packets: int = 0  # counted by host_vm_in on the VM's interface
    offered_bytes: int = 0
    sent_packets: int = 0  # through the VM's leaf on the port (wire bytes)
    sent_bytes: int = 0
    drops: int = 0  # dropped in the VM's leaf
    backlog_bytes: int = 0
    alloc_bps: float = 0.0  # the leaf's rate set by the agent
    rate_bps: float = 0.0  # sent over the last tick
    active: bool = False


@dataclass
class _Vm:
    usage: VmUsage
    index: int
    cap_bps: int
    ifindex: int = 0
    last_active: float = -1e9
    set_rate: int = 0
    set_ceil: int = 0


@dataclass
class HostEnforcer:
    """PACCP at one host's port for the VMs behind it (see the module docstring)."""

    port: str
    rate_bps: int
    netns: str | None = None
    interval_s: float = 0.02
    hold_s: float = 0.2
    queue_bytes: int = 0  # per VM leaf; 0: 5 ms of the port, at least 64 frames
    enforce: bool = True  # False: one FIFO at the port rate, counters only (the baseline)
    fabric: FabricLaw | None = None
    rt_priority: int = 10  # SCHED_FIFO priority of the agent's threads (0: the default policy)
    realtime: bool = False  # whether the agent loop got it
    lam_bps: float = 0.0  # fabric law: the host's rate per unit of omega
    _calm_until: float = 0.0
    record_every_s: float = 0.1  # the agent appends (time.monotonic(), every VM's sent bytes) to ``series``
    series: list[tuple[float, dict[str, int]]] = field(default_factory=list)
    ticks: int = 0
    read_s: list[float] = field(default_factory=list)  # how long each tick's counter read took
    fabric_delay_s: list[tuple[float, float]] = field(default_factory=list)  # (monotonic t, delay) per tick
    _vms: dict[str, _Vm] = field(default_factory=dict)
    _pin: str = ""
    _thread: threading.Thread | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _touched: list[str] = field(default_factory=list)
    _error: BaseException | None = None
    _t0: float = 0.0

    def __post_init__(self) -> None:
        if not 1_000_000 <= self.rate_bps <= 100_000_000_000:
            raise UserError("the host port's rate must be in 1 Mbit/s .. 100 Gbit/s")
        if not 0.001 <= self.interval_s <= 1.0:
            raise UserError("the agent's interval must be in 1 ms .. 1 s")
        if not self.queue_bytes:
            # a guest's sender that the (loaded) host does not schedule for a few ms still has its leaf
            # backlogged: 5 ms of the port (24 connections' minimum windows also fit at 100 Mbit/s)
            self.queue_bytes = max(64 * FRAME, self.rate_bps // 8 // 200)

    # --- configuration ---------------------------------------------------------------------------------

    def add_vm(
        self, name: str, ifname: str, theta_bps: int, omega: float, cap_bps: int | None = None
    ) -> None:
        """VM ``name`` sends through host-side interface ``ifname`` with pair (theta, omega)."""
        check_pair(theta_bps, omega)
        if self._thread is not None:
            raise UserError("add every VM before apply()")
        if name in self._vms or any(v.usage.ifname == ifname for v in self._vms.values()):
            raise UserError(f"VM {name!r} or interface {ifname!r} added twice")
        if len(self._vms) >= MAX_VMS:
            raise UserError(f"at most {MAX_VMS} VMs per port")
        cap = self.rate_bps if cap_bps is None else min(cap_bps, self.rate_bps)
        self._vms[name] = _Vm(VmUsage(name, ifname, int(theta_bps), float(omega)), len(self._vms) + 1, cap)

    # --- tc / BPF plumbing -----------------------------------------------------------------------------

    def _tc(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """tc in the host's namespace (nsenter: unlike ``ip netns exec`` it keeps /sys/fs/bpf)."""
        pre = ["nsenter", f"--net=/run/netns/{self.netns}"] if self.netns else []
        res = subprocess.run([*pre, "tc", *args], capture_output=True, text=True, check=False)
        if check and res.returncode != 0:
            raise EnvironmentUnsupported(f"tc {' '.join(args[:6])}: {res.stderr.strip()[-200:]}")
        return res

    def _htb_class(self, verb: str, classid: int, rate: int, ceil: int, prio: int, quantum: int) -> None:
        self._tc(
            "class",
            verb,
            "dev",
            self.port,
            "parent",
            "1:1",
            "classid",
            _cls(classid),
            "htb",
            "rate",
            f"{rate}bit",
            "ceil",
            f"{ceil}bit",
            "burst",
            "15k",
            "cburst",
            "15k",
            "quantum",
            str(quantum),
            "prio",
            str(prio),
        )

    def _load(self) -> None:
        env.require_env()
        env.ensure_bpffs()
        self._pin = str(Path(PIN_ROOT, f"{os.getpid()}-{id(self):x}"))
        Path(PIN_ROOT).mkdir(mode=0o700, exist_ok=True)
        env.load_pinned("host.bpf.o", self._pin, "the host enforcer's programs")

    def apply(self) -> None:
        """Build the port's htb, attach the programs and start the agent loop (undone by :meth:`close`)."""
        if not self._vms:
            raise UserError("no VM added")
        try:
            self._apply()
        except BaseException:
            self.close()
            raise

    def _apply(self) -> None:
        self._load()
        c = self.rate_bps
        self._touched.append(self.port)
        self._tc("qdisc", "replace", "dev", self.port, "root", "handle", "1:", "htb", "default", "ff")
        self._tc(
            "class",
            "add",
            "dev",
            self.port,
            "parent",
            "1:",
            "classid",
            "1:1",
            "htb",
            "rate",
            f"{c}bit",
            "ceil",
            f"{c}bit",
            "burst",
            "15k",
            "cburst",
            "15k",
        )
        host_rate = int(c * HOST_SHARE) if self.enforce else c
        self._htb_class("add", HOST_CLASS, host_rate, c, 0, FRAME)
        self._tc("qdisc", "add", "dev", self.port, "parent", "1:ff", "bfifo", "limit", str(self.queue_bytes))
        if not self.enforce:  # the baseline: the port's htb alone (one FIFO), no program, no leaf
            for vm in self._vms.values():
                vm.ifindex = _ifindex(self.netns, vm.usage.ifname)
            self._start()
            return
        fd = bpfsys.obj_get(str(Path(self._pin, VM_MAP)))
        try:
            for vm in self._vms.values():
                vm.ifindex = _ifindex(self.netns, vm.usage.ifname)
                bpfsys.update(fd, struct.pack("<I", vm.ifindex), VM_VAL.pack(vm_class(vm.index), 0, 0, 0))
        finally:
            os.close(fd)
        floor = self._floor()
        for vm in self._vms.values():
            vm.set_rate, vm.set_ceil = floor, vm.cap_bps
            self._htb_class("add", vm_class(vm.index), floor, vm.cap_bps, 1, FRAME)
            self._tc(
                "qdisc",
                "add",
                "dev",
                self.port,
                "parent",
                _cls(vm_class(vm.index)),
                "bfifo",
                "limit",
                str(self.queue_bytes),
            )
        self.lam_bps = self.rate_bps / sum(v.usage.omega for v in self._vms.values())  # the port's split
        self._tc("qdisc", "add", "dev", self.port, "clsact")
        self._tc(
            "filter",
            "add",
            "dev",
            self.port,
            "egress",
            "bpf",
            "direct-action",
            "object-pinned",
            str(Path(self._pin, PROG_OUT)),
        )
        for vm in self._vms.values():
            self._touched.append(vm.usage.ifname)
            self._tc("qdisc", "add", "dev", vm.usage.ifname, "clsact")
            self._tc(
                "filter",
                "add",
                "dev",
                vm.usage.ifname,
                "ingress",
                "bpf",
                "direct-action",
                "object-pinned",
                str(Path(self._pin, PROG_IN)),
            )
        self._start()

    def _start(self) -> None:
        self._t0 = time.monotonic()
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name=f"host-agent-{self.port}", daemon=True)
        self._thread.start()

    def _floor(self) -> int:
        return max(8000, int(self.rate_bps * IDLE_FLOOR))

    def close(self) -> None:
        """Stop the loop; remove the qdiscs and programs apply() added and the pinned maps."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        for dev in reversed(self._touched):
            self._tc("qdisc", "del", "dev", dev, "clsact", check=False)
            if dev == self.port:
                self._tc("qdisc", "del", "dev", dev, "root", check=False)
        self._touched.clear()
        if self._pin:
            shutil.rmtree(self._pin, ignore_errors=True)
            self._pin = ""

    def __enter__(self) -> HostEnforcer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the agent loop --------------------------------------------------------------------------------

    def usage(self) -> dict[str, VmUsage]:
        """The last sample of every VM (copies); raises what stopped the agent loop, if anything did."""
        if self._error is not None:
            raise EnvironmentUnsupported(f"the host agent stopped: {self._error}")
        with self._lock:
            return {n: VmUsage(**vars(v.usage)) for n, v in self._vms.items()}

    def prog_stats(self) -> dict[str, tuple[int, int]]:
        """(run_time_ns, run_cnt) of each of this enforcer's programs (kernel BPF statistics: counted only
        while ``kernel.bpf_stats_enabled`` is 1)."""
        out = {}
        for prog in (PROG_IN, PROG_OUT):
            res = subprocess.run(
                ["bpftool", "-j", "prog", "show", "pinned", str(Path(self._pin, prog))],
                capture_output=True,
                text=True,
                check=False,
            )
            try:
                d = json.loads(res.stdout)
            except json.JSONDecodeError:
                d = {}
            out[prog] = (int(d.get("run_time_ns", 0)), int(d.get("run_cnt", 0)))
        return out

    def interval_achieved_s(self) -> float:
        """Mean time between the agent's ticks so far (the loaded machine may stretch it)."""
        return (time.monotonic() - self._t0) / self.ticks if self.ticks else 0.0

    def _loop(self) -> None:
        try:
            self.realtime = _realtime(self.rt_priority)
            with (
                _Netlink(self.netns, self.port) as nl,
                _Prober(self.netns, self.fabric, self.rt_priority) as probe,
            ):
                self._run(nl, probe)
        except BaseException as exc:  # reported by usage(); the experiment stops on it
            self._error = exc

    def _run(self, nl: _Netlink, probe: _Prober) -> None:
        fd = bpfsys.obj_get(str(Path(self._pin, VM_MAP)))
        try:
            prev: dict[int, int] = {}
            t_prev = time.monotonic()
            next_rec = t_prev
            alpha = 0.0
            while not self._stop.wait(max(0.0, t_prev + self.interval_s - time.monotonic())):
                ta = time.monotonic()
                stats, t = nl.class_stats(), time.monotonic()
                # the counters were read within [ta, t]: a sample whose read was preempted is not recorded
                tight = t - ta <= SAMPLE_SLACK_S
                self.read_s.append(t - ta)
                dt = max(1e-6, t - t_prev)
                delay = probe.queueing_delay() if self.fabric else None
                marked = delay is not None and self.fabric is not None and delay > self.fabric.target_s
                if self.fabric is not None and delay is not None:
                    alpha = (1 - self.fabric.gain) * alpha + self.fabric.gain * (1.0 if marked else 0.0)
                    self.fabric_delay_s.append((t, delay))
                with self._lock:
                    for vm in self._vms.values():
                        u = vm.usage
                        raw = bpfsys.lookup(fd, struct.pack("<I", vm.ifindex), VM_VAL.size)
                        if raw:
                            _c, _p, u.offered_packets, u.offered_bytes = VM_VAL.unpack(raw)
                        s = stats.get(vm_class(vm.index))
                        if s is not None:
                            u.rate_bps = (s["bytes"] - prev.get(vm.index, s["bytes"])) * 8 / dt
                            u.sent_bytes, u.sent_packets = s["bytes"], s["packets"]
                            u.drops, u.backlog_bytes = s["drops"], s["backlog"]
                            prev[vm.index] = s["bytes"]
                        if u.backlog_bytes > 0 or u.rate_bps > ACTIVE_SHARE * self.rate_bps:
                            vm.last_active = t
                        u.active = t - vm.last_active <= self.hold_s
                    if self.fabric is not None and delay is not None:
                        self._law(marked, alpha, dt)
                    if self.enforce:
                        self._allocate(nl)
                    if ta >= next_rec and tight:  # samples at least record_every_s apart
                        sample = {n: v.usage.sent_bytes for n, v in self._vms.items()}
                        self.series.append(((ta + t) / 2, sample))
                        next_rec = (ta + t) / 2 + self.record_every_s
                t_prev = t
                self.ticks += 1
        finally:
            os.close(fd)

    def _fabric_rate(self, vm: _Vm) -> float:
        """The law's rate of a VM: max(theta, omega x the host's price-like share per unit of omega)."""
        return max(float(vm.usage.theta_bps), vm.usage.omega * self.lam_bps)

    def _law(self, marked: bool, alpha: float, dt: float) -> None:
        """One step of the law over ``dt`` seconds, on the host's rate per unit of omega (``lam_bps``;
        per unit of time, not per tick: hosts whose agents tick at different paces move at the same speed).
        Additive increase and multiplicative decrease of one number per host: hosts that see the same
        fabric queue converge to the same value (Chiu and Jain), and within a host the VMs' rates are
        max(theta_i, omega_i lam) by construction, which is PACCP's optimum at the shared link."""
        assert self.fabric is not None
        k = dt / self.interval_s
        active = [v for v in self._vms.values() if v.usage.active]
        if marked:
            if (
                time.monotonic() >= self._calm_until
            ):  # once per round, as DCTCP (the queue takes a while to drain)
                self.lam_bps *= 1 - alpha / 2
                self._calm_until = time.monotonic() + DECREASE_ROUND_S
        elif active and sum(v.usage.rate_bps for v in active) >= USED_SHARE * sum(
            min(self._fabric_rate(v), v.usage.alloc_bps or v.cap_bps) for v in active
        ):  # increase only a rate the VMs use (the law's "if the connection used its window")
            self.lam_bps += self.fabric.step_frac * self.rate_bps * k
        self.lam_bps = min(max(self.lam_bps, 1000.0), float(self.rate_bps))

    def _allocate(self, nl: _Netlink) -> None:
        vms = list(self._vms.values())
        active = [v for v in vms if v.usage.active]
        floor = self._floor()
        cap = self.rate_bps * (1 - HOST_SHARE) - floor * (len(vms) - len(active))
        x = water_fill(cap, [(float(v.usage.theta_bps), v.usage.omega) for v in active])
        for v in vms:
            v.usage.alloc_bps = 0.0
        for v, xi in zip(active, x, strict=True):
            v.usage.alloc_bps = min(xi, v.cap_bps)
        for v in vms:
            rate = max(floor, int(v.usage.alloc_bps)) if v.usage.active else floor
            ceil = v.cap_bps
            if self.fabric is not None:
                rate = max(floor, min(rate, int(self._fabric_rate(v))))
                ceil = rate
            if abs(rate - v.set_rate) > 0.005 * v.set_rate or ceil != v.set_ceil:
                quantum = min(200_000, max(FRAME, rate // 8 // 500))  # 2 ms of the rate
                nl.change_class(vm_class(v.index), rate, ceil, quantum)
                v.set_rate, v.set_ceil = rate, ceil


def _cls(classid: int) -> str:
    return f"{classid >> 16:x}:{classid & 0xFFFF:x}"


def _ifindex(netns: str | None, ifname: str) -> int:
    pre = ["ip", "-n", netns] if netns else ["ip"]
    res = subprocess.run([*pre, "-o", "link", "show", "dev", ifname], capture_output=True, text=True)
    try:
        return int(res.stdout.split(":", 1)[0])
    except ValueError:
        raise UserError(f"no interface {ifname!r} in {netns or 'this namespace'}") from None
