"""Scenarios: the TOML schema a user writes, its validation, and its conversion to the engine's JSON.

This module owns every default of a simulation (the engine has none, see docs/engine-contract.md).
Quantities take human units: rates ``"10Gbit"``, durations ``"20us"``, sizes ``"1.5MB"``; buffers
``"100pkt"`` (packets) or ``"150KB"`` (bytes; a bare integer is packets). A bare number for a duration is
seconds and for a rate bit/s (:mod:`paccp.units`).

Sections (all optional except ``[topology]`` and at least one of ``[[flows]]`` / ``[[arrivals]]``)::

    [run]        seed, duration, warmup, sample_interval, sample_flows, sample_cwnd
    [transport]  mtu, header, ack, init_cwnd, min_rto, initial_rto, max_rto, delayed_ack,
                 delayed_ack_timeout, dupack_threshold, sack, host_backpressure, host_fq, prr, ack_delay,
                 handshake, syn, connect_timeout, syn_retries
    [cc]         kind = "paccp" | "reno", rcos, min_cwnd
    [topology]   kind = "leaf_spine" | "dumbbell" | "explicit" (+ its fields)
    [routing]    kind = "ecmp" | "leaf_spine_paper"
    [billing]    epoch (ISO-8601 UTC), tenant (default tenant of flows without a VM)
    [[vms]]      id, host, theta, omega, cos, label, tenant
    [[flows]]    id, src, dst, size (absent = long-lived), start, theta, omega, vm, cos, label, tenant,
                 deadline, [[flows.changes]] (at, theta, omega)
    [[arrivals]] workload (name or CDF path), load or rate_per_s, start, stop, max_flows, sources,
                 destination, cos (by_vm or mix), reference_capacity
    [scheme]     kind = "mptcp_bgwc" (+ its fields: :mod:`paccp.schemes.mptcp_bgwc`); absent = the
                 ``[cc]`` sender on single-path flows

Arrival load: ``rate_per_s = load * C_ref / (8 * mean_size_bytes)`` where ``mean_size_bytes`` is the
mean payload of the workload's piecewise-linear sampler and ``C_ref`` is, for a leaf-spine, the total
leaf-to-spine capacity ``leaves * spines * fabric_rate`` (the paper's definition: traffic only between
racks); for a dumbbell the bottleneck rate; for an explicit topology ``reference_capacity`` (required).

Class of service of a flow (``cos`` column of run outputs): the ``cos`` field of the flow, else of its
VM; otherwise derived from the flow's (or its VM's) initial pair: theta > 0 -> ``mrg``, else omega > 1
-> ``ds``, else ``be``. These rules live in :mod:`paccp.common.cos`.

Limits of every quantity (rates, times, sizes, names, flows per run, sampled values) live in
:mod:`paccp.limits`; a value beyond them is a one-line error naming the field, before any work.
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path
from typing import Annotated, Any, Literal

import tomllib
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from paccp.common.cos import Cos, classify, pair_error
from paccp.errors import UserError
from paccp.limits import (
    INT64_MAX,
    MAX_BUFFER_PACKETS,
    MAX_COUNT,
    MAX_FLOWS_PER_RUN,
    MAX_LINKS,
    MAX_NAME,
    MAX_OMEGA,
    MAX_RATE_BPS,
    MAX_SAMPLE_CELLS,
    MAX_SIZE_BYTES,
    MAX_TIME_NS,
)
from paccp.units import parse_duration_ns, parse_rate_bps, parse_size_bytes


def _wrap(fn: Any) -> Any:
    def conv(v: Any) -> Any:
        if v is None:
            return None
        try:
            return fn(v)
        except UserError as exc:
            raise ValueError(exc.message) from None

    return conv


# --------------------------------------------------------------------------------------------------
# Limits live in paccp.limits (one place); the types below apply them.


def _check_name(v: str) -> str:
    if any(ord(c) < 32 or ord(c) == 127 for c in v):
        raise ValueError(f"{v[:MAX_NAME]!r}: control characters are not allowed in names")
    return v


Name = Annotated[str, Field(min_length=1, max_length=MAX_NAME), AfterValidator(_check_name)]
Rate = Annotated[int, BeforeValidator(_wrap(parse_rate_bps)), Field(le=MAX_RATE_BPS)]
Duration = Annotated[int, BeforeValidator(_wrap(parse_duration_ns)), Field(le=MAX_TIME_NS)]
Size = Annotated[int, BeforeValidator(_wrap(parse_size_bytes)), Field(le=MAX_SIZE_BYTES)]
Omega = Annotated[float, Field(gt=0, le=MAX_OMEGA)]


def _parse_buffer(v: Any) -> dict[str, int]:
    if isinstance(v, dict):
        if set(v) not in ({"packets"}, {"bytes"}):
            raise ValueError("a buffer table needs exactly one key: packets or bytes")
        (key, n), limit = next(iter(v.items())), MAX_BUFFER_PACKETS if "packets" in v else MAX_SIZE_BYTES
        if isinstance(n, bool) or not isinstance(n, int) or not 0 < n <= limit:
            raise ValueError(f"buffer {key} must be an integer 1..{limit}, got {str(n)[:40]!r}")
        return {key: n}
    if isinstance(v, bool):
        raise ValueError(f"cannot parse buffer {v!r}")
    if isinstance(v, int):
        if not 0 < v <= MAX_BUFFER_PACKETS:
            raise ValueError(f"buffer must be 1..{MAX_BUFFER_PACKETS} packets, got {v}")
        return {"packets": v}
    text = str(v).strip()
    for suffix in ("pkts", "pkt"):
        if text.endswith(suffix):
            num = text[: -len(suffix)].strip()
            if not num.isdigit() or not 0 < int(num) <= MAX_BUFFER_PACKETS:
                raise ValueError(f"buffer {text[:40]!r}: packets must be an integer 1..{MAX_BUFFER_PACKETS}")
            return {"packets": int(num)}
    try:
        b = parse_size_bytes(text)
    except UserError as exc:
        raise ValueError(exc.message) from None
    if not 0 < b <= MAX_SIZE_BYTES:
        raise ValueError(f"buffer must be 1 byte .. 1 PB, got {text[:40]!r}")
    return {"bytes": b}


Buffer = Annotated[dict[str, int], BeforeValidator(_parse_buffer)]
CosName = Cos


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class RunCfg(_M):
    """``[run]``: seed, lengths, sampling."""

    seed: int = Field(default=1, ge=0, le=INT64_MAX)
    duration: Duration = Field(default=parse_duration_ns("200ms"), gt=0)
    warmup: Duration = Field(default=parse_duration_ns("50ms"), ge=0, description="excluded from mean rates")
    sample_interval: Duration = Field(default=parse_duration_ns("1ms"), gt=0)
    sample_flows: Literal["none", "long_lived", "all"] = "long_lived"
    sample_cwnd: bool = False

    @model_validator(mode="after")
    def _check(self) -> RunCfg:
        if self.warmup >= self.duration:
            raise ValueError("warmup must be shorter than duration")
        return self


class TransportCfg(_M):
    """``[transport]``: packet sizes and the window-based sender's timers."""

    mtu: Size = Field(default=1500, gt=100)
    header: Size = Field(default=40, ge=0)
    ack: Size = Field(default=40, gt=0)
    init_cwnd: float = Field(default=10.0, gt=0, le=1e6)
    min_rto: Duration = Field(default=parse_duration_ns("1ms"), gt=0)
    initial_rto: Duration = Field(default=parse_duration_ns("3ms"), gt=0)
    max_rto: Duration = Field(default=parse_duration_ns("1s"), gt=0)
    delayed_ack: bool = False
    delayed_ack_timeout: Duration = Field(default=parse_duration_ns("40us"), gt=0)
    dupack_threshold: int = Field(default=3, ge=1, le=2**31 - 1)
    # Linux-like defaults: SACK recovery (RFC 2018/6675) and a sender that waits for room in its own NIC
    # queue (as TCP small queues do) instead of dropping there. ``sack = false`` gives NewReno recovery,
    # ``host_backpressure = false`` a dropping NIC queue (see docs/engine-contract.md and the README).
    sack: bool = True
    host_backpressure: bool = True
    # Host fair queuing: at most this many packets of one flow in its host's NIC queue (0 = off: the NIC
    # is one FIFO for all of the host's flows). Needs host_backpressure.
    host_fq: int = Field(default=0, ge=0, le=2**31 - 1)
    # NewReno (sack = false): Proportional Rate Reduction (RFC 6937, as Linux and ns-3) bounds what a
    # recovery sends, with limited transmit (RFC 3042) before it; false = RFC 6582 window inflation. No
    # effect with SACK. The engine's JSON default is the same (true).
    prr: bool = True
    # SACK: in a recovery, mark losses as Linux's RACK does there (a segment is lost once a segment sent
    # after it has arrived), which repairs a flow's lost last segments without the retransmission timer;
    # false = RFC 6675's IsLost alone. Entering a recovery is unchanged; no effect without SACK. Off by
    # default (the documented experiments were measured without it); the engine's JSON key
    # ``transport.rack`` (absent = off) is sent only when on.
    rack: bool = False
    # Receiver processing delay: every ACK leaves after an exponentially distributed delay with this mean
    # (0 = at once); ACKs falling due meanwhile merge into it. Off for the paper fabric; the kernel
    # cross-check's twins use the namespace testbed's measured ~30 us (README, cross-check section).
    ack_delay: Duration = Field(default=0, ge=0)
    # TCP three-way handshake before a flow's data (off by default: data at the flow's start). SYN and
    # SYN-ACK are ``syn`` bytes on the wire (absent = header + 8: Linux's SYN carries 20 option bytes, MSS,
    # SACK-permitted, timestamps, window scale, where a timestamped data segment carries 12); a lost one is
    # retransmitted ``connect_timeout`` after the first SYN, then at doubling intervals, at most
    # ``syn_retries`` times (Linux: 1 s, tcp_syn_retries 6; ns-3: ConnTimeout 3 s, ConnCount 6 = 5
    # retransmissions). The engine's JSON key ``transport.handshake`` (absent = off) gets all three.
    handshake: bool = False
    syn: Size | None = Field(default=None, gt=0, le=65535)
    connect_timeout: Duration = Field(default=parse_duration_ns("1s"), gt=0)
    syn_retries: int = Field(default=6, ge=0, le=30)

    @model_validator(mode="after")
    def _check(self) -> TransportCfg:
        if self.header >= self.mtu:
            raise ValueError("header must be smaller than mtu")
        if not self.min_rto <= self.initial_rto <= self.max_rto:
            raise ValueError("need min_rto <= initial_rto <= max_rto")
        if self.host_fq and not self.host_backpressure:
            raise ValueError("host_fq needs host_backpressure = true")
        if self.ack_delay >= self.min_rto:
            raise ValueError("ack_delay must be shorter than min_rto")
        return self


class CcCfg(_M):
    """``[cc]``: the congestion control (PACCP with rcos, or plain Reno)."""

    kind: Literal["paccp", "reno"] = "paccp"
    rcos: float = Field(default=3.0, gt=1.0, le=1e3)
    min_cwnd: float = Field(default=1.0, ge=1.0, le=1e6, description="window floor in segments")


class LeafSpine(_M):
    """A leaf-spine fabric (the paper's: 6 x 5, 40 hosts per leaf)."""

    kind: Literal["leaf_spine"]
    leaves: int = Field(default=6, ge=2, le=MAX_COUNT)
    spines: int = Field(default=5, ge=1, le=MAX_COUNT)
    hosts_per_leaf: int = Field(default=40, ge=1, le=MAX_COUNT)
    host_rate: Rate = Field(default=parse_rate_bps("10Gbit"), gt=0)
    host_delay: Duration = Field(default=parse_duration_ns("10us"), ge=0)
    host_buffer: Buffer = Field(default_factory=lambda: {"packets": 100})
    fabric_rate: Rate = Field(default=parse_rate_bps("40Gbit"), gt=0)
    fabric_delay: Duration = Field(default=parse_duration_ns("20us"), ge=0)
    fabric_buffer: Buffer = Field(default_factory=lambda: {"packets": 400})
    nic_buffer: Buffer = Field(default_factory=lambda: {"packets": 100})


class Dumbbell(_M):
    """Hosts l0.. and r0.. joined by routers ``left`` and ``right`` over one bottleneck link."""

    kind: Literal["dumbbell"]
    left_hosts: int = Field(ge=1, le=MAX_COUNT)
    right_hosts: int = Field(ge=1, le=MAX_COUNT)
    access_rate: Rate = Field(default=parse_rate_bps("10Gbit"), gt=0)
    access_delay: Duration = Field(default=parse_duration_ns("10us"), ge=0)
    access_buffer: Buffer = Field(default_factory=lambda: {"packets": 100})
    bottleneck_rate: Rate = Field(gt=0)
    bottleneck_delay: Duration = Field(default=parse_duration_ns("20us"), ge=0)
    bottleneck_buffer: Buffer = Field(default_factory=lambda: {"packets": 100})
    nic_buffer: Buffer = Field(default_factory=lambda: {"packets": 100})


class Node(_M):
    """A node of an explicit topology."""

    name: Name
    kind: Literal["host", "switch"]


class Link(_M):
    """A full-duplex link of an explicit topology."""

    a: str
    b: str
    rate: Rate = Field(gt=0)
    delay: Duration = Field(ge=0)
    buffer: Buffer = Field(default_factory=lambda: {"packets": 100})


class Explicit(_M):
    """Any graph of hosts and switches."""

    kind: Literal["explicit"]
    nodes: list[Node] = Field(min_length=2, max_length=MAX_COUNT)
    links: list[Link] = Field(min_length=1, max_length=MAX_LINKS)
    nic_buffer: Buffer = Field(default_factory=lambda: {"packets": 100})

    @model_validator(mode="after")
    def _check(self) -> Explicit:
        names = [n.name for n in self.nodes]
        if len(set(names)) != len(names):
            raise ValueError("duplicate node name")
        for k, ln in enumerate(self.links):
            for end in (ln.a, ln.b):
                if end not in names:
                    raise ValueError(f"links[{k}]: unknown node {end!r}")
            if ln.a == ln.b:
                raise ValueError(f"links[{k}]: a link must join two different nodes")
        return self


Topology = Annotated[LeafSpine | Dumbbell | Explicit, Field(discriminator="kind")]


class RoutingCfg(_M):
    """``[routing]``: per-flow ECMP, or the paper's deterministic leaf-spine mapping."""

    kind: Literal["ecmp", "leaf_spine_paper"] = "ecmp"


def epoch_ns(text: str) -> int:
    """Parse an ISO-8601 UTC instant into ns since the Unix epoch (ValueError if malformed)."""
    shown = repr(text[:40]) + ("..." if len(text) > 40 else "")
    try:
        t = _dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"epoch {shown} is not an ISO-8601 time such as 2026-11-01T00:00:00Z") from None
    if t.tzinfo is None:
        raise ValueError(f"epoch {shown} needs a time zone (e.g. a trailing Z)")
    try:
        delta = t - _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
    except OverflowError:
        raise ValueError(f"epoch {shown} is out of range") from None
    ns = (delta.days * 86400 + delta.seconds) * 10**9 + delta.microseconds * 1000
    if ns < 0:
        raise ValueError(f"epoch {shown} is before 1970-01-01 (usage times are ns since the Unix epoch)")
    if ns > INT64_MAX - MAX_TIME_NS:
        raise ValueError(f"epoch {shown} is too far ahead: times in ns since 1970 must fit in 64 bits")
    return ns


class BillingCfg(_M):
    """``[billing]``: how simulated time maps to wall-clock time in usage records."""

    epoch: str = "2026-11-01T00:00:00Z"
    tenant: Name = "default"

    @model_validator(mode="after")
    def _check(self) -> BillingCfg:
        epoch_ns(self.epoch)
        return self


class Vm(_M):
    """A VM (VBP): its flows share its pair equally."""

    id: Name
    host: str
    theta: Rate = 0
    omega: Omega = 1.0
    cos: CosName | None = None
    label: Name | None = None
    tenant: Name | None = None


SOFTBW_KINDS: tuple[str, ...] = ("strict", "dynamic", "fair", "best_effort")


class SoftBWGuarantee(_M):
    """``[[softbw.guarantees]]``: one VM's SoftBW guarantee (scheme ``softbw``).

    ``strict``: rate B. ``dynamic``: ``size`` S by ``deadline`` T after ``start`` (B is re-derived every
    billing cycle as residual size / residual time). ``fair``: VM-level fair share. ``best_effort``: none.
    """

    vm: str = Field(min_length=1)
    kind: str
    rate: Rate | None = None
    size: Size | None = None
    deadline: Duration | None = None
    start: Duration = 0

    @model_validator(mode="after")
    def _check(self) -> SoftBWGuarantee:
        if self.kind not in SOFTBW_KINDS:
            raise ValueError(f"unknown guarantee kind {self.kind!r} (expected {', '.join(SOFTBW_KINDS)})")
        if self.kind == "strict" and (self.rate is None or self.rate <= 0):
            raise ValueError(f"a strict guarantee needs rate B > 0, got {self.rate}")
        if self.kind != "strict" and self.rate is not None:
            raise ValueError(f"rate is the strict guarantee's B; a {self.kind} guarantee has none")
        if self.kind == "dynamic":
            if self.size is None or self.size <= 0 or self.deadline is None or self.deadline <= 0:
                raise ValueError("a dynamic guarantee needs size S > 0 and deadline T > 0")
        elif self.size is not None or self.deadline is not None:
            raise ValueError(f"size and deadline belong to a dynamic guarantee, not {self.kind}")
        return self

    @property
    def sold_bps(self) -> float:
        """The bandwidth this guarantee commits on its host: B (strict), S/T (dynamic), else 0."""
        if self.kind == "strict":
            return float(self.rate or 0)
        if self.kind == "dynamic":
            return 8e9 * (self.size or 0) / (self.deadline or 1)
        return 0.0


class SoftBWCfg(_M):
    """``[softbw]``: guarantees per VM and the over-commitment allowed per host (guarantees <= N x port)."""

    overcommit: float = Field(default=1.0, description="N: sum of a host's guarantees up to N x its port")
    host_overcommit: dict[str, float] = Field(default_factory=dict, description="per-host N")
    billing_cycle: Duration = Field(default=parse_duration_ns("10ms"), gt=0)
    guarantees: list[SoftBWGuarantee] = Field(default_factory=list)

    @model_validator(mode="after")
    def _check(self) -> SoftBWCfg:
        for name, n in [("overcommit", self.overcommit), *self.host_overcommit.items()]:
            if not n >= 1.0:  # finite: the schema rejects inf and nan everywhere
                raise ValueError(
                    f"over-commitment must be >= 1 (guarantees up to N x the port), {name} = {n:g}"
                )
        return self

    def factor(self, host: str) -> float:
        """The over-commitment factor N of ``host``."""
        return self.host_overcommit.get(host, self.overcommit)


class Change(_M):
    """An FBP upgrade/downgrade of a flow at time ``at``."""

    at: Duration
    theta: Rate = 0
    omega: Omega = 1.0


class FlowCfg(_M):
    """One flow (long-lived when ``size`` is absent)."""

    id: Name
    src: str
    dst: str
    size: Size | None = None
    start: Duration = 0
    theta: Rate = 0
    omega: Omega = 1.0
    vm: str | None = None
    cos: CosName | None = None
    label: Name | None = None
    tenant: Name | None = None
    deadline: Duration | None = Field(default=None, description="relative to start")
    changes: list[Change] = Field(default_factory=list)
    stop: Duration | None = Field(default=None, description="takes no new data from then on")

    @model_validator(mode="after")
    def _check(self) -> FlowCfg:
        if self.src == self.dst:
            raise ValueError("src and dst must differ")
        if self.stop is not None and self.stop < self.start:
            raise ValueError("stop must not be before start")
        if self.size is not None and self.size <= 0:
            raise ValueError("size must be > 0 (omit it for a long-lived flow)")
        if self.vm is not None and self.changes:
            raise ValueError("changes (FBP) cannot be used on a flow that belongs to a VM (VBP)")
        last = self.start
        for c in self.changes:
            if c.at < last:
                raise ValueError("changes must be in time order, at or after start")
            last = c.at
        return self


class CosClass(_M):
    """One class of an arrival ``mix``."""

    label: Name
    prob: float = Field(gt=0, le=1)
    theta: Rate = 0
    omega: Omega = 1.0


class CosByVm(_M):
    """Arrival flows belong to the VM on their source host."""

    kind: Literal["by_vm"]


class CosMix(_M):
    """Arrival flows draw their class from a mix."""

    kind: Literal["mix"]
    classes: list[CosClass] = Field(min_length=1, max_length=1000)

    @model_validator(mode="after")
    def _check(self) -> CosMix:
        total = sum(c.prob for c in self.classes)
        if abs(total - 1.0) > 1e-9:
            raise ValueError(f"class probabilities sum to {total:g}, not 1")
        return self


class ArrivalsCfg(_M):
    """A Poisson generator of finite flows."""

    id_prefix: Annotated[str, Field(max_length=MAX_NAME // 2), AfterValidator(_check_name)] | None = None
    workload: str = Field(min_length=1, max_length=4096)
    load: float | None = Field(default=None, gt=0)
    rate_per_s: float | None = Field(default=None, gt=0)
    reference_capacity: Rate | None = Field(default=None, gt=0)
    start: Duration = 0
    stop: Duration | None = None
    max_flows: int | None = Field(default=None, ge=1, le=MAX_FLOWS_PER_RUN)
    sources: list[str] | None = None
    destination: Literal["other_leaf", "any_other_host"] | None = None
    cos: Annotated[CosByVm | CosMix, Field(discriminator="kind")] = CosByVm(kind="by_vm")

    @model_validator(mode="after")
    def _check(self) -> ArrivalsCfg:
        if (self.load is None) == (self.rate_per_s is None):
            raise ValueError("give exactly one of load and rate_per_s")
        if self.stop is not None and self.stop <= self.start:
            raise ValueError("stop must be after start")
        return self


class Scenario(_M):
    """A whole scenario (see the module docstring)."""

    run: RunCfg = RunCfg()
    transport: TransportCfg = TransportCfg()
    cc: CcCfg = CcCfg()
    topology: Topology
    routing: RoutingCfg = RoutingCfg()
    billing: BillingCfg = BillingCfg()
    vms: list[Vm] = Field(default_factory=list)
    flows: list[FlowCfg] = Field(default_factory=list)
    arrivals: list[ArrivalsCfg] = Field(default_factory=list)
    scheme: SchemeCfg | None = None
    softbw: SoftBWCfg | None = None


# --------------------------------------------------------------------------------------------------
# topology helpers


def hosts(topo: LeafSpine | Dumbbell | Explicit) -> list[str]:
    """Host names in engine order."""
    if isinstance(topo, LeafSpine):
        return [f"h{i}" for i in range(topo.leaves * topo.hosts_per_leaf)]
    if isinstance(topo, Dumbbell):
        return [f"l{i}" for i in range(topo.left_hosts)] + [f"r{i}" for i in range(topo.right_hosts)]
    return [n.name for n in topo.nodes if n.kind == "host"]


def access_rate_bps(topo: LeafSpine | Dumbbell | Explicit, host: str) -> int:
    """Rate of the host's link(s) to the network (the most it can send)."""
    if isinstance(topo, LeafSpine):
        return topo.host_rate
    if isinstance(topo, Dumbbell):
        return topo.access_rate
    return sum(ln.rate for ln in topo.links if host in (ln.a, ln.b))


def _reachable(topo: Explicit, src: str) -> set[str]:
    adj: dict[str, list[str]] = {}
    for ln in topo.links:
        adj.setdefault(ln.a, []).append(ln.b)
        adj.setdefault(ln.b, []).append(ln.a)
    kinds = {n.name: n.kind for n in topo.nodes}
    seen, stack = {src}, [src]
    while stack:
        u = stack.pop()
        for v in adj.get(u, []):
            if v not in seen:
                seen.add(v)
                if kinds[v] == "switch":  # hosts do not forward
                    stack.append(v)
    return seen


def _check_cos(where: str, cos: str | None, theta: int) -> None:
    bad = pair_error(cos, theta) if cos is not None else None
    if bad is not None:
        raise UserError(f"{where}.cos: {bad}")


def _semantic_checks(sc: Scenario) -> None:
    """Cross-field checks; raise UserError naming the field."""
    topo = sc.topology
    host_list = hosts(topo)
    host_set = set(host_list)
    if isinstance(topo, Explicit) and not host_list:
        raise UserError("topology.nodes: no node of kind 'host'")
    if sc.routing.kind == "leaf_spine_paper":
        if not isinstance(topo, LeafSpine):
            raise UserError("routing.kind: leaf_spine_paper needs a leaf_spine topology")
        if topo.spines < topo.leaves - 1:
            raise UserError(
                "routing.kind: leaf_spine_paper needs spines >= leaves - 1 "
                f"({topo.spines} < {topo.leaves - 1})"
            )
    vm_ids: dict[str, Vm] = {}
    for k, vm in enumerate(sc.vms):
        where = f"vms[{k}]"
        if vm.id in vm_ids:
            raise UserError(f"{where}.id: duplicate VM id {vm.id!r}")
        vm_ids[vm.id] = vm
        if vm.host not in host_set:
            raise UserError(f"{where}.host: unknown host {vm.host!r}")
        if vm.theta > access_rate_bps(topo, vm.host):
            raise UserError(f"{where}.theta: {vm.theta} bit/s is above the host's access link")
        _check_cos(where, vm.cos, vm.theta)
    hosts_with_vm = [vm.host for vm in sc.vms]
    by_vm_arrivals = any(isinstance(a.cos, CosByVm) for a in sc.arrivals)
    if len(set(hosts_with_vm)) != len(hosts_with_vm) and by_vm_arrivals:
        raise UserError("vms: two VMs on one host (the engine maps arrivals to one VM per host)")
    flow_ids: set[str] = set()
    reach: dict[str, set[str]] = {}
    access: dict[str, int] = {}  # per source host (a sum over all links on an explicit topology)
    for k, f in enumerate(sc.flows):
        where = f"flows[{k}]"
        if f.id in flow_ids:
            raise UserError(f"{where}.id: duplicate flow id {f.id!r}")
        flow_ids.add(f.id)
        for end in ("src", "dst"):
            h = getattr(f, end)
            if h not in host_set:
                raise UserError(f"{where}.{end}: unknown host {h!r}")
        if isinstance(topo, Explicit):
            if f.src not in reach:
                reach[f.src] = _reachable(topo, f.src)
            if f.dst not in reach[f.src]:
                raise UserError(f"{where}: no route from {f.src!r} to {f.dst!r}")
        if f.start >= sc.run.duration:
            raise UserError(f"{where}.start: at or after the end of the run")
        if f.src not in access:
            access[f.src] = access_rate_bps(topo, f.src)
        acc = access[f.src]
        for name, th in [("theta", f.theta)] + [
            (f"changes[{j}].theta", c.theta) for j, c in enumerate(f.changes)
        ]:
            if th > acc:
                raise UserError(f"{where}.{name}: {th} bit/s is above the source host's access link ({acc})")
        _check_cos(where, f.cos, f.theta)
        if f.vm is not None:
            given = {"theta", "omega"} & f.model_fields_set
            if given:
                raise UserError(f"{where}.{sorted(given)[0]}: a VM's flow takes its pair from the VM (vms)")
            if f.vm not in vm_ids:
                raise UserError(f"{where}.vm: unknown VM {f.vm!r}")
            if vm_ids[f.vm].host != f.src:
                raise UserError(f"{where}.vm: VM {f.vm!r} is on {vm_ids[f.vm].host!r}, not on src {f.src!r}")
    for k, a in enumerate(sc.arrivals):
        where = f"arrivals[{k}]"
        for j, h in enumerate(a.sources or []):
            if h not in host_set:
                raise UserError(f"{where}.sources[{j}]: unknown host {h!r}")
        if a.destination == "other_leaf" and not isinstance(topo, LeafSpine):
            raise UserError(f"{where}.destination: other_leaf needs a leaf_spine topology")
        if a.load is not None and isinstance(topo, Explicit) and a.reference_capacity is None:
            raise UserError(
                f"{where}.reference_capacity: needed to turn a load into a rate on an explicit topology"
            )
        if isinstance(a.cos, CosMix):
            for j, c in enumerate(a.cos.classes):
                if c.theta > min(access_rate_bps(topo, h) for h in (a.sources or host_list)):
                    raise UserError(f"{where}.cos.classes[{j}].theta: above the hosts' access link")
    if not sc.flows and not sc.arrivals:
        raise UserError("scenario: no [[flows]] and no [[arrivals]]: nothing to simulate")
    if sc.softbw is not None:
        _check_softbw(sc.softbw, vm_ids, host_set, topo)
    _check_size(sc)
    if sc.scheme is not None:
        sc.scheme.check(sc)


def _check_size(sc: Scenario) -> None:
    """Bound the work before the engine allocates: hosts, links, flows, sampled series, usage times."""
    from paccp.traffic.workload import load_cdf

    topo = sc.topology
    if isinstance(topo, LeafSpine):
        n_hosts, n_links = (
            topo.leaves * topo.hosts_per_leaf,
            topo.leaves * (topo.spines + topo.hosts_per_leaf),
        )
    elif isinstance(topo, Dumbbell):
        n_hosts, n_links = topo.left_hosts + topo.right_hosts, topo.left_hosts + topo.right_hosts + 1
    else:
        n_hosts, n_links = len(topo.nodes), len(topo.links)
    if n_hosts > MAX_COUNT or n_links > MAX_LINKS:
        raise UserError(
            f"topology: {n_hosts} hosts and {n_links} links; at most {MAX_COUNT} hosts and {MAX_LINKS} links"
        )
    expected = float(len(sc.flows))
    for k, a in enumerate(sc.arrivals):
        where = f"arrivals[{k}]"
        try:
            cdf = load_cdf(a.workload)
        except UserError as exc:
            raise UserError(f"{where}.workload: {exc.message}") from None
        rate = arrival_rate_per_s(sc, a, cdf.mean_bytes)
        stop = a.stop if a.stop is not None else sc.run.duration
        n = rate * max(0, min(stop, sc.run.duration) - a.start) / 1e9
        if a.max_flows is not None:
            n = min(n, a.max_flows)
        if n > MAX_FLOWS_PER_RUN:
            given = f"load {a.load:g}" if a.load is not None else f"rate_per_s {a.rate_per_s:g}"
            raise UserError(
                f"{where}: {given} would start about {n:.3g} flows ({rate:.3g} per s for "
                f"{max(0, stop - a.start) / 1e9:g} s, mean size {cdf.mean_bytes:.3g} bytes); at most "
                f"{MAX_FLOWS_PER_RUN:,} flows per run (each takes about 1-2 KB of memory): lower the load, "
                "set an earlier stop or set max_flows"
            )
        expected += n
    if expected > MAX_FLOWS_PER_RUN:
        raise UserError(f"scenario: about {expected:.3g} flows in all; at most {MAX_FLOWS_PER_RUN:,} per run")
    intervals = -(-sc.run.duration // sc.run.sample_interval)
    if intervals > 100_000_000:
        raise UserError(
            f"run.sample_interval: {intervals:,} sample intervals in the run; at most 100,000,000 "
            "(use a longer sample_interval)"
        )
    sampled = {"none": 0.0, "long_lived": float(sum(1 for f in sc.flows if f.size is None)), "all": expected}
    cells = sampled[sc.run.sample_flows] * intervals * (4 if sc.run.sample_cwnd else 1)
    if cells > MAX_SAMPLE_CELLS:
        raise UserError(
            f"run.sample_flows: sampling {sampled[sc.run.sample_flows]:.3g} flows "
            f"over {intervals:,} intervals "
            f"makes about {cells:.3g} values; at most {MAX_SAMPLE_CELLS:,} (sample fewer flows, use a longer "
            "sample_interval or a shorter duration)"
        )
    if epoch_ns(sc.billing.epoch) + sc.run.duration > INT64_MAX:
        raise UserError("billing.epoch: epoch + duration does not fit in 64-bit ns since 1970")


def _check_softbw(cfg: SoftBWCfg, vm_ids: dict[str, Vm], host_set: set[str], topo: Topology) -> None:
    """Guarantees name known VMs (one each); each host's guarantees fit N x its port."""
    for h in cfg.host_overcommit:
        if h not in host_set:
            raise UserError(f"softbw.host_overcommit: unknown host {h!r}")
    sold: dict[str, float] = {}
    seen: set[str] = set()
    for k, g in enumerate(cfg.guarantees):
        where = f"softbw.guarantees[{k}]"
        if g.vm not in vm_ids:
            raise UserError(f"{where}.vm: unknown VM {g.vm!r}")
        if g.vm in seen:
            raise UserError(f"{where}.vm: a second guarantee for VM {g.vm!r}")
        seen.add(g.vm)
        host = vm_ids[g.vm].host
        sold[host] = sold.get(host, 0.0) + g.sold_bps
    for host, total in sold.items():
        check_softbw_host(cfg, host, total, access_rate_bps(topo, host))


#: How long an idle VM keeps the credit (positive lag) it banked by sending below B (the slides do not say).
SOFTBW_MAX_CREDIT_NS = 1_000_000


def softbw_host_queues(sc: Scenario, cfg: SoftBWCfg) -> dict[str, Any]:
    """The engine's host egress for scheme softbw: a queue per VM served by the fulfilment selector.

    Strict: B. Dynamic: S by start + T (the engine re-derives B every billing cycle). Fair: the host's
    access rate over its number of VMs. Best effort: no guarantee (not listed).
    """
    per_host: dict[str, int] = {}
    for vm in sc.vms:
        per_host[vm.host] = per_host.get(vm.host, 0) + 1
    host_of = {vm.id: vm.host for vm in sc.vms}
    guarantees: dict[str, dict[str, Any]] = {}
    for g in cfg.guarantees:
        if g.kind == "strict":
            guarantees[g.vm] = {"kind": "strict", "rate_bps": g.rate}
        elif g.kind == "fair":
            host = host_of[g.vm]
            guarantees[g.vm] = {
                "kind": "strict",
                "rate_bps": access_rate_bps(sc.topology, host) // per_host[host],
            }
        elif g.kind == "dynamic":
            guarantees[g.vm] = {
                "kind": "dynamic",
                "size_bytes": g.size,
                "start_ns": g.start,
                "deadline_ns": g.start + (g.deadline or 0),
            }
    return {
        "kind": "per_vm",
        "buffer": dict(sc.topology.nic_buffer),
        "selector": {
            "kind": "softbw",
            "guarantees": guarantees,
            "billing_cycle_ns": cfg.billing_cycle,
            "max_credit_ns": SOFTBW_MAX_CREDIT_NS,
        },
    }


def check_softbw_host(cfg: SoftBWCfg, host: str, sold_bps: float, port_bps: float) -> None:
    """A host may sell guarantees (strict B, dynamic S/T) up to N x its port; UserError if it sells more."""
    if sold_bps > cfg.factor(host) * port_bps * (1 + 1e-12):
        raise UserError(
            f"softbw.guarantees: host {host!r} sells {sold_bps / 1e9:g} Gb/s of guarantees, above "
            f"N x port = {cfg.factor(host):g} x {port_bps / 1e9:g} Gb/s"
        )


def _fmt_validation(exc: ValidationError) -> str:
    err = exc.errors()[0]
    tags = {"leaf_spine", "dumbbell", "explicit", "by_vm", "mix", "mptcp_bgwc", "elasticswitch"}
    parts: list[str] = []
    loc = list(err.get("loc", ()))
    for i, p in enumerate(loc):
        if isinstance(p, str) and p in tags and i > 0 and i < len(loc) - 1:
            continue  # pydantic's discriminated-union tag, not a field
        if isinstance(p, int):
            parts[-1:] = [f"{parts[-1]}[{p}]" if parts else f"[{p}]"]
        else:
            parts.append(str(p))
    where = ".".join(parts) or "scenario"
    typ = err.get("type", "")
    if typ == "extra_forbidden":
        return f"{where}: unknown key"
    if typ == "missing":
        return f"{where}: missing required field"
    msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
    return f"{where}: {msg}"


def parse_scenario(obj: dict[str, Any], where: str = "scenario") -> Scenario:
    """Validate a scenario dict (the TOML tables); raise UserError with one line naming the field."""
    try:
        sc = Scenario.model_validate(obj)
    except ValidationError as exc:
        raise UserError(f"{where}: {_fmt_validation(exc)}") from None
    try:
        _semantic_checks(sc)
    except UserError as exc:
        raise UserError(f"{where}: {exc.message}") from None
    return sc


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a TOML scenario file."""
    return parse_scenario(read_toml_file(path, "scenario file"), where=str(path))


def read_toml_file(path: str | Path, what: str = "file") -> dict[str, Any]:
    """Read a TOML file; one-line UserError naming the file (and line) when it is missing, unreadable,
    not UTF-8 or malformed."""
    p = Path(path)
    try:
        if not p.is_file():
            raise UserError(f"{p}: no such {what}")
        data = p.read_bytes()
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the name
        raise UserError(
            f"{str(p)[:200]!r}: cannot read it ({getattr(exc, 'strerror', None) or exc})"
        ) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise UserError(f"{p} line {line}: not UTF-8 text (byte {exc.start})") from None
    return parse_toml(text, str(p))


def parse_toml(text: str, where: str) -> dict[str, Any]:
    """TOML text to a dict; one-line UserError for malformed TOML (and numbers Python cannot hold)."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{where}: malformed TOML ({exc})") from None
    except ValueError as exc:  # e.g. an integer of more than 4300 digits
        raise UserError(f"{where}: malformed TOML ({str(exc)[:120]})") from None
    except RecursionError:
        raise UserError(f"{where}: malformed TOML (nested too deeply)") from None


# --------------------------------------------------------------------------------------------------
# conversion to the engine contract


def _link(rate: int, delay: int, buffer: dict[str, int]) -> dict[str, Any]:
    return {"rate_bps": rate, "delay_ns": delay, "buffer": dict(buffer)}


def reference_capacity_bps(sc: Scenario, arrivals: ArrivalsCfg) -> int:
    """C_ref of the load definition (module docstring)."""
    topo = sc.topology
    if isinstance(topo, LeafSpine):
        return topo.leaves * topo.spines * topo.fabric_rate
    if isinstance(topo, Dumbbell):
        return topo.bottleneck_rate
    assert arrivals.reference_capacity is not None  # checked in _semantic_checks
    return arrivals.reference_capacity


def arrival_rate_per_s(sc: Scenario, arrivals: ArrivalsCfg, mean_bytes: float) -> float:
    """Flows per second of an arrival generator: ``rate_per_s``, or load * C_ref / (8 * mean size)."""
    if arrivals.rate_per_s is not None:
        return float(arrivals.rate_per_s)
    assert arrivals.load is not None  # exactly one of them (ArrivalsCfg._check)
    return arrivals.load * reference_capacity_bps(sc, arrivals) / (8.0 * mean_bytes)


def to_engine(sc: Scenario) -> dict[str, Any]:
    """The fully resolved engine JSON (docs/engine-contract.md)."""
    from paccp.traffic.workload import load_cdf

    topo = sc.topology
    if isinstance(topo, LeafSpine):
        t: dict[str, Any] = {
            "kind": "leaf_spine",
            "leaves": topo.leaves,
            "spines": topo.spines,
            "hosts_per_leaf": topo.hosts_per_leaf,
            "host_link": _link(topo.host_rate, topo.host_delay, topo.host_buffer),
            "fabric_link": _link(topo.fabric_rate, topo.fabric_delay, topo.fabric_buffer),
            "nic_buffer": dict(topo.nic_buffer),
        }
    elif isinstance(topo, Dumbbell):
        t = {
            "kind": "dumbbell",
            "left_hosts": topo.left_hosts,
            "right_hosts": topo.right_hosts,
            "access_link": _link(topo.access_rate, topo.access_delay, topo.access_buffer),
            "bottleneck_link": _link(topo.bottleneck_rate, topo.bottleneck_delay, topo.bottleneck_buffer),
            "nic_buffer": dict(topo.nic_buffer),
        }
    else:
        t = {
            "kind": "explicit",
            "nodes": [{"name": n.name, "kind": n.kind} for n in topo.nodes],
            "links": [{"a": ln.a, "b": ln.b, **_link(ln.rate, ln.delay, ln.buffer)} for ln in topo.links],
            "nic_buffer": dict(topo.nic_buffer),
        }
    vm_map = {vm.id: vm for vm in sc.vms}
    vms = [
        {
            "id": vm.id,
            "host": vm.host,
            "label": vm.label if vm.label is not None else (vm.cos or classify(vm.theta, vm.omega)).upper(),
            "theta_bps": vm.theta,
            "omega": float(vm.omega),
        }
        for vm in sc.vms
    ]
    vm_label = {v["id"]: v["label"] for v in vms}  # (not sc.vms.index: quadratic in flows x VMs)
    flows = []
    for f in sc.flows:
        if f.vm is not None:
            vm = vm_map[f.vm]
            theta, omega = vm.theta, vm.omega
            default_label = vm_label[vm.id]
        else:
            theta, omega = f.theta, f.omega
            default_label = (f.cos or classify(theta, omega)).upper()
        flows.append(
            {
                "id": f.id,
                "src": f.src,
                "dst": f.dst,
                "size_bytes": f.size,
                "start_ns": f.start,
                "theta_bps": theta,
                "omega": float(omega),
                "vm": f.vm,
                "label": f.label if f.label is not None else default_label,
                "changes": [
                    {"at_ns": c.at, "theta_bps": c.theta, "omega": float(c.omega)} for c in f.changes
                ],
            }
            | ({} if f.stop is None else {"stop_ns": f.stop})
        )
    arrivals = []
    for k, a in enumerate(sc.arrivals):
        cdf = load_cdf(a.workload)
        rate = arrival_rate_per_s(sc, a, cdf.mean_bytes)
        cos: dict[str, Any]
        if isinstance(a.cos, CosMix):
            cos = {
                "kind": "mix",
                "classes": [
                    {"label": c.label, "prob": c.prob, "theta_bps": c.theta, "omega": float(c.omega)}
                    for c in a.cos.classes
                ],
            }
        else:
            cos = {"kind": "by_vm"}
        arrivals.append(
            {
                "kind": "poisson",
                "id_prefix": a.id_prefix if a.id_prefix is not None else f"a{k}-",
                "rate_per_s": rate,
                "start_ns": a.start,
                "stop_ns": a.stop if a.stop is not None else sc.run.duration,
                "max_flows": a.max_flows,
                "sources": list(a.sources) if a.sources is not None else hosts(topo),
                "destination": a.destination
                or ("other_leaf" if isinstance(topo, LeafSpine) else "any_other_host"),
                "size_cdf": cdf.as_engine(),
                "cos": cos,
            }
        )
    tr = sc.transport
    cc: dict[str, Any] = (
        {"kind": "paccp", "rcos": float(sc.cc.rcos), "min_cwnd_pkts": float(sc.cc.min_cwnd)}
        if sc.cc.kind == "paccp"
        else {"kind": "reno"}
    )
    eng: dict[str, Any] = {
        "seed": sc.run.seed,
        "duration_ns": sc.run.duration,
        "packet": {"mtu_bytes": tr.mtu, "header_bytes": tr.header, "ack_bytes": tr.ack},
        "transport": {
            "init_cwnd_pkts": float(tr.init_cwnd),
            "min_rto_ns": tr.min_rto,
            "initial_rto_ns": tr.initial_rto,
            "max_rto_ns": tr.max_rto,
            "delayed_ack": tr.delayed_ack,
            "delayed_ack_timeout_ns": tr.delayed_ack_timeout,
            "dupack_threshold": tr.dupack_threshold,
            "sack": tr.sack,
            "host_backpressure": tr.host_backpressure,
            "host_fq_pkts": tr.host_fq,
            "prr": tr.prr,
        },
        "cc": cc,
        "topology": t,
        "routing": {"kind": sc.routing.kind},
        "vms": vms,
        "flows": flows,
        "arrivals": arrivals,
        "sampling": {
            "interval_ns": sc.run.sample_interval,
            "flows": sc.run.sample_flows,
            "cwnd": sc.run.sample_cwnd,
        },
    }
    if tr.rack:
        # optional in the engine (absent = off): sent only when on, so other scenarios' JSON is unchanged
        eng["transport"]["rack"] = True
    if tr.ack_delay:
        # optional in the engine (absent = 0): sent only when set, so other scenarios' JSON is unchanged
        eng["transport"]["ack_delay_mean_ns"] = tr.ack_delay
    if tr.handshake:
        # optional in the engine (absent = no handshake): sent only when on
        eng["transport"]["handshake"] = {
            "syn_bytes": tr.syn if tr.syn is not None else tr.header + 8,
            "connect_timeout_ns": tr.connect_timeout,
            "syn_retries": tr.syn_retries,
        }
    if sc.softbw is not None:
        eng["queues"] = {"host": softbw_host_queues(sc, sc.softbw)}
    return sc.scheme.to_engine(sc, eng) if sc.scheme is not None else eng


# --------------------------------------------------------------------------------------------------
# writing TOML (for generated paper scenarios)


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k} = {_toml_value(x)}" for k, x in v.items() if x is not None) + "}"
    raise TypeError(f"cannot write {type(v).__name__} as TOML")


def to_toml(obj: dict[str, Any], header: str = "") -> str:
    """Write a scenario dict (tables of scalars, arrays of tables) as TOML text."""
    lines = [f"# {ln}" if ln else "#" for ln in header.splitlines()]
    for key, val in obj.items():
        if isinstance(val, dict):
            lines.append(f"\n[{key}]")
            lines += [f"{k} = {_toml_value(v)}" for k, v in val.items() if v is not None]
        elif isinstance(val, list) and val and all(isinstance(x, dict) for x in val):
            for item in val:
                lines.append(f"\n[[{key}]]")
                lines += [f"{k} = {_toml_value(v)}" for k, v in item.items() if v is not None]
        else:
            lines.insert(len(header.splitlines()), f"{key} = {_toml_value(val)}")
    return "\n".join(lines).lstrip("\n") + "\n"


# --------------------------------------------------------------------------------------------------
# schemes: each is a model in paccp.schemes with a ``check(scenario)``; one registration line each.
# (Imported last: the scheme models use this module's field types.)

from paccp.schemes.elasticswitch import ElasticSwitch  # noqa: E402
from paccp.schemes.mptcp_bgwc import MptcpBgwc  # noqa: E402

SchemeCfg = Annotated[MptcpBgwc | ElasticSwitch, Field(discriminator="kind")]
Scenario.model_rebuild()
