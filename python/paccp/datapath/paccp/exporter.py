"""Prometheus exporter of the datapath metering maps: per-VM and per-CoS bytes and rates.

Metrics (scraped from ``http://127.0.0.1:PORT/metrics`` by default):

- ``paccp_vm_bytes_acked_total{vm,tenant,cos}``: bytes acknowledged by the VM's paccp flows (counter);
  flows whose socket is in no VM cgroup are summed as ``vm="outside-vm", tenant="(host)"``
- ``paccp_vm_rate_bps{vm,tenant,cos}``: rate over the last sampling interval
- ``paccp_cos_bytes_acked_total{cos}`` / ``paccp_cos_rate_bps{cos}``: the same summed per class of service
  (VM-less flows are classified by their own pair)
- ``paccp_flows_active``: live paccp flows

A VM's series exist while its metering state does: they stop when the VM is cleared (``vm clear``) or its
cgroup is removed (the BPF cgroup_rmdir program drops the state; :func:`~paccp.datapath.paccp.vms.reap`
at every scan is the fallback). The per-CoS counters then lose that VM's bytes (a counter reset to
Prometheus).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from decimal import Decimal

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from paccp.common.cos import classify
from paccp.datapath.core import cgroups, env
from paccp.datapath.paccp import maps, metering
from paccp.datapath.paccp.maps import q20_to_omega
from paccp.datapath.paccp.vms import reap


def _cos(theta: int, omega: Decimal | float) -> str:
    return classify(theta, Decimal(str(omega)))


class Sampler:
    """Reads the maps; keeps the previous sample to turn byte counters into rates."""

    def __init__(self) -> None:
        self.vm_bytes: dict[tuple[str, str, str], int] = {}
        self.cos_bytes: dict[str, int] = {}
        self.vm_rate: dict[tuple[str, str, str], float] = {}
        self.cos_rate: dict[str, float] = {}
        self.active = 0
        self._t: float | None = None
        self._lock = threading.Lock()

    def sample(self) -> None:
        paths = cgroups.cgroup_paths()
        known = cgroups.known_cgroups()
        with maps.Maps() as m:
            reap(m)
            vms = {v.cgid: v for v in metering.list_vms(m)}
            states = metering.list_vm_states(m)
            flows = metering.list_flows(m)
        vm_bytes: dict[tuple[str, str, str], int] = {}
        cos_bytes: dict[str, int] = {"be": 0, "ds": 0, "mrg": 0}
        for st in states:
            v = vms.get(st.cgid)
            cos = _cos(v.theta_bps, v.omega) if v else "be"
            who = metering.attribute(st.cgid, st.cgid, paths, known, "-")
            key = (who.vm, who.tenant, cos)
            vm_bytes[key] = vm_bytes.get(key, 0) + st.bytes_acked
            cos_bytes[cos] += st.bytes_acked
        for f in flows:
            if f.vmid == 0 and f.omega_q20:
                cos = _cos(f.theta_bps, q20_to_omega(f.omega_q20))
                key = ("outside-vm", metering.HOST_TENANT, cos)
                vm_bytes[key] = vm_bytes.get(key, 0) + f.bytes_acked
                cos_bytes[cos] += f.bytes_acked
        now = time.monotonic()
        with self._lock:
            if self._t is not None and now > self._t:
                dt = now - self._t
                self.vm_rate = {k: max(0, b - self.vm_bytes.get(k, 0)) * 8 / dt for k, b in vm_bytes.items()}
                self.cos_rate = {
                    k: max(0, b - self.cos_bytes.get(k, 0)) * 8 / dt for k, b in cos_bytes.items()
                }
            self.vm_bytes, self.cos_bytes, self._t = vm_bytes, cos_bytes, now
            self.active = sum(1 for f in flows if not f.ended)


class MapCollector(Collector):
    """Exposes the last :class:`Sampler` values."""

    def __init__(self, sampler: Sampler) -> None:
        self.s = sampler

    def collect(self) -> Iterator[Metric]:
        s = self.s
        vb = CounterMetricFamily(
            "paccp_vm_bytes_acked", "bytes acked by a VM's paccp flows", labels=["vm", "tenant", "cos"]
        )
        vr = GaugeMetricFamily(
            "paccp_vm_rate_bps", "VM rate over the last interval (bit/s)", labels=["vm", "tenant", "cos"]
        )
        cb = CounterMetricFamily("paccp_cos_bytes_acked", "bytes acked per class of service", labels=["cos"])
        cr = GaugeMetricFamily("paccp_cos_rate_bps", "rate per class of service (bit/s)", labels=["cos"])
        with s._lock:
            for (vm, tenant, cos), b in sorted(s.vm_bytes.items()):
                vb.add_metric([vm, tenant, cos], b)
                vr.add_metric([vm, tenant, cos], s.vm_rate.get((vm, tenant, cos), 0.0))
            for cos, b in sorted(s.cos_bytes.items()):
                cb.add_metric([cos], b)
                cr.add_metric([cos], s.cos_rate.get(cos, 0.0))
            active = s.active
        yield from (vb, vr, cb, cr)
        g = GaugeMetricFamily("paccp_flows_active", "live paccp flows")
        g.add_metric([], active)
        yield g


def registry(sampler: Sampler) -> CollectorRegistry:
    reg = CollectorRegistry()
    reg.register(MapCollector(sampler))
    return reg


def run(port: int, addr: str = "127.0.0.1", interval: float = 2.0, once: bool = False) -> None:
    """Serve metrics (sampling every ``interval`` s) until interrupted; ``once``: print them and exit."""
    from prometheus_client import generate_latest, start_http_server

    env.require_env()
    sampler = Sampler()
    sampler.sample()
    reg = registry(sampler)
    if once:
        time.sleep(interval)
        sampler.sample()
        print(generate_latest(reg).decode(), end="")
        return
    start_http_server(port, addr=addr, registry=reg)
    print(f"serving paccp metrics on http://{addr}:{port}/metrics (Ctrl-C to stop)")
    try:
        while True:
            time.sleep(interval)
            sampler.sample()
    except KeyboardInterrupt:
        pass
