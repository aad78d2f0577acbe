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
    [scheme]     kind = "mptcp_bgwc" (+ its fields: :mod:`paccp.scenario.schemes.mptcp_bgwc`); absent = the
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

The package, one module per concern: field types (:mod:`~paccp.scenario.fields`), the topology and its
helpers (:mod:`~paccp.scenario.topology`), the section models (:mod:`~paccp.scenario.models`), SoftBW's
section (:mod:`~paccp.scenario.softbw`), the schemes' sections (:mod:`paccp.scenario.schemes`), cross-field
checks (:mod:`~paccp.scenario.checks`), reading (:mod:`~paccp.scenario.parse`), the engine's input
(:mod:`~paccp.scenario.engine_input`) and the TOML writer (:mod:`~paccp.scenario.toml_writer`). The public
names are re-exported here; import them from ``paccp.scenario``.
"""

from __future__ import annotations

from paccp.scenario.engine_input import to_engine
from paccp.scenario.fields import Buffer, CosName, Duration, Name, Omega, Rate, Size
from paccp.scenario.models import (
    ArrivalsCfg,
    BillingCfg,
    CcCfg,
    Change,
    CosByVm,
    CosClass,
    CosMix,
    FlowCfg,
    RunCfg,
    Scenario,
    SchemeCfg,
    TransportCfg,
    Vm,
    arrival_rate_per_s,
    epoch_ns,
    reference_capacity_bps,
)
from paccp.scenario.parse import load_scenario, parse_scenario, parse_toml, read_toml_file
from paccp.scenario.softbw import (
    SOFTBW_KINDS,
    SOFTBW_MAX_CREDIT_NS,
    SoftBWCfg,
    SoftBWGuarantee,
    check_softbw_host,
    softbw_host_queues,
)
from paccp.scenario.toml_writer import to_toml
from paccp.scenario.topology import (
    Dumbbell,
    Explicit,
    LeafSpine,
    Link,
    Node,
    RoutingCfg,
    Topology,
    access_rate_bps,
    hosts,
)

__all__ = [
    "SOFTBW_KINDS",
    "SOFTBW_MAX_CREDIT_NS",
    "ArrivalsCfg",
    "BillingCfg",
    "Buffer",
    "CcCfg",
    "Change",
    "CosByVm",
    "CosClass",
    "CosMix",
    "CosName",
    "Dumbbell",
    "Duration",
    "Explicit",
    "FlowCfg",
    "LeafSpine",
    "Link",
    "Name",
    "Node",
    "Omega",
    "Rate",
    "RoutingCfg",
    "RunCfg",
    "Scenario",
    "SchemeCfg",
    "Size",
    "SoftBWCfg",
    "SoftBWGuarantee",
    "Topology",
    "TransportCfg",
    "Vm",
    "access_rate_bps",
    "arrival_rate_per_s",
    "check_softbw_host",
    "epoch_ns",
    "hosts",
    "load_scenario",
    "parse_scenario",
    "parse_toml",
    "read_toml_file",
    "reference_capacity_bps",
    "softbw_host_queues",
    "to_engine",
    "to_toml",
]
