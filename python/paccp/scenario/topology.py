"""``[topology]`` (leaf_spine | dumbbell | explicit) and ``[routing]``, and the helpers that read a topology
(its hosts in engine order, a host's access rate, reachability on an explicit graph).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from paccp.limits import MAX_COUNT, MAX_LINKS
from paccp.scenario.fields import _M, Buffer, Duration, Name, Rate
from paccp.units import parse_duration_ns, parse_rate_bps


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
