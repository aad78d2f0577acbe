"""The sections of a scenario as pydantic models (``[run]``, ``[transport]``, ``[cc]``, ``[billing]``,
``[[vms]]``, ``[[flows]]``, ``[[arrivals]]``, ``[scheme]``) and the whole :class:`Scenario`.
"""

from __future__ import annotations

import datetime as _dt
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, model_validator

from paccp.limits import INT64_MAX, MAX_FLOWS_PER_RUN, MAX_NAME, MAX_TIME_NS
from paccp.scenario.fields import _M, CosName, Duration, Name, Omega, Rate, Size, _check_name
from paccp.scenario.schemes.elasticswitch import ElasticSwitch
from paccp.scenario.schemes.mptcp_bgwc import MptcpBgwc
from paccp.scenario.schemes.paccp_host import PaccpHost
from paccp.scenario.softbw import SoftBWCfg
from paccp.scenario.topology import Dumbbell, LeafSpine, RoutingCfg, Topology
from paccp.units import parse_duration_ns


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
    ack: Size = 40
    init_cwnd: float = Field(default=10.0, le=1e6)
    min_rto: Duration = parse_duration_ns("1ms")
    initial_rto: Duration = parse_duration_ns("3ms")
    max_rto: Duration = parse_duration_ns("1s")
    delayed_ack: bool = False
    delayed_ack_timeout: Duration = parse_duration_ns("40us")
    dupack_threshold: int = Field(default=3, ge=0, le=2**31 - 1)
    # Linux-like defaults: SACK recovery (RFC 2018/6675) and a sender that waits for room in its own NIC
    # queue (as TCP small queues do) instead of dropping there. ``sack = false`` gives NewReno recovery,
    # ``host_backpressure = false`` a dropping NIC queue (see docs/engine-contract.md).
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
    # cross-check's twins use the namespace testbed's measured ~30 us (docs/explanation/fidelity.md).
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
        # the rules between these fields (and their bounds) are the engine's, checked by the engine
        # itself: one place (paccp.scenario.engine_rules)
        from paccp.scenario.engine_rules import check_transport

        check_transport(self.engine_sections())
        return self

    def engine_sections(self) -> dict[str, Any]:
        """The engine JSON's ``packet`` and ``transport`` sections (docs/engine-contract.md)."""
        eng: dict[str, Any] = {
            "packet": {"mtu_bytes": self.mtu, "header_bytes": self.header, "ack_bytes": self.ack},
            "transport": {
                "init_cwnd_pkts": float(self.init_cwnd),
                "min_rto_ns": self.min_rto,
                "initial_rto_ns": self.initial_rto,
                "max_rto_ns": self.max_rto,
                "delayed_ack": self.delayed_ack,
                "delayed_ack_timeout_ns": self.delayed_ack_timeout,
                "dupack_threshold": self.dupack_threshold,
                "sack": self.sack,
                "host_backpressure": self.host_backpressure,
                "host_fq_pkts": self.host_fq,
                "prr": self.prr,
            },
        }
        if self.rack:
            # optional in the engine (absent = off): sent only when on, so other scenarios' JSON is unchanged
            eng["transport"]["rack"] = True
        if self.ack_delay:
            # optional in the engine (absent = 0): sent only when set, so other scenarios' JSON is unchanged
            eng["transport"]["ack_delay_mean_ns"] = self.ack_delay
        if self.handshake:
            # optional in the engine (absent = no handshake): sent only when on
            eng["transport"]["handshake"] = {
                "syn_bytes": self.syn if self.syn is not None else self.header + 8,
                "connect_timeout_ns": self.connect_timeout,
                "syn_retries": self.syn_retries,
            }
        return eng


class CcCfg(_M):
    """``[cc]``: the congestion control (PACCP with rcos, or plain Reno)."""

    kind: Literal["paccp", "reno"] = "paccp"
    rcos: float = Field(default=3.0, gt=1.0, le=1e3)
    min_cwnd: float = Field(default=1.0, ge=1.0, le=1e6, description="window floor in segments")


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
        delta = t - _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
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


# schemes: each is a model in paccp.scenario.schemes with a ``check(scenario)``; one registration line each.
SchemeCfg = Annotated[MptcpBgwc | ElasticSwitch | PaccpHost, Field(discriminator="kind")]


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
