"""Scheme ``elasticswitch``: a rate-limiter baseline after ElasticSwitch (Popa et al., SIGCOMM 2013).

Scenario section (docs/softbw.md, "ElasticSwitch-style baseline", states every simplification)::

    [scheme]
    kind = "elasticswitch"
    guarantee = "450Mbit"     # hose guarantee B of every VM (> 0)
    guarantees = { vm2 = "200Mbit" }   # per-VM B instead (optional)
    gp_period = "50ms"        # guarantee partitioning period
    ra_period = "50ms"        # rate allocation period (the SoftBW slides' "update interval (e.g. 50ms)")
    ecn_delay = "200us"       # a packet that waited longer in the NIC queue marks its pair congested
    md = 0.5                  # RA decrease: R = max(B_XY, R (1 - md))
    ai = 0.1                  # RA increase per period: max(ai x B_XY, min_step) while limited
    min_step = "1Mbit"
    burst = "15000B"          # depth of each pair's token bucket

At each host's egress, one rate limiter (token bucket) per VM pair (source VM, destination host); the
limiters feed one FIFO NIC queue. Guarantee partitioning splits each VM's B max-min over its active pairs
(capped by the receiver side's share when the destination host carries exactly one VM: B_Y over the number
of VMs sending to it in the scenario); rate allocation raises a pair's limiter above its guarantee while it
sees no congestion and cuts it (never below the guarantee) when it does. Engine:
``crates/paccp-sim/src/host/elasticswitch.rs``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, model_validator

from paccp.errors import UserError
from paccp.scenario.fields import _M, Duration, Rate, Size
from paccp.units import parse_duration_ns

if TYPE_CHECKING:
    from paccp.scenario.models import Scenario


class ElasticSwitch(_M):
    """``[scheme] kind = "elasticswitch"`` (module docstring)."""

    kind: Literal["elasticswitch"]
    guarantee: Rate | None = Field(default=None, description="hose guarantee B of every VM")
    guarantees: dict[str, Rate] = Field(default_factory=dict, description="per-VM B")
    gp_period: Duration = Field(default=parse_duration_ns("50ms"), gt=0)
    ra_period: Duration = Field(default=parse_duration_ns("50ms"), gt=0)
    ecn_delay: Duration = Field(default=parse_duration_ns("200us"), gt=0)
    md: float = Field(default=0.5, gt=0, lt=1)
    ai: float = Field(default=0.1, gt=0, le=10)
    min_step: Rate = Field(default=1_000_000, ge=0)
    burst: Size = Field(default=15_000, gt=0)

    @model_validator(mode="after")
    def _check(self) -> ElasticSwitch:
        for name, b in [
            ("guarantee", self.guarantee),
            *((f"guarantees.{k}", v) for k, v in self.guarantees.items()),
        ]:
            if b is not None and b <= 0:
                raise ValueError(f"{name}: the guarantee B must be > 0, got {b}")
        return self

    def b_of(self, vm: str) -> int | None:
        """The hose guarantee B of VM ``vm`` (bit/s)."""
        return self.guarantees.get(vm, self.guarantee)

    def check(self, sc: Scenario) -> None:
        """Cross-field checks (UserError naming the field); called by the scenario's semantic checks."""
        vm_ids = {vm.id for vm in sc.vms}
        for name in self.guarantees:
            if name not in vm_ids:
                raise UserError(f"scheme.guarantees.{name}: unknown VM")
        for vm in sc.vms:
            if self.b_of(vm.id) is None:
                raise UserError(
                    f"scheme.guarantee: VM {vm.id!r} has no guarantee B (set guarantee or guarantees)"
                )
        if sc.softbw is not None:
            raise UserError(
                "scheme: elasticswitch cannot be combined with [softbw] (both set the host queues)"
            )

    def to_engine(self, sc: Scenario, eng: dict[str, Any]) -> dict[str, Any]:
        """The engine JSON of ``sc``: per-VM-pair limiters at every host's egress."""
        from paccp.scenario.topology import access_rate_bps, hosts

        host_names = hosts(sc.topology)
        index = {h: i for i, h in enumerate(host_names)}
        vm_host = {vm.id: vm.host for vm in sc.vms}
        vms_on: dict[str, list[str]] = {}
        for vm in sc.vms:
            vms_on.setdefault(vm.host, []).append(vm.id)
        senders: dict[str, set[str]] = {}
        for f in eng["flows"]:
            if f.get("vm") is not None:
                senders.setdefault(f["dst"], set()).add(f["vm"])
        pairs = []
        for f in eng["flows"]:
            dst = f["dst"]
            rx = 0
            on = vms_on.get(dst, [])
            if len(on) == 1 and senders.get(dst):
                rx = int((self.b_of(on[0]) or 0) // len(senders[dst]))
            pairs.append({"dst": index[dst], "rx_bps": rx})
        guarantees = {vm.id: int(self.b_of(vm.id) or 0) for vm in sc.vms if vm.id in vm_host}
        selector = {
            "kind": "elasticswitch",
            "guarantees": guarantees,
            "flow_pairs": pairs,
            "gp_period_ns": self.gp_period,
            "ra_period_ns": self.ra_period,
            "ecn_delay_ns": self.ecn_delay,
            "md": self.md,
            "ai": self.ai,
            "min_step_bps": self.min_step,
            "max_rate_bps": max(access_rate_bps(sc.topology, h) for h in host_names),
            "burst_bytes": self.burst,
        }
        queues = dict(eng.get("queues") or {})
        queues["host"] = {"kind": "per_vm", "buffer": dict(sc.topology.nic_buffer), "selector": selector}
        return dict(eng, queues=queues)
