"""Cross-field checks of a scenario (hosts, VMs, flows, routes, classes of service) and the bounds on its
size before the engine allocates; each failure is a UserError naming the field.
"""

from __future__ import annotations

from paccp.common.cos import pair_error
from paccp.errors import UserError
from paccp.limits import INT64_MAX, MAX_COUNT, MAX_FLOWS_PER_RUN, MAX_LINKS, MAX_SAMPLE_CELLS
from paccp.scenario.models import CosByVm, CosMix, Scenario, Vm, arrival_rate_per_s, epoch_ns
from paccp.scenario.softbw import _check_softbw
from paccp.scenario.topology import Dumbbell, Explicit, LeafSpine, _reachable, access_rate_bps, hosts


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
    first = -(-sc.run.warmup // sc.run.sample_interval)  # the rates' window: whole intervals after warm-up
    if sampled[sc.run.sample_flows] and sc.run.duration // sc.run.sample_interval <= first:
        raise UserError(
            f"run.warmup: no whole sample_interval ({sc.run.sample_interval / 1e6:g} ms) fits between the "
            f"warm-up ({sc.run.warmup / 1e6:g} ms) and the end of the run ({sc.run.duration / 1e6:g} ms), "
            "so no rate could be measured: shorten warmup or sample_interval, or run longer"
        )
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
