"""``paccp testbed kvm-guest``: a QEMU guest with its own kernel and congestion control at a host port.

Topology (namespaces of :class:`paccp.datapath.core.netns.Net`, plus the guest's tap)::

    QEMU guest (own kernel, cc, N conns) --tap tq--+
                                                    h --port--> r --> d0 (the guest's receiver)
    namespace guest n1 (own cc, M conns) --veth----+             \\-> d1 (n1's receiver)

``h`` is the host: its port towards ``r`` is shaped at the port rate. Phases, each with fresh iperf3 runs:

1. ``alone``: the QEMU guest alone on an unshaped port: what TCG lets it push (the port rate must be
   well below it, or the run measures the emulator);
2. ``fifo``: one FIFO at the port rate (the host enforcer with ``enforce=False``): what the guest's
   connection count and congestion control take;
3. ``enforced``: the host enforcer (``paccp.datapath.host``) with each VM's pair, keyed by interface.

Each VM's delivered bytes are read on ``r``'s links to its receiver every 100 ms (host side, independent
of the enforcer and of the guests), and compared with PACCP's optimum on the port.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import re
import signal
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from paccp.datapath.core import netns
from paccp.datapath.core.drive import CpuMeter, judge
from paccp.datapath.guest.vm import CCS, Guest, require
from paccp.datapath.host.enforcer import HostEnforcer
from paccp.datapath.paccp import testbed
from paccp.errors import EnvironmentUnsupported, UserError

WINDOW_S = 0.1
WARMUP_S = 2.0
TOLERANCE = 0.10  # the issue's "within 10 % of its optimum share"
IN_WINDOWS = 0.90  # "in >= 90 % of 100 ms windows"
PORT = 5201
PHASES = ("alone", "fifo", "enforced")
OFFERED = "offered:"  # sample keys of the bytes each VM offered at its host interface
TRANSPORTS = (*CCS, "udp")
GUEST_TAP = "tq"
# port rates --rate auto picks from, highest first (TCG guests push tens of Mbit/s, less under load)
AUTO_RATES_BPS = (100_000_000, 50_000_000, 20_000_000, 10_000_000, 5_000_000, 2_000_000)
MIN_FRAMES = 20  # a VM's optimum share per window, in full frames, for the 10 % check to mean anything
HEADROOM = 2.0  # the guest alone pushes this many times the port rate (in >= 90 % of windows)
GUEST_SLACK_S = 8.0  # the guest's iperf3 runs this much longer than the phase (its start is slow)


@dataclass(frozen=True)
class Vm:
    """One VM of the experiment: name, pair, connections and its own transport (a TCP cc, or udp: iperf3
    UDP at no rate limit, a blaster)."""

    name: str
    theta_bps: int
    omega: float
    conns: int
    cc: str

    @property
    def tcp_cc(self) -> str:
        """The VM's net.ipv4.tcp_congestion_control (cubic for a UDP blaster: its control channel)."""
        return self.cc if self.cc in CCS else "cubic"

    def iperf_args(self) -> str:
        return f"-P {self.conns}" + (" -u -b 0 -l 1400" if self.cc == "udp" else "")


class _Sampler:
    """Every ``WINDOW_S``, the tx bytes of ``r``'s interfaces (a thread inside r's namespace)."""

    def __init__(
        self, ns_name: str, ifnames: dict[str, str], offered: Callable[[], dict[str, int]] | None = None
    ) -> None:
        self.ns_name = ns_name
        self.ifnames = ifnames  # vm name -> r's interface towards its receiver
        self.offered = offered  # the enforcer's bytes offered per VM (its BPF counters), as offered:<vm>
        self.samples: list[tuple[float, dict[str, int]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.error: BaseException | None = None

    def _read(self) -> dict[str, int]:
        counters: dict[str, int] = {}
        with open("/proc/thread-self/net/dev") as fh:
            for line in fh.readlines()[2:]:
                name, _, rest = line.partition(":")
                counters[name.strip()] = int(rest.split()[8])  # transmit bytes
        out = {vm: counters.get(ifn, 0) for vm, ifn in self.ifnames.items()}
        if self.offered is not None:
            out.update({f"{OFFERED}{vm}": b for vm, b in self.offered().items() if vm in self.ifnames})
        return out

    def _run(self) -> None:
        try:
            netns.setns_net(self.ns_name)
            nxt = time.monotonic()
            while not self._stop.is_set():
                self.samples.append((time.monotonic(), self._read()))
                nxt += WINDOW_S
                self._stop.wait(max(0.0, nxt - time.monotonic()))
        except BaseException as exc:  # reported by stop()
            self.error = exc

    def start(self) -> None:
        self._thread.start()

    def first_bytes(self, vm: str, timeout_s: float) -> float:
        """When ``vm``'s delivered bytes first grew (waits up to ``timeout_s``)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            s = list(self.samples)
            for (_t0, b0), (t1, b1) in itertools.pairwise(s):
                if b1[vm] > b0[vm] + 10_000:
                    return t1
            time.sleep(WINDOW_S)
        raise EnvironmentUnsupported(f"no traffic from {vm} within {timeout_s:g} s")

    def stop(self) -> list[tuple[float, dict[str, int]]]:
        self._stop.set()
        self._thread.join(timeout=5)
        if self.error is not None:
            raise EnvironmentUnsupported(f"sampler in {self.ns_name}: {self.error}")
        return self.samples


def window_rates(
    samples: list[tuple[float, dict[str, int]]], t_from: float, t_to: float
) -> dict[str, list[float]]:
    """Per VM, the delivered rate (bit/s) of every sampling window inside [t_from, t_to]."""
    inside = [s for s in samples if t_from <= s[0] <= t_to]
    out: dict[str, list[float]] = {vm: [] for vm in (inside[0][1] if inside else {})}
    for (t0, b0), (t1, b1) in itertools.pairwise(inside):
        for vm in out:
            out[vm].append((b1[vm] - b0[vm]) * 8 / (t1 - t0) if t1 > t0 else 0.0)
    return out


def within_share(rates: list[float], optimum_bps: float, tol: float = TOLERANCE) -> float:
    """Fraction of windows whose rate is within ``tol`` of ``optimum_bps``."""
    if not rates:
        return 0.0
    return sum(abs(r - optimum_bps) <= tol * optimum_bps for r in rates) / len(rates)


class _Bed:
    """The namespaces, the guest and the iperf3 runs of one experiment."""

    def __init__(self, net: netns.Net, guest: Guest, vms: tuple[Vm, Vm], port: str, r_ifs: dict[str, str]):
        self.net = net
        self.guest = guest
        self.vms = vms
        self.port = port
        self.r_ifs = r_ifs
        self.retransmits: dict[str, int | None] = {}

    def flows(
        self, seconds: float, outdir: Path, tag: str, offered: Callable[[], dict[str, int]] | None = None
    ) -> tuple[list[tuple[float, dict[str, int]]], float]:
        """Both VMs' (or only the guest's when ``tag`` is alone) iperf3 for ``seconds``; samples, t0."""
        gvm, nvm = self.vms
        active = [gvm] if tag == "alone" else [gvm, nvm]
        servers = []
        for i in range(len(active)):
            servers.append(self.net.spawn(f"d{i}", ["iperf3", "-s", "-1", "-p", str(PORT + i)]))
        for i in range(len(active)):
            self.net.wait_listening(f"d{i}", PORT + i)
        sampler = _Sampler(self.net.ns("r"), {vm.name: self.r_ifs[vm.name] for vm in active}, offered)
        sampler.start()
        # the guest's iperf3 takes a few seconds to start under TCG: it runs longer, and the clock of the
        # phase starts when its first bytes reach the receiver
        job = self.guest.spawn(
            f"iperf3 -c 10.202.0.2 -p {PORT} {gvm.iperf_args()} -t {seconds + GUEST_SLACK_S:g}"
        )
        t0 = sampler.first_bytes(gvm.name, timeout_s=GUEST_SLACK_S)
        client = None
        if tag != "alone":
            cmd = ["iperf3", "-c", "10.202.1.2", "-p", str(PORT + 1), *nvm.iperf_args().split()]
            client = self.net.spawn(
                "n1", [*cmd, "-t", f"{seconds:g}", "-J"], out=outdir / f"iperf-{tag}-{nvm.name}.json"
            )
        time.sleep(max(0.0, t0 + seconds - time.monotonic()))
        if client is not None:
            client.wait(timeout=30)
        # the guest's iperf3 ran with slack: stop it (SIGINT: it prints its summary) and collect it
        self.guest.run_rc("killall -INT iperf3", timeout=30)
        _rc, text = self.guest.wait(job, timeout=60, poll_s=1.0)
        (outdir / f"iperf-{tag}-{gvm.name}.txt").write_text(text)
        self.retransmits[tag] = guest_retransmits(text)
        samples = sampler.stop()
        for s in servers:
            with contextlib.suppress(Exception):
                s.send_signal(signal.SIGTERM)
        return samples, t0


def guest_retransmits(iperf_text: str) -> int | None:
    """Retransmissions of the guest's iperf3 client (its sender summary): > 0 means it was sending into
    a full queue, i.e. the network, not the emulator, limited it."""
    m = re.findall(
        r"^\[(?:SUM|\s*\d+)\]\s+\S+\s+sec\s+\S+\s+\S+\s+\S+\s+\S+\s+(\d+)\s+sender", iperf_text, re.M
    )
    return int(m[-1]) if m else None


def build(net: netns.Net) -> tuple[str, dict[str, str]]:
    """Namespaces h (host), r, n1, d0, d1; returns h's port and r's interface per receiver."""
    for node in ("h", "r"):
        net.add_node(node, router=True)
    for node in ("n1", "d0", "d1"):
        net.add_node(node)
    port, _ = net.link("h", "10.200.0.1/30", "r", "10.200.0.2/30")
    net.link("n1", "10.201.1.2/24", "h", "10.201.1.1/24")
    net.ip("n1", "route", "add", "default", "via", "10.201.1.1")
    r_ifs = {}
    for i in range(2):
        _, r_if = net.link(f"d{i}", f"10.202.{i}.2/24", "r", f"10.202.{i}.1/24")
        net.ip(f"d{i}", "route", "add", "default", "via", f"10.202.{i}.1")
        r_ifs[f"d{i}"] = r_if
    net.ip("h", "route", "add", "10.202.0.0/16", "via", "10.200.0.2")
    net.ip("r", "route", "add", "10.201.0.0/16", "via", "10.200.0.1")
    return port, r_ifs


def _phase_stats(
    samples: list[tuple[float, dict[str, int]]], t_from: float, t_to: float, opt: dict[str, float]
) -> dict[str, Any]:
    rates = window_rates(samples, t_from, t_to)
    out: dict[str, Any] = {}
    for vm, rs in rates.items():
        if vm.startswith(OFFERED):
            continue
        offered = rates.get(f"{OFFERED}{vm}")
        mean = statistics.fmean(rs) if rs else 0.0
        out[vm] = {
            "mean_mbps": round(mean / 1e6, 3),
            "windows": len(rs),
            "optimum_mbps": round(opt[vm] / 1e6, 3) if vm in opt else None,
            "within_10pct": round(within_share(rs, opt[vm]), 3) if vm in opt else None,
            # windows below half the optimum: the VM did not send (a TCG guest whose emulator was
            # descheduled); the check counts them, this says how many there were
            "below_half": sum(r < opt[vm] / 2 for r in rs) if vm in opt else None,
            # of those, the windows in which the VM also offered less than half its optimum at the host
            # (the enforcer's counter on its interface): the VM did not send, nothing held it back
            "below_half_not_offered": (
                sum(r < opt[vm] / 2 and o < opt[vm] / 2 for r, o in zip(rs, offered, strict=False))
                if vm in opt and offered is not None
                else None
            ),
            "window_mbps": [round(r / 1e6, 3) for r in rs],
        }
    out["total_mbps"] = round(sum(v["mean_mbps"] for v in out.values()), 3)
    return out


@contextlib.contextmanager
def _port_policy(
    net: netns.Net, port: str, rate_bps: int, vms: list[tuple[str, str, Vm]], enforce: bool
) -> Iterator[tuple[str, Callable[[], dict[str, int]] | None]]:
    """The port for one phase: the host enforcer, enforcing or (``enforce`` False) one FIFO at the port
    rate; enforcing, with a function returning the bytes each VM offered at its interface (its counters)."""
    enf = HostEnforcer(port=port, rate_bps=rate_bps, netns=net.ns("h"), enforce=enforce)
    try:
        for name, ifname, vm in vms:
            enf.add_vm(name, ifname, vm.theta_bps, vm.omega)
        enf.apply()
        what = "host enforcer (paccp.datapath.host)" + ("" if enforce else ", enforce=False: one FIFO")
        # the FIFO baseline attaches no program: no offered counters then
        yield what, (lambda: {n: u.offered_bytes for n, u in enf.usage().items()}) if enforce else None
    finally:
        enf.close()


def measurable(rate_bps: int, flows: list[testbed.FlowSpec]) -> bool:
    """Whether every VM's optimum share at ``rate_bps`` is at least :data:`MIN_FRAMES` full frames per
    window (below it, one frame more or less in a window is more than the 10 % tolerance's half)."""
    opt, _ = testbed.optimum_rates(float(rate_bps), flows)
    return min(opt) * WINDOW_S / 8 >= MIN_FRAMES * netns.FRAME_BYTES


def auto_rate(alone_windows_bps: list[float], flows: list[testbed.FlowSpec]) -> int:
    """The highest measurable rate of :data:`AUTO_RATES_BPS` at most half of what the guest alone pushes
    in >= 90 % of its windows (when both VMs send, the emulator shares the CPU with the other VM's flows
    and the forwarding, so alone it must push more than the port); the lowest measurable rate when none
    is (the first check then fails: the run measures the emulator)."""
    ok = [r for r in AUTO_RATES_BPS if measurable(r, flows)]
    if not ok:
        raise UserError("no port rate of --rate auto gives every VM 20 frames per 100 ms window")
    floor = _p10(alone_windows_bps) / HEADROOM
    return next((r for r in ok if r <= floor), ok[-1])


def _p10(xs: list[float]) -> float:
    return sorted(xs)[len(xs) // 10] if xs else 0.0


def run(
    rate_bps: int | None,
    duration_s: float,
    out: Path,
    guest_vm: Vm,
    ns_vm: Vm,
    accel: str = "tcg",
    phases_run: tuple[str, ...] = PHASES,
) -> dict[str, Any]:
    """The phases (of :data:`PHASES`); writes and returns summary.json's content. ``rate_bps`` None:
    :func:`auto_rate` (needs the ``alone`` phase)."""
    for vm in (guest_vm, ns_vm):
        if vm.cc not in TRANSPORTS or not 1 <= vm.conns <= 64:
            raise UserError(f"{vm.name}: cc must be one of {', '.join(TRANSPORTS)} and connections 1..64")
    if (
        not phases_run
        or not set(phases_run) <= set(PHASES)
        or (rate_bps is None and "alone" not in phases_run)
    ):
        raise UserError(f"phases must be some of {', '.join(PHASES)}, with alone for an auto rate")
    require(accel)  # QEMU, root, /dev/kvm for kvm: one-line errors before anything is created
    out.mkdir(parents=True, exist_ok=True)
    net = netns.Net()
    phases: dict[str, Any] = {}
    seconds = duration_s + WARMUP_S
    flows = [testbed.FlowSpec(vm.name, vm.theta_bps, vm.omega) for vm in (guest_vm, ns_vm)]
    opt: dict[str, float] = {}
    solver = ""
    cpu = CpuMeter()
    try:
        port, r_ifs = build(net)
        net.exec("n1", "sysctl", "-qw", f"net.ipv4.tcp_congestion_control={ns_vm.tcp_cc}")
        with Guest(
            GUEST_TAP, addr="10.201.0.2/24", host_addr="10.201.0.1/24", cc=guest_vm.tcp_cc, netns=net.ns("h"),
            accel=accel, workdir=out,
        ) as g:  # fmt: skip
            bed = _Bed(net, g, (guest_vm, ns_vm), port, {guest_vm.name: r_ifs["d0"], ns_vm.name: r_ifs["d1"]})
            ifs = [
                (guest_vm.name, GUEST_TAP, guest_vm),
                (ns_vm.name, _ns_ifname(net, "h", "10.201.1.1"), ns_vm),
            ]
            phases["boot_s"] = round(g.boot_s, 1)
            if "alone" in phases_run:
                samples, t0 = bed.flows(5.0, out, "alone")
                phases["alone"] = _phase_stats(samples, t0 + 1.0, t0 + 4.0, {})
                alone = window_rates(samples, t0 + 1.0, t0 + 4.0)[guest_vm.name]
                phases["alone"]["p10_mbps"] = round(_p10(alone) / 1e6, 3)
                phases["alone"]["rate_chosen"] = rate_bps is None
                if rate_bps is None:
                    rate_bps = auto_rate(alone, flows)
            assert rate_bps is not None
            opt_list, solver = testbed.optimum_rates(float(rate_bps), flows)
            opt = {guest_vm.name: opt_list[0], ns_vm.name: opt_list[1]}
            for tag, on in (("fifo", False), ("enforced", True)):
                if tag not in phases_run:
                    continue
                with _port_policy(net, port, rate_bps, ifs, on) as (policy, offered):
                    cpu.start()
                    samples, t0 = bed.flows(seconds, out, tag, offered)
                    busy = cpu.stop()
                phases[tag] = _phase_stats(samples, t0 + WARMUP_S, t0 + seconds, opt)
                phases[tag]["policy"] = policy
                phases[tag]["cpu_busy"] = round(busy, 3) if busy is not None else None
                phases[tag]["guest_retransmits"] = bed.retransmits.get(tag)
    finally:
        net.cleanup()
    assert rate_bps is not None
    summary = _summary(rate_bps, duration_s, guest_vm, ns_vm, opt, solver, phases, accel)
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary


def _ns_ifname(net: netns.Net, node: str, addr: str) -> str:
    res = net.exec(node, "ip", "-o", "-4", "addr", "show")
    m = re.search(rf"^\d+:\s+(\S+)\s+inet {re.escape(addr)}/", res.stdout, re.M)
    if m is None:
        raise EnvironmentUnsupported(f"no interface with {addr} in {net.ns(node)}")
    return m.group(1)


def _summary(
    rate_bps: int, duration_s: float, gvm: Vm, nvm: Vm, opt: dict[str, float], solver: str,
    phases: dict[str, Any], accel: str,
) -> dict[str, Any]:  # fmt: skip
    rate = rate_bps / 1e6
    checks = []
    if "alone" in phases:
        alone = phases["alone"][gvm.name]["mean_mbps"]
        p10 = phases["alone"]["p10_mbps"]
        checks.append(
            {
                "statement": f"the {accel.upper()} guest alone pushes 2x the port rate in >= 90 % of windows",
                "paper": "the testbed measures the scheme, not the machine",
                "ours": f"guest alone: mean {alone:.1f}, 10th pct {p10:.1f} Mbit/s; port {rate:g} Mbit/s",
                "holds": p10 >= HEADROOM * rate,
            }
        )
    checks.append(
        {
            "statement": f"every VM's optimum share is >= {MIN_FRAMES} full frames per 100 ms window",
            "paper": "a 10 % tolerance per window is larger than one frame",
            "ours": f"smallest optimum {min(opt.values()) / 1e6:.2f} Mbit/s = "
            f"{min(opt.values()) * WINDOW_S / 8 / netns.FRAME_BYTES:.1f} frames per window",
            "holds": min(opt.values()) * WINDOW_S / 8 >= MIN_FRAMES * netns.FRAME_BYTES,
        }
    )
    fifo = phases.get("fifo")
    if fifo:
        g = fifo[gvm.name]["mean_mbps"]
        opt_g = opt[gvm.name] / 1e6
        verdict = judge(
            {"port": fifo["total_mbps"] / rate}, fifo.get("cpu_busy"), f"the {rate:g} Mbit/s port"
        )
        checks.append(
            {
                "statement": "without enforcement the port is driven (FIFO, both VMs backlogged)",
                "paper": "bulk flows fill the port",
                "ours": f"utilisation {fifo['total_mbps'] / rate:.2f}"
                + (f"; {verdict.line}" if verdict.line else ""),
                "holds": verdict.driven,
            }
        )
        checks.append(
            {
                "statement": f"no enforcement: the guest ({gvm.conns} x {gvm.cc}) takes more than its share",
                "paper": "a sender-side scheme enforces nothing against a guest's own congestion control",
                "ours": f"guest {g:.2f} Mbit/s vs optimum {opt_g:.2f} ({g / opt_g:.2f}x)",
                "holds": g > (1 + TOLERANCE) * opt[gvm.name] / 1e6,
            }
        )
    enf = phases.get("enforced")
    if enf:
        for vm in (gvm, nvm):
            st = enf[vm.name]
            checks.append(
                {
                    "statement": f"enforced: {vm.name} within 10 % of its optimum in >= 90 % of windows",
                    "paper": "issue 26: every VM within 10 % of its optimum share in >= 90 % of windows",
                    "ours": f"{st['within_10pct']:.0%} of {st['windows']} windows; mean "
                    f"{st['mean_mbps']:.2f} vs optimum {st['optimum_mbps']:.2f} Mbit/s; "
                    f"{st['below_half']} windows below half ({st['below_half_not_offered']} not offered)",
                    "holds": st["within_10pct"] >= IN_WINDOWS,
                }
            )
        g = enf[gvm.name]["mean_mbps"]
        checks.append(
            {
                "statement": f"enforced: the guest's {gvm.conns} connections gain <= 10 % over its share",
                "paper": "issue 26: a guest that opens more connections gains <= 10 % over its share",
                "ours": f"guest {g:.2f} vs optimum {opt[gvm.name] / 1e6:.2f} Mbit/s",
                "holds": g <= (1 + TOLERANCE) * opt[gvm.name] / 1e6,
            }
        )
    return {
        "experiment": "kvm-guest",
        "rate_mbps": rate,
        "duration_s": duration_s,
        "warmup_s": WARMUP_S,
        "window_s": WINDOW_S,
        "accel": accel,
        "vms": {
            vm.name: {"theta_mbps": vm.theta_bps / 1e6, "omega": vm.omega, "conns": vm.conns, "cc": vm.cc}
            for vm in (gvm, nvm)
        },
        "optimum_mbps": {k: round(v / 1e6, 3) for k, v in opt.items()},
        "optimum_solver": solver,
        "phases": phases,
        "checks": checks,
    }
