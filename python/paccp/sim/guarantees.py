"""Over-committed guarantees: where the minimum rates (theta) sold cannot all be delivered at once.

Selling more guaranteed rate than a link carries is legitimate (over-commitment), but the user must be
told. :func:`overcommitted` takes a finished run's flows (their routes, life times and pairs) and finds
every channel on which the thetas of the flows crossing it at the same time sum to more than its rate.
A VM's theta is split equally over its active flows (:func:`paccp.common.cos.split_pair`, as the engine does).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from paccp.common.cos import split_pair

REL_TOL = 1e-9


@dataclass(frozen=True)
class Overcommit:
    """The worst moment of one over-committed channel."""

    channel: str
    theta_sum_bps: float
    rate_bps: float
    at_ns: int
    flows: tuple[str, ...]

    def message(self) -> str:
        """One line for summary.json and stderr."""
        ids = ", ".join(self.flows[:4]) + (f" and {len(self.flows) - 4} more" if len(self.flows) > 4 else "")
        return (
            f"guarantees over-committed on {self.channel}: thetas sum to {self.theta_sum_bps / 1e9:.6g} Gb/s "
            f"> {self.rate_bps / 1e9:.6g} Gb/s at {self.at_ns / 1e6:g} ms (flows {ids}); "
            "they cannot all be met"
        )


def overcommitted(
    flows: Sequence[Mapping[str, Any]], channel_rates: Mapping[str, float], end_ns: int
) -> list[Overcommit]:
    """Channels whose concurrent thetas exceed their rate, worst moment first by excess ratio.

    ``flows``: engine flow rows (``id, vm, theta_bps, omega, route, start_ns, finish_ns``; a VM flow's
    ``theta_bps`` is its VM's). ``end_ns``: the end of the run (unfinished flows are active until then).
    """
    events: list[tuple[int, int, int]] = []  # (time, +1 start / -1 end, flow index); ends sort first
    for i, f in enumerate(flows):
        if f["theta_bps"] > 0 and f["route"]:
            end = f["finish_ns"] if f["finish_ns"] is not None else end_ns
            if end > f["start_ns"]:
                events.append((f["start_ns"], 1, i))
                events.append((end, -1, i))
    events.sort(key=lambda e: (e[0], e[1]))
    demand: dict[str, float] = {}
    on_channel: dict[str, set[int]] = {}
    share: dict[int, float] = {}
    vm_active: dict[str, set[int]] = {}
    worst: dict[str, Overcommit] = {}

    def put(i: int, value: float) -> list[str]:
        old = share.pop(i, 0.0)
        route = flows[i]["route"]
        for ch in route:
            demand[ch] = demand.get(ch, 0.0) - old + value
        if value:
            share[i] = value
        return list(route)

    k = 0
    while k < len(events):
        t = events[k][0]
        touched: set[str] = set()
        while k < len(events) and events[k][0] == t:
            _, kind, i = events[k]
            k += 1
            f = flows[i]
            vm = f.get("vm")
            group = vm_active.setdefault(vm, set()) if vm is not None else None
            if group is not None:
                for j in group:
                    touched.update(put(j, 0.0))
                group.add(i) if kind > 0 else group.discard(i)
                for j in group:
                    touched.update(put(j, split_pair(flows[j]["theta_bps"], 1.0, len(group))[0]))
                if kind < 0:
                    touched.update(put(i, 0.0))
            else:
                touched.update(put(i, float(f["theta_bps"]) if kind > 0 else 0.0))
            for ch in flows[i]["route"]:
                members = on_channel.setdefault(ch, set())
                members.add(i) if kind > 0 else members.discard(i)
        for ch in touched:
            rate = float(channel_rates.get(ch, 0.0))
            d = demand.get(ch, 0.0)
            if rate > 0 and d > rate * (1 + REL_TOL):
                prev = worst.get(ch)
                if prev is None or d > prev.theta_sum_bps:
                    ids = tuple(sorted(str(flows[j]["id"]) for j in on_channel.get(ch, ()) if j in share))
                    worst[ch] = Overcommit(ch, d, rate, t, ids)
    return sorted(worst.values(), key=lambda o: (-o.theta_sum_bps / o.rate_bps, o.channel))


def warnings_for(result: Any, end_ns: int, limit: int = 10) -> list[str]:
    """One line per over-committed channel of an engine result (at most ``limit``, then a count)."""
    chan = dict(
        zip(
            result.channels.column("name").to_pylist(),
            result.channels.column("rate_bps").to_pylist(),
            strict=True,
        )
    )
    cols = ["id", "vm", "theta_bps", "route", "start_ns", "finish_ns"]
    found = overcommitted(result.flows.select(cols).to_pylist(), chan, end_ns)
    lines = [o.message() for o in found[:limit]]
    if len(found) > limit:
        lines.append(f"guarantees over-committed on {len(found) - limit} more channels")
    return lines
