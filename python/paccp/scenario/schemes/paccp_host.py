"""Scheme ``paccp_host``: PACCP's purchase (theta, omega) enforced at the VM's host, whatever the guest runs.

Scenario section (engine: ``crates/paccp-sim/src/host/paccp_host.rs``, which documents the mechanism)::

    [scheme]
    kind = "paccp_host"
    alloc = "optimum"     # optimum: the port split by PACCP's optimum among the active VMs of the host
                          # (water-filling, guarantees scaled by one factor when they exceed the port);
                          # equal: equal weights (ablation)
    per_vm = true         # a VM's flows share one queue and one weight (false: one queue per flow, ablation)
    hold = "1ms"          # a VM stays in the solved set this long after its last waiting packet
    resolve = "1ms"       # re-solve at least this often (and whenever the active set changes)
    fabric = true         # per-VM rate limiter driven by PACCP's law from losses beyond the host
    interval = "100us"    # the law's round (its "RTT")
    idle = "1ms"          # a VM idle this long restarts unlimited
    rcos = 3.0
    burst = "3000B"       # depth of a VM's token bucket

Each VM's pair is its ``theta`` / ``omega`` in ``[[vms]]``; the host port rate is the host's access rate.
The guests run whatever ``[cc]`` says (Reno by default): the host enforces the purchase on their traffic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from paccp.errors import UserError
from paccp.scenario.fields import _M, Duration, Size
from paccp.units import parse_duration_ns

if TYPE_CHECKING:
    from paccp.scenario.models import Scenario


class PaccpHost(_M):
    """``[scheme] kind = "paccp_host"`` (module docstring)."""

    kind: Literal["paccp_host"]
    alloc: Literal["optimum", "equal"] = "optimum"
    per_vm: bool = True
    hold: Duration = Field(default=parse_duration_ns("1ms"), gt=0)
    resolve: Duration = Field(default=parse_duration_ns("1ms"), gt=0)
    fabric: bool = True
    interval: Duration = Field(default=parse_duration_ns("100us"), gt=0)
    idle: Duration = Field(default=parse_duration_ns("1ms"), gt=0)
    rcos: float = Field(default=3.0, gt=1, le=100)
    burst: Size = Field(default=3000, gt=0)

    def check(self, sc: Scenario) -> None:
        """Cross-field checks (UserError naming the field); called by the scenario's semantic checks."""
        if sc.softbw is not None:
            raise UserError("scheme: paccp_host cannot be combined with [softbw] (both set the host queues)")

    def to_engine(self, sc: Scenario, eng: dict[str, Any]) -> dict[str, Any]:
        """The engine JSON of ``sc``: the paccp_host selector at every host with a VM."""
        from paccp.scenario.topology import access_rate_bps

        vms = {
            vm.id: {
                "theta_bps": int(vm.theta),
                "omega": float(vm.omega),
                "port_bps": int(access_rate_bps(sc.topology, vm.host)),
            }
            for vm in sc.vms
        }
        selector: dict[str, Any] = {
            "kind": "paccp_host",
            "vms": vms,
            "alloc": self.alloc,
            "per_vm": self.per_vm,
            "hold_ns": self.hold,
            "resolve_ns": self.resolve,
            "fabric": None,
        }
        if self.fabric:
            selector["fabric"] = {
                "interval_ns": self.interval,
                "idle_ns": self.idle,
                "rcos": self.rcos,
                "mss_bytes": sc.transport.mtu,
                "burst_bytes": self.burst,
            }
        queues = dict(eng.get("queues") or {})
        queues["host"] = {"kind": "per_vm", "buffer": dict(sc.topology.nic_buffer), "selector": selector}
        return dict(eng, queues=queues)
