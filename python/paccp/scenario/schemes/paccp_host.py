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
    retag = true          # a re-solve rescales the service a VM's scheduler tag still owes to its new
                          # share (false: the packet is served at its old share, ablation)
    window = "law"        # the receive window the host imposes on each connection (AC/DC TCP / vCC style):
                          # law: PACCP's law per connection (the VM's pair split over its connections)
                          # from the queueing delay beyond the host, capped so that a VM never has more
                          # than 90 % of its host queue in flight, and below one segment per connection
                          # a pacer per VM at its law's rate; cap: the cap alone (ablation);
                          # off: no window (the guest's own congestion control alone, ablation)
    mark = "50us"         # queueing delay beyond the host above which an ACK counts as marked
    queue = "500us"       # the wait a VM may have in its host queue at its port share (below the
                          # guests' minimum RTO, so a share that falls does not fire their timers)
    idle = "1ms"          # a connection that sent nothing this long leaves its VM's split
    start = true          # a VM's first connection opens at its guarantee's window and doubles per
                          # unmarked round until the first mark or loss (false: opens at the cap, ablation)
    loss = true           # a retransmission leaving the host halves the connection's law window
                          # (false: the law sees queueing delay only, ablation)
    fluid = true          # the law run in time (DCTCP's fluid model: each ACK advances it by the time
                          # since the last), the guarantee tested on the VM's connections together
                          # (false: per round of each connection, ablation)
    pool = true           # while the VM is paced, all its ACKs drive all its connections as one
                          # (false: each connection its own ACKs, ablation)
    split = true          # a connection joining live ones of its VM splits the VM's window (false:
                          # it starts at their mean window, adding to the VM's, ablation)
    merge = true          # a connection that ends gives its window back to its VM's live ones, in
                          # proportion to theirs (false: the window ends with it, ablation)
    turns = true          # a VM with more connections than its host-queue cap has segments: they take
                          # turns, the waiting ones behind a zero window that a window update reopens
                          # (false: each keeps a segment waiting in the host queue, ablation)
    dedup = true          # a guest's retransmission of a segment still waiting in its VM's host queue is
                          # dropped, the original going in its place, and a queued copy of a segment the
                          # host has seen acknowledged is dropped when it comes up for service (false:
                          # copies take the VM's share, ablation)
    grow_marked = false   # a variant, not as shipped: the law's increase (omega / n per RTT) goes on in
                          # marked time too, so its share depends less on how often a VM is marked
                          # (docs/host-scheme.md, "Not solved": it breaks the guarantee bars)
    pace_credit = false   # a variant: a paced connection that had nothing to send when its gap ended
                          # may send one segment at once (a token bucket one segment deep)
    prio = true           # the guarantee at priority (with window = "law"): a connection whose law window
                          # is at its guarantee's floor sends at the switches' high level, the others at
                          # the low one (two strict-priority levels sharing their link's buffer, marking
                          # CE above `mark` of the port's backlog; the law reads CE as well as delay)
                          # (false: one level, delay alone, ablation)
    rcos = 3.0

Each VM's pair is its ``theta`` / ``omega`` in ``[[vms]]``; the host port rate is the host's access rate.
The guests run whatever ``[cc]`` says (Reno by default): the host enforces the purchase on their traffic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from paccp.errors import UserError
from paccp.scenario.fields import _M, Duration
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
    retag: bool = True
    window: Literal["law", "cap", "off"] = "law"
    mark: Duration = Field(default=parse_duration_ns("50us"), gt=0)
    queue: Duration = Field(default=parse_duration_ns("500us"), gt=0)
    idle: Duration = Field(default=parse_duration_ns("1ms"), gt=0)
    rcos: float = Field(default=3.0, gt=1, le=100)
    start: bool = True
    loss: bool = True
    fluid: bool = True
    pool: bool = True
    split: bool = True
    merge: bool = True
    turns: bool = True
    dedup: bool = True
    grow_marked: bool = False
    pace_credit: bool = False
    prio: bool = True

    def check(self, sc: Scenario) -> None:
        """Cross-field checks (UserError naming the field); called by the scenario's semantic checks."""
        if sc.softbw is not None:
            raise UserError("scheme: paccp_host cannot be combined with [softbw] (both set the host queues)")
        if "prio" in self.model_fields_set and self.prio and self.window != "law":
            raise UserError('scheme.prio: needs window = "law" (the law finds the connections at a floor)')

    def to_engine(self, sc: Scenario, eng: dict[str, Any]) -> dict[str, Any]:
        """The engine JSON of ``sc``: the paccp_host selector at every host with a VM."""
        from paccp.scenario.topology import access_rate_bps

        # the guarantee at priority needs the law (an explicit prio without it is refused by `check`)
        prio = self.prio and self.window == "law"
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
            "retag": self.retag,
            "window": None,
        }
        if self.window != "off":
            buf = dict(sc.topology.nic_buffer)
            pkts = buf["packets"] if "packets" in buf else max(1, buf["bytes"] // sc.transport.mtu)
            selector["window"] = {
                "law": self.window == "law",
                "queue_pkts": int(pkts),
                "mark_ns": self.mark,
                "queue_ns": self.queue,
                "rcos": self.rcos,
                "mss_bytes": sc.transport.mtu,
                "idle_ns": self.idle,
                "start": self.start,
                "loss": self.loss,
                "fluid": self.fluid,
                "pool": self.pool,
                "split": self.split,
                "merge": self.merge,
                "turns": self.turns,
                "dedup": self.dedup,
                "grow_marked": self.grow_marked,
                "pace_credit": self.pace_credit,
                "prio": prio,
            }
        queues = dict(eng.get("queues") or {})
        queues["host"] = {"kind": "per_vm", "buffer": dict(sc.topology.nic_buffer), "selector": selector}
        if prio:
            buf = dict(sc.topology.nic_buffer)  # the count of levels only: they share their link's buffer
            queues["switch"] = {
                "kind": "strict_priority",
                "levels": [buf, buf],
                "shared_buffer": True,
                "ce_ns": self.mark,
            }
        return dict(eng, queues=queues)
