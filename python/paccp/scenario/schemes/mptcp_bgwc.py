"""Scheme ``mptcp_bgwc``: MPTCP bandwidth guarantee + work conservation (Ali, Chen, Khan, IEEE Access 2019).

Scenario section (SPEC section 6; the paper is ``papers/mptcp-bandwidth-guarantee-ieee-access-2019.md``)::

    [scheme]
    kind = "mptcp_bgwc"
    variant = "ours"          # ours | bg_only | wc_only | free_competition (below)
    wc_subflows = 1           # N: WC subflows per connection; 1 = on the BG subflow's path,
                              # "paths" = M, one per disjoint path (e.g. one per spine); 1 <= N <= M
    scheduler = "bg_first"    # bg_first (the paper's Algorithm 1) | least_rtt (MPTCP's default)
    subflow_cc = "reno"       # reno (uncoupled, the paper's choice) | lia (RFC 6356) | olia
    fair_wc = true            # fair work conservation: WC increase alpha_w = (A_l / K)^2 per RTT (Eq. 7)
    unit = "75Mbit"           # U of the policy A_l = max(1, floor(B_g / U))
    competition_levels = {}   # A_l given per VM id (>= 1); VMs not listed follow the policy
    bg_burst = "..."          # token-bucket burst of a VM's BG shaper; default rate x 1 ms + 1 MTU
    receive_buffer = "6MiB"   # connection-level receive buffer: a size, or "dynamic" (Eq. 1)
    rcvbuf_beta = 3.0         # beta of the dynamic size B >= beta * max RTT_i * sum BW_i
    penalize = true           # Linux MPTCP's penalisation + reinjection when the receive window blocks
    wc_extra_delay = "0us"    # one-way delay added to WC subflows' data (the paper's netem, Figs. 7-8, 17)
    wc_delay_steps = []       # later values of it: [{at = "15s", delay = "2ms"}, ...] (Fig. 17)
    switch_queue = "drop_tail"  # each priority level of the switch ports: drop_tail | red (RED early
                              # drop before the level's drop-tail limit; engine ``net/red.rs``)
    red = {min_th = 20, max_th = 40, max_p = 0.1, w_q = 0.001953125, gentle = false}
                              # RED's parameters (packets); default: Cisco IOS WRED's for precedence 0
    shared_buffer = false     # true: the two levels share one drop-tail limit (the port's), as
                              # paccp-host's do; false: each level has the port's whole limit
    [[scheme.udp]]            # constant-rate UDP flows; they are BG traffic (share the VM's shaper)
    vm = "vm1"; dst = "h5"; rate = "50Mbit"; start = "0s"; stop = "1s"

Every TCP flow of a VM becomes one connection (one byte stream, the flow's size; the engine's
``connections``) with one BG subflow and N WC subflows. The connection's scheduler hands out its data
segments (``bg_first``: the BG subflow whenever its window and NIC queue have room, else WC;
``least_rtt``: the available subflow with the smallest smoothed RTT), limited by the connection-level
receive window of ``receive_buffer`` bytes (``"dynamic"``: Eq. 1 with ``rcvbuf_beta``, at least Linux's
default 87,380 bytes); with ``penalize``, Linux MPTCP's penalisation (halve the slower subflow holding the
oldest unacknowledged data) and reinjection when that window blocks. The
VM's **guarantee B_g is its ``theta``** (``[[vms]]``): a token bucket at the host limits the VM's BG
traffic (BG subflows and UDP) to B_g (hose model, HTB-like). BG packets carry the high-priority mark and WC
packets the low one; every switch port serves two strict-priority queues, each with the port's drop-tail
limit (``shared_buffer``: both together within it, so the scheme has no more switch memory than one
queue; ``paccp compare``'s ``mptcp-bgwc-shared``). WC traffic is not rate-limited. Under this scheme
every TCP flow must belong to a VM, ``[cc]`` is not used (``subflow_cc`` is) and a VM's ``omega``
plays no part.

Variants (the paper's baselines, Figs. 18-20):

- ``ours``: BG (shaped to B_g, high priority) + N WC subflows (low priority) + fair WC when ``fair_wc``;
- ``bg_only``: the BG subflow only, shaped (strict guarantee, no work conservation);
- ``wc_only``: BG subflow at high priority but *not* shaped, plus the WC subflows (MPTCP work conservation
  without a guarantee);
- ``free_competition``: plain single-path TCP (Reno), one priority, no shaping.

Fair WC: a VM with competition level A_l and K active WC subflows increases each WC subflow's window by
``alpha_w = (A_l / K)^2`` segments per RTT, so its K subflows together are as aggressive as A_l Reno flows.
"""

from __future__ import annotations

import math
from collections import deque
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BeforeValidator, Field

from paccp.errors import UserError
from paccp.limits import MAX_OMEGA, MAX_RCVBUF_BETA
from paccp.scenario.fields import _M, Duration, Rate, Size
from paccp.units import parse_size_bytes

if TYPE_CHECKING:
    from paccp.scenario.models import Scenario

UNIT_DEFAULT_BPS = 75_000_000  # the paper's bandwidth unit U
LINUX_TCP_RMEM_MAX = 6_291_456  # Linux's default tcp_rmem max (the paper's setting 5 in Table 1)
LINUX_TCP_RMEM_DEFAULT = 87_380  # Linux's default tcp_rmem default: the floor of the dynamic buffer


def _buffer(v: object) -> object:
    if isinstance(v, str) and v.strip() == "dynamic":
        return "dynamic"
    if isinstance(v, str):
        try:
            return parse_size_bytes(v)
        except UserError as exc:
            raise ValueError(exc.message) from None
    return v


class UdpFlow(_M):
    """A constant-rate UDP flow of a VM (BG traffic: it shares the VM's shaper)."""

    vm: str
    dst: str
    rate: Rate = Field(gt=0)
    start: Duration = 0
    stop: Duration | None = None


class DelayStep(_M):
    """A later value of the WC subflows' extra delay."""

    at: Duration
    delay: Duration


class RedParams(_M):
    """RED on each priority level of the switch ports (Floyd and Jacobson 1993; engine ``net/red.rs``).

    The defaults are Cisco IOS's WRED defaults for IP precedence 0 (minimum threshold 20, maximum 40
    packets, mark-probability denominator 10, exponential weighting constant 9 = w_q 2^-9, every arrival
    dropped above the maximum): a commodity switch's documented setting, not fitted to any result.
    """

    min_th: float = Field(default=20.0, ge=0)
    max_th: float = Field(default=40.0, gt=0)
    max_p: float = Field(default=0.1, gt=0, le=1)
    w_q: float = Field(default=2.0**-9, gt=0, le=1)
    gentle: bool = False


class MptcpBgwc(_M):
    """``[scheme] kind = "mptcp_bgwc"`` (module docstring)."""

    kind: Literal["mptcp_bgwc"]
    variant: Literal["ours", "bg_only", "wc_only", "free_competition"] = "ours"
    wc_subflows: Annotated[int, Field(ge=1)] | Literal["paths"] = 1
    scheduler: Literal["bg_first", "least_rtt"] = "bg_first"
    subflow_cc: Literal["reno", "lia", "olia"] = "reno"
    fair_wc: bool = True
    unit: Rate = Field(default=UNIT_DEFAULT_BPS, gt=0)
    competition_levels: dict[str, int] = Field(default_factory=dict)
    bg_burst: Size | None = Field(default=None, gt=0)
    receive_buffer: Annotated[int | Literal["dynamic"], BeforeValidator(_buffer)] = LINUX_TCP_RMEM_MAX
    rcvbuf_beta: float = Field(default=3.0, ge=1.0, le=MAX_RCVBUF_BETA)
    penalize: bool = True
    wc_extra_delay: Duration = 0
    wc_delay_steps: list[DelayStep] = Field(default_factory=list)
    udp: list[UdpFlow] = Field(default_factory=list)
    switch_queue: Literal["drop_tail", "red"] = "drop_tail"
    red: RedParams = Field(default_factory=RedParams)
    shared_buffer: bool = False

    # ------------------------------------------------------------------ checks against the scenario

    def check(self, sc: Scenario) -> None:
        """Cross-field checks (UserError naming the field); called by the scenario's semantic checks."""
        from paccp.scenario.topology import hosts

        vm_ids = {vm.id: vm for vm in sc.vms}
        for vm_id, level in self.competition_levels.items():
            if vm_id not in vm_ids:
                raise UserError(f"scheme.competition_levels.{vm_id}: unknown VM")
            if not 1 <= level <= MAX_OMEGA:
                raise UserError(
                    f"scheme.competition_levels.{vm_id}: A_l must be in 1..{MAX_OMEGA:.0f}, got {level}"
                )
        fair = self.fair_wc and self.variant == "ours"
        for vm in sc.vms:  # A_l is the weight of the VM's WC subflows: within the weight limit
            if fair and vm.id not in self.competition_levels and vm.theta // self.unit > MAX_OMEGA:
                raise UserError(
                    f"scheme.unit: {self.unit} bit/s makes A_l = floor(B_g / U) of VM {vm.id!r} "
                    f"{vm.theta // self.unit:.3g}, above {MAX_OMEGA:.0f}; use a larger unit"
                )
        if self.subflow_cc != "reno" and self.fair_wc and self.variant == "ours":
            raise UserError(
                f"scheme.fair_wc: Eq. 7 changes Reno's increase; set fair_wc = false to use subflow_cc "
                f"{self.subflow_cc!r}"
            )
        if self.red.max_th <= self.red.min_th:
            raise UserError(
                f"scheme.red.max_th: must be above min_th ({self.red.min_th:g}), got {self.red.max_th:g}"
            )
        if self.switch_queue == "red" and self.variant == "free_competition":
            raise UserError(
                "scheme.switch_queue: 'red' acts on the priority levels; free_competition has none"
            )
        if self.shared_buffer and self.variant == "free_competition":
            raise UserError("scheme.shared_buffer: acts on the priority levels; free_competition has none")
        if isinstance(self.receive_buffer, int) and self.receive_buffer <= 0:
            raise UserError("scheme.receive_buffer: must be > 0 bytes or 'dynamic'")
        for k in range(1, len(self.wc_delay_steps)):
            if self.wc_delay_steps[k].at < self.wc_delay_steps[k - 1].at:
                raise UserError(f"scheme.wc_delay_steps[{k}].at: steps must be in time order")
        if sc.softbw is not None:
            raise UserError("scheme: mptcp_bgwc cannot be combined with [softbw] (both set the host queues)")
        if "kind" in sc.cc.model_fields_set:
            raise UserError("cc: not used by scheme mptcp_bgwc (set scheme.subflow_cc)")
        for k, f in enumerate(sc.flows):
            if f.vm is None:
                raise UserError(f"flows[{k}].vm: scheme mptcp_bgwc needs every flow in a VM (hose model)")
        for k, a in enumerate(sc.arrivals):
            if a.cos.kind != "by_vm":
                raise UserError(f"arrivals[{k}].cos: scheme mptcp_bgwc takes guarantees from VMs (by_vm)")
        host_set = set(hosts(sc.topology))
        for k, u in enumerate(self.udp):
            if u.vm not in vm_ids:
                raise UserError(f"scheme.udp[{k}].vm: unknown VM {u.vm!r}")
            if u.dst not in host_set:
                raise UserError(f"scheme.udp[{k}].dst: unknown host {u.dst!r}")
            if u.dst == vm_ids[u.vm].host:
                raise UserError(f"scheme.udp[{k}].dst: the VM's own host")
            if u.stop is not None and u.stop <= u.start:
                raise UserError(f"scheme.udp[{k}].stop: must be after start")
        if self.wc_subflows != 1 and sc.routing.kind == "leaf_spine_paper":
            raise UserError(
                "scheme.wc_subflows: N > 1 needs ECMP routing (leaf_spine_paper has one path per pair)"
            )
        if isinstance(self.wc_subflows, int) and self.wc_subflows > 1:
            for k, f in enumerate(sc.flows):
                m = disjoint_paths(sc, f.src, f.dst)
                if self.wc_subflows > m:
                    raise UserError(
                        f"scheme.wc_subflows: N = {self.wc_subflows} > the {m} disjoint path(s) from "
                        f"{f.src} to {f.dst} (flows[{k}])"
                    )

    def _check_udp_work(self, duration_ns: int, mtu: int) -> None:
        """The engine's work for the UDP flows, estimated before it starts: one event per datagram, so a
        flow of 100 Tbit/s (within the 1 Pbit/s limit of a rate) would send 10^10 datagrams per second.
        Refused beyond ``limits.MAX_CBR_DATAGRAMS`` with the estimate (as an arrival load is)."""
        from paccp.limits import MAX_CBR_DATAGRAMS

        for k, u in enumerate(self.udp):
            end = duration_ns if u.stop is None else min(u.stop, duration_ns)
            n = u.rate * max(0, end - u.start) / 8e9 / max(1, mtu)
            if n > MAX_CBR_DATAGRAMS:
                raise UserError(
                    f"scheme.udp[{k}].rate: {u.rate / 1e9:g} Gbit/s for {max(0, end - u.start) / 1e9:g} s"
                    f" would send about {n:.3g} datagrams ({u.rate / 8 / max(1, mtu):.3g} per s); the"
                    f" engine runs at most {MAX_CBR_DATAGRAMS:.3g} per run: lower the rate or the duration"
                )

    def to_engine(self, sc: Scenario, eng: dict[str, Any]) -> dict[str, Any]:
        """Rewrite the generic engine JSON of ``sc`` for this scheme.

        Each scenario VM ``v`` becomes two engine VMs on its host: ``v`` (its BG subflows and UDP flows;
        its theta = B_g is the rate of its BG token bucket at the host) and ``v/wc`` (its WC subflows;
        omega = A_l, which the engine's per-VM split divides by the number K of active WC subflows, so a
        ``fair_wc`` subflow's increase omega^2 per RTT is (A_l / K)^2). Every flow ``f`` becomes ``f/bg``
        (class 0) and ``f/wc0`` .. (class 1, same path), the subflows of connection ``f`` (variants ``ours``
        and ``wc_only``; ``bg_only`` keeps ``f/bg`` as a plain flow of the flow's size); switches serve two
        strict-priority levels.
        """
        v = self.variant
        buf = dict(eng["topology"]["nic_buffer"])
        vms: list[dict[str, Any]] = []
        for vm in sc.vms:
            vms.append({"id": vm.id, "host": vm.host, "label": vm.id, "theta_bps": vm.theta, "omega": 1.0})
            if v in ("ours", "wc_only"):
                level = self.competition_level(vm.id, vm.theta) if self.fair_wc and v == "ours" else 1
                vms.append(
                    {
                        "id": f"{vm.id}/wc",
                        "host": vm.host,
                        "label": vm.id,
                        "theta_bps": 0,
                        "omega": float(level),
                    }
                )
        fair = self.fair_wc and v == "ours"
        wc_cc = {"kind": "fair_wc" if fair else self.subflow_cc}
        # LIA / OLIA couple all subflows of a connection, the BG one included (as MPTCP's per-connection
        # congestion control does); uncoupled Reno leaves the BG subflow on the scenario's Reno.
        bg_cc = {} if self.subflow_cc == "reno" else {"cc": {"kind": self.subflow_cc}}
        flows: list[dict[str, Any]] = []
        connections: list[dict[str, Any]] = []
        for f in eng["flows"]:
            if v == "free_competition":
                flows.append(dict(f, label=f["vm"]))
                continue
            if v == "bg_only":
                flows.append(dict(f, id=f"{f['id']}/bg", label=f["vm"], **{"class": 0}))
                continue
            # one engine connection per flow: its size and stop time are the connection's
            sub = {k: val for k, val in f.items() if k != "stop_ns"}
            flows.append(
                dict(sub, id=f"{f['id']}/bg", label=f["vm"], size_bytes=None, **bg_cc, **{"class": 0})
            )
            subflows: list[dict[str, Any]] = [{"flow": f"{f['id']}/bg"}]
            n = self.wc_count(sc, f["src"], f["dst"])
            for k in range(n):
                # N = 1 rides the BG subflow's path, N > 1 puts subflow k on the k-th disjoint path
                route = {"same_path_as": f"{f['id']}/bg"} if n == 1 else {"path": k}
                flows.append(
                    dict(
                        sub,
                        id=f"{f['id']}/wc{k}",
                        label=f["vm"],
                        vm=f"{f['vm']}/wc",
                        cc=wc_cc,
                        size_bytes=None,
                        **route,
                        **{"class": 1},
                    )
                )
                subflows.append(
                    {
                        "flow": f"{f['id']}/wc{k}",
                        "extra_delay_ns": self.wc_extra_delay,
                        "delay_steps": [{"at_ns": d.at, "delay_ns": d.delay} for d in self.wc_delay_steps],
                    }
                )
            connections.append(self.connection(f["id"], f["size_bytes"], subflows, f.get("stop_ns")))
        host_of = {vm.id: vm.host for vm in sc.vms}
        self._check_udp_work(sc.run.duration, sc.transport.mtu)
        for k, u in enumerate(self.udp):
            flows.append(
                {
                    "id": f"u{k}-{u.vm}/udp",
                    "src": host_of[u.vm],
                    "dst": u.dst,
                    # a stop time becomes the payload sent at the rate from start to stop
                    "size_bytes": None
                    if u.stop is None
                    else max(1, u.rate * (u.stop - u.start) // 8_000_000_000),
                    "start_ns": u.start,
                    "theta_bps": 0,
                    "omega": 1.0,
                    "vm": u.vm,
                    "label": u.vm,
                    "changes": [],
                    "cbr_bps": u.rate,
                    "class": 0,
                }
            )
        out = dict(eng, vms=vms, flows=flows, cc={"kind": "reno"})
        if connections:
            out["connections"] = connections
        if v != "free_competition":
            prio: dict[str, Any] = {"kind": "strict_priority", "levels": [buf, buf]}
            if self.shared_buffer:
                prio["shared_buffer"] = True
            if self.switch_queue == "red":
                prio["red"] = self.red.model_dump()
            out["queues"] = {"switch": prio}
        if v in ("ours", "bg_only"):
            out["queues"]["host"] = {
                "kind": "shaper",
                "by": "vm",
                "buckets": [
                    {
                        "vm": vm.id,
                        "rate_bps": vm.theta,
                        "burst_bytes": self.burst_bytes(vm.theta, sc.transport.mtu),
                        "buffer": buf,
                    }
                    for vm in sc.vms
                ],
                "unshaped_buffer": buf,
                "priority": True,
            }
        return out

    def connection(
        self, flow_id: str, size: int | None, subflows: list[dict[str, Any]], stop_ns: int | None = None
    ) -> dict[str, Any]:
        """The engine connection of flow ``flow_id`` over ``subflows`` (BG first), stopping at ``stop_ns``."""
        dynamic = self.receive_buffer == "dynamic"
        return {
            "id": flow_id,
            "subflows": subflows,
            "size_bytes": size,
            "scheduler": {"kind": self.scheduler},
            "receive_buffer_bytes": LINUX_TCP_RMEM_DEFAULT if dynamic else self.receive_buffer,
            "dynamic_beta": self.rcvbuf_beta if dynamic else None,
            "penalize": self.penalize,
            "stop_ns": stop_ns,
        }

    def wc_count(self, sc: Scenario, src: str, dst: str) -> int:
        """N for a connection from ``src`` to ``dst``: ``wc_subflows``, or M when it is ``"paths"``."""
        if isinstance(self.wc_subflows, int):
            return self.wc_subflows
        return disjoint_paths(sc, src, dst)

    # ------------------------------------------------------------------ resolved per-VM policy

    def competition_level(self, vm_id: str, guarantee_bps: int) -> int:
        """A_l of a VM: given in ``competition_levels``, else max(1, floor(B_g / U))."""
        if vm_id in self.competition_levels:
            return self.competition_levels[vm_id]
        return max(1, guarantee_bps // self.unit)

    def burst_bytes(self, guarantee_bps: int, mtu: int) -> int:
        """The BG shaper's bucket depth: ``bg_burst``, else rate x 1 ms + 1 MTU (HTB's default, HZ = 1000)."""
        if self.bg_burst is not None:
            return self.bg_burst
        return guarantee_bps // 8_000 + mtu


def alpha_w(competition_level: int, wc_subflows: int) -> float:
    """Eq. 7: each of a VM's K WC subflows increases by (A_l / K)^2 segments per RTT."""
    if competition_level < 1 or wc_subflows < 1:
        raise ValueError("A_l and K must be >= 1")
    return (competition_level / wc_subflows) ** 2


def dynamic_receive_buffer(beta: float, rtts_s: list[float], rates_bps: list[float]) -> int:
    """Eq. 1: the smallest B (bytes) with B >= beta * max RTT_i * sum BW_i."""
    if beta < 1 or not rtts_s or len(rtts_s) != len(rates_bps):
        raise ValueError("need beta >= 1 and one RTT and one rate per subflow")
    return math.ceil(beta * max(rtts_s) * sum(rates_bps) / 8)


def disjoint_paths(sc: Scenario, src: str, dst: str) -> int:
    """M: the number of paths between two hosts that share no fabric link (hosts do not forward).

    A host's own access links are shared by all its subflows (one NIC), so they do not limit M; two hosts
    on the same switch have one path.
    """
    from paccp.scenario.topology import Dumbbell, LeafSpine

    topo = sc.topology
    if isinstance(topo, Dumbbell):
        return 1
    if isinstance(topo, LeafSpine):
        same_leaf = int(src[1:]) // topo.hosts_per_leaf == int(dst[1:]) // topo.hosts_per_leaf
        return 1 if same_leaf else topo.spines
    kinds = {n.name: n.kind for n in topo.nodes}
    cap: dict[tuple[str, str], int] = {}
    adj: dict[str, set[str]] = {}
    unlimited = len(topo.links) + 1
    for ln in topo.links:
        access = kinds.get(ln.a) == "host" or kinds.get(ln.b) == "host"
        for a, b in ((ln.a, ln.b), (ln.b, ln.a)):
            cap[(a, b)] = cap.get((a, b), 0) + (unlimited if access else 1)
            adj.setdefault(a, set()).add(b)
    if any(kinds.get(s) == "switch" for s in adj.get(src, set()) & adj.get(dst, set())):
        return 1  # on the same switch: one path, through it
    paths = 0
    while True:  # Edmonds-Karp with unit capacities
        prev: dict[str, str] = {src: src}
        q = deque([src])
        while q and dst not in prev:
            u = q.popleft()
            if u != src and kinds.get(u) == "host":
                continue
            for v in sorted(adj.get(u, ())):
                if v not in prev and cap.get((u, v), 0) > 0:
                    prev[v] = u
                    q.append(v)
        if dst not in prev:
            return paths
        v = dst
        while v != src:
            u = prev[v]
            cap[(u, v)] -= 1
            cap[(v, u)] = cap.get((v, u), 0) + 1
            v = u
        paths += 1
