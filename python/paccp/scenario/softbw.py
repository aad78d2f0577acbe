"""SoftBW's scenario section ``[softbw]``: guarantees per VM, over-commitment per host, their checks, and
the engine's per-VM host queues that enforce them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import Field, model_validator

from paccp.errors import UserError
from paccp.scenario.fields import _M, Duration, Rate, Size
from paccp.scenario.topology import Topology, access_rate_bps
from paccp.units import parse_duration_ns

if TYPE_CHECKING:
    from paccp.scenario.models import Scenario, Vm


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
