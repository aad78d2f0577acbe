"""The scheme-independent setup of one comparison point: VMs with their purchases, and the traffic.

Every scheme runs the same :class:`Setup`; only its mapping (:mod:`paccp.compare.schemes`) differs. VM ids
are ``vm<i>``; a flow belongs to the VM of its ``vm`` field (explicit flows) or of its source host
(arrivals, one VM per host). Flow ids never contain ``/`` (the MPTCP scheme appends ``/bg``, ``/wc0``).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pydantic import TypeAdapter, ValidationError

from paccp.compare.spec import GamingCfg, PointCfg, Purchase, Spec
from paccp.errors import UserError, validation_error
from paccp.scenario import Explicit, Topology, hosts


@dataclass(frozen=True)
class SetupVm:
    """One tenant VM: id, host and what it bought."""

    id: str
    host: str
    purchase: Purchase


@dataclass
class Setup:
    """What every scheme runs for one point and seed."""

    base: dict[str, Any]  # scenario dict without [[vms]] / [[flows]] (run, topology, arrivals, ...)
    vms: list[SetupVm]
    flows: list[dict[str, Any]]  # explicit flows: id, src, dst, vm, start (+ size)
    host_vm: dict[str, str] = field(default_factory=dict)  # arrivals: the VM of each source host
    gamer: str | None = None  # gaming runs: the VM that opens k flows
    jobs: list[Any] = field(default_factory=list)  # mapreduce: job plans (shuffle times)

    def vm(self, vm_id: str) -> SetupVm:
        """The VM with this id."""
        return next(v for v in self.vms if v.id == vm_id)


def _topology(base: dict[str, Any], where: str) -> Any:
    try:
        return TypeAdapter(Topology).validate_python(base.get("topology"))
    except ValidationError as exc:
        loc, msg = validation_error(exc)
        raise UserError(f"{where}: topology.{loc}: {msg}") from None


def pattern(purchases: list[Purchase]) -> list[Purchase]:
    """The repeating class pattern: each purchase ``share`` times, in file order."""
    return [p for p in purchases for _ in range(p.share)]


def build_setup(spec: Spec, point: PointCfg, seed: int) -> Setup:
    """The VMs and traffic of ``point`` with ``seed`` (UserError for an impossible layout)."""
    cfg = spec.cfg
    where = str(spec.path)
    base = copy.deepcopy(spec.base)
    run = base.setdefault("run", {})
    run["seed"] = seed
    run["sample_interval"] = f"{cfg.window}ns"
    run["sample_flows"] = "all"
    if point.load is not None:
        for a in base.get("arrivals", []):
            a["load"] = point.load
            a.pop("rate_per_s", None)
    topo = _topology(base, where)
    all_hosts = hosts(topo)
    vm_hosts = cfg.vms.hosts if cfg.vms.hosts is not None else all_hosts
    unknown = [h for h in vm_hosts if h not in all_hosts]
    if unknown:
        raise UserError(f"{where}: compare.vms.hosts: unknown host {unknown[0]!r}")
    per_host = point.vms_per_host or cfg.vms.per_host
    pat = pattern(cfg.purchases)
    vms: list[SetupVm] = []
    for h in vm_hosts:
        for j in range(per_host):
            vms.append(SetupVm(f"vm{len(vms)}", h, pat[(len(vms) if per_host == 1 else j) % len(pat)]))
    kind = cfg.traffic.kind
    if kind == "arrivals":
        if per_host != 1:
            raise UserError(f"{where}: compare.traffic.kind = 'arrivals' needs one VM per host")
        host_vm = {v.host: v.id for v in vms}
        flows = poisson_flows(base, topo, host_vm, seed, where)
        del base["arrivals"]
        return Setup(base, vms, flows, host_vm=host_vm)
    if kind == "longlived":
        from paccp.scenario import RunCfg

        try:
            duration = RunCfg.model_validate(run).duration
        except ValidationError as exc:
            loc, msg = validation_error(exc)
            raise UserError(f"{where}: run.{loc}: {msg}") from None
        return Setup(base, vms, _longlived(spec, vms, all_hosts, per_host, duration, seed))
    return _mapreduce(spec, base, vms, seed, where)


def poisson_flows(
    base: dict[str, Any], topo: Any, host_vm: dict[str, str], seed: int, where: str
) -> list[dict[str, Any]]:
    """The ``[[arrivals]]`` drawn here as explicit flows, so that every scheme runs the same flows.

    The rules are the engine's (docs/engine-contract.md): Poisson arrivals at the rate of
    :func:`paccp.scenario.arrival_rate_per_s` over ``[start, stop)``, the source uniform over the VM hosts,
    the destination uniform over the hosts of other leaves (leaf-spine) or all other hosts, the size from
    the piecewise-linear inverse CDF (at least 1 byte). Random stream: numpy's, seeded by (seed, arrival).
    """
    from paccp.scenario import ArrivalsCfg, LeafSpine, arrival_rate_per_s, parse_scenario
    from paccp.traffic.workload import load_cdf

    probe = dict(base, flows=[])
    sc = parse_scenario(copy.deepcopy(probe), where=where)
    all_hosts = hosts(topo)
    sources = list(host_vm)
    duration = sc.run.duration
    flows: list[dict[str, Any]] = []
    for k, a in enumerate(sc.arrivals):
        assert isinstance(a, ArrivalsCfg)
        cdf = load_cdf(a.workload)
        rate = arrival_rate_per_s(sc, a, cdf.mean_bytes)
        rng = np.random.default_rng([seed, 7919, k])
        stop = a.stop if a.stop is not None else duration
        span_s = (stop - a.start) / 1e9
        n = int(rng.poisson(rate * span_s))
        if a.max_flows is not None:
            n = min(n, a.max_flows)
        starts = np.sort(rng.uniform(a.start, stop, size=n)).astype(np.int64)
        xs = np.array([x for x, _ in cdf.points], dtype=np.float64)
        ps = np.array([p for _, p in cdf.points], dtype=np.float64)
        sizes = np.maximum(1, np.interp(rng.uniform(0, 1, size=n), ps, xs)).astype(np.int64)
        src_idx = rng.integers(0, len(sources), size=n)
        pick = rng.uniform(0, 1, size=n)
        for i in range(n):
            src = sources[int(src_idx[i])]
            if isinstance(topo, LeafSpine):
                leaf = int(src[1:]) // topo.hosts_per_leaf
                cands = [h for h in all_hosts if int(h[1:]) // topo.hosts_per_leaf != leaf]
            else:
                cands = [h for h in all_hosts if h != src]
            dst = cands[int(pick[i] * len(cands))]
            flows.append(
                {
                    "id": f"a{k}-{i}",
                    "src": src,
                    "dst": dst,
                    "vm": host_vm[src],
                    "size": int(sizes[i]),
                    "start": f"{int(starts[i])}ns",
                }
            )
    return flows


def _longlived(
    spec: Spec, vms: list[SetupVm], all_hosts: list[str], per_host: int, duration_ns: int, seed: int
) -> list[dict[str, Any]]:
    tr = spec.cfg.traffic
    vm_hosts = {v.host for v in vms}
    rx = tr.receivers if tr.receivers is not None else [h for h in all_hosts if h not in vm_hosts]
    bad = [h for h in rx if h not in all_hosts]
    if bad:
        raise UserError(f"{spec.path}: compare.traffic.receivers: unknown host {bad[0]!r}")
    if not rx:
        raise UserError(f"{spec.path}: compare.traffic: no receivers (every host carries VMs)")
    flows: list[dict[str, Any]] = []
    rng = np.random.default_rng([seed, 15485863])
    for i, v in enumerate(vms):
        j = i % per_host
        n = tr.flows_per_vm[j % len(tr.flows_per_vm)]
        start = int(tr.starts[j % len(tr.starts)] * duration_ns)
        for k in range(n):
            dst = rx[len(flows) % len(rx)]
            if dst == v.host:
                dst = rx[(len(flows) + 1) % len(rx)]
            jitter = int(rng.integers(0, 1_000_000))  # 0-1 ms, from the seed
            flows.append(
                {"id": f"{v.id}.{k}", "src": v.host, "dst": dst, "vm": v.id, "start": f"{start + jitter}ns"}
            )
    return flows


def _mapreduce(spec: Spec, base: dict[str, Any], vms: list[SetupVm], seed: int, where: str) -> Setup:
    from paccp.traffic import mapreduce as mr

    tr = spec.cfg.traffic
    host_vm: dict[str, str] = {}
    for v in vms:
        host_vm.setdefault(v.host, v.id)
    servers = list(host_vm)
    scaling = mr.Scaling(
        jobs=tr.jobs, size_scale=tr.size_scale, time_scale=tr.time_scale, max_tasks=tr.max_tasks
    )
    plans, sflows = mr.plan_shuffle(mr.load_trace(max_jobs=tr.jobs), servers, scaling, seed)
    if not sflows:
        raise UserError(f"{where}: compare.traffic: the first {tr.jobs} jobs have no network shuffle")
    flows = [
        {
            "id": f.id,
            "src": f.src,
            "dst": f.dst,
            "vm": host_vm[f.src],
            "size": f.size_bytes,
            "start": f"{f.start_ns}ns",
        }
        for f in sflows
    ]
    last = max(p.start_ns for p in plans)
    base.setdefault("run", {})["duration"] = f"{last + tr.drain}ns"
    return Setup(base, vms, flows, host_vm=host_vm, jobs=plans)


def gaming_setup(
    g: GamingCfg, k: int, seed: int, window_ns: int, transport: dict[str, Any] | None = None
) -> Setup:
    """One VM (``vm0``) with k long-lived flows and ``g.vms - 1`` VMs with one each, on one bottleneck.

    ``where = "host"``: every VM on host ``s`` whose NIC (``g.rate``) is the bottleneck, receivers on
    10x faster links (SoftBW's non-blocking fabric). ``where = "fabric"``: one VM per sender host on fast
    links, all crossing one switch-to-switch link of ``g.rate``.
    """
    fast = g.rate * 10
    n_rx = g.vms - 1 + k
    nodes: list[dict[str, str]] = [{"name": "sw1", "kind": "switch"}]
    links: list[dict[str, Any]] = []
    rx_sw = "sw1"
    if g.where == "host":
        senders = ["s"] * g.vms
        nodes.append({"name": "s", "kind": "host"})
        links.append({"a": "s", "b": "sw1", "rate": g.rate, "delay": "10us", "buffer": "200pkt"})
    else:
        senders = [f"s{i}" for i in range(g.vms)]
        nodes += [{"name": s, "kind": "host"} for s in senders]
        nodes.append({"name": "sw2", "kind": "switch"})
        links += [{"a": s, "b": "sw1", "rate": fast, "delay": "10us", "buffer": "200pkt"} for s in senders]
        links.append({"a": "sw1", "b": "sw2", "rate": g.rate, "delay": "10us", "buffer": "200pkt"})
        rx_sw = "sw2"
    nodes += [{"name": f"r{i}", "kind": "host"} for i in range(n_rx)]
    links += [
        {"a": f"r{i}", "b": rx_sw, "rate": fast, "delay": "10us", "buffer": "200pkt"} for i in range(n_rx)
    ]
    topo = Explicit.model_validate({"kind": "explicit", "nodes": nodes, "links": links})
    del topo  # validated here; the scenario keeps the dict
    purchase = Purchase(name="tenant", guarantee=g.guarantee, weight=g.weight)
    vms = [SetupVm(f"vm{i}", senders[i], purchase) for i in range(g.vms)]
    flows = []
    r = 0
    rng = np.random.default_rng([seed, 104729, k])
    for i, v in enumerate(vms):
        for j in range(k if i == 0 else 1):
            start = int(rng.integers(0, 1_000_000))  # 0-1 ms, from the seed
            flows.append(
                {"id": f"{v.id}.{j}", "src": v.host, "dst": f"r{r}", "vm": v.id, "start": f"{start}ns"}
            )
            r += 1
    dur = g.duration
    base = {
        "run": {
            "seed": seed,
            "duration": f"{dur}ns",
            "warmup": f"{dur // 3}ns",
            "sample_interval": f"{window_ns}ns",
            "sample_flows": "all",
        },
        "topology": {"kind": "explicit", "nodes": nodes, "links": links},
    }
    if transport:
        base["transport"] = copy.deepcopy(transport)
    return Setup(base, vms, flows, gamer="vm0")
