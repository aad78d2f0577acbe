"""Per-VM usage records and Prometheus series from the host's own counters (nothing from the guest).

Usage records (:mod:`paccp.common.usage`, docs/usage-records.md): one VM-level record per VM and measured
window (``flow_id`` null, the VM's pair, ``cos`` by :func:`paccp.common.cos.classify`, ``guarantee``
strict for an MRG VM else none); ``bytes`` = what the VM's leaf put on the host's port over the window
(frames as htb counts them: the host sees no acknowledgements, so this is wire bytes, about 4.6 % above
TCP payload at 1514-byte frames). Record ids ``tb:<experiment>:<run>:<vm>:<start_ns>``.

Prometheus (:class:`HostCollector`, served by :func:`serve` or written once by :func:`snapshot`):

- ``paccp_host_vm_sent_bytes_total{vm,ifname,cos}``: bytes through the VM's leaf on the port;
- ``paccp_host_vm_offered_bytes_total{vm,ifname,cos}``: bytes the guest sent into its interface;
- ``paccp_host_vm_dropped_packets_total{vm,ifname,cos}``: drops in the VM's leaf (its excess);
- ``paccp_host_vm_rate_bps`` / ``paccp_host_vm_alloc_bps``: the last tick's rate and the agent's
  allocation (the optimum among active VMs);
- ``paccp_host_agent_interval_seconds``: the agent's mean tick.
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from paccp.common.cos import classify
from paccp.common.usage import UsageRecord
from paccp.datapath.core.usage import TENANT, Window
from paccp.datapath.host.enforcer import HostEnforcer, VmUsage


def records(
    experiment: str, run: str, window: Window, bytes_by_vm: dict[str, int], vms: dict[str, VmUsage]
) -> list[UsageRecord]:
    """One VM-level record per VM of one measured window (``bytes_by_vm``: the leaf's bytes in it)."""
    out = []
    for name, nbytes in bytes_by_vm.items():
        u = vms[name]
        out.append(
            UsageRecord(
                record_id=f"tb:{experiment}:{run}:{name}:{window.start_ns}",
                source="datapath",
                tenant=TENANT,
                vm=name,
                cos=classify(u.theta_bps, u.omega),
                theta_bps=u.theta_bps,
                omega=Decimal(str(u.omega)),
                start_ns=window.start_ns,
                end_ns=window.end_ns,
                bytes=max(0, nbytes),
                guarantee="strict" if u.theta_bps > 0 else "none",
            )
        )
    return out


class HostCollector(Collector):
    """The series of one or more enforcers (one per host), read at scrape time."""

    def __init__(self, enforcers: list[HostEnforcer]) -> None:
        self.enforcers = enforcers

    def collect(self) -> Iterator[Metric]:
        labels = ["vm", "ifname", "cos"]
        sent = CounterMetricFamily("paccp_host_vm_sent_bytes", "bytes through the VM's leaf", labels=labels)
        offered = CounterMetricFamily(
            "paccp_host_vm_offered_bytes", "bytes the guest sent into its interface", labels=labels
        )
        drops = CounterMetricFamily(
            "paccp_host_vm_dropped_packets", "packets dropped in the VM's leaf", labels=labels
        )
        rate = GaugeMetricFamily(
            "paccp_host_vm_rate_bps", "VM rate over the last tick (bit/s)", labels=labels
        )
        alloc = GaugeMetricFamily("paccp_host_vm_alloc_bps", "the agent's allocation (bit/s)", labels=labels)
        tick = GaugeMetricFamily("paccp_host_agent_interval_seconds", "mean agent tick", labels=["port"])
        for enf in self.enforcers:
            for u in enf.usage().values():
                key = [u.name, u.ifname, classify(u.theta_bps, u.omega)]
                sent.add_metric(key, u.sent_bytes)
                offered.add_metric(key, u.offered_bytes)
                drops.add_metric(key, u.drops)
                rate.add_metric(key, u.rate_bps)
                alloc.add_metric(key, u.alloc_bps)
            tick.add_metric([enf.port], enf.interval_achieved_s())
        yield from (sent, offered, drops, rate, alloc, tick)


def registry(enforcers: list[HostEnforcer]) -> CollectorRegistry:
    reg = CollectorRegistry()
    reg.register(HostCollector(enforcers))
    return reg


def snapshot(enforcers: list[HostEnforcer], path: Path) -> Path:
    """Write one scrape (Prometheus text format) to ``path``."""
    from prometheus_client import generate_latest

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(generate_latest(registry(enforcers)))
    return path


def serve(enforcers: list[HostEnforcer], port: int, addr: str = "127.0.0.1") -> None:
    """Serve the series on ``http://addr:port/metrics`` from a background thread (while the caller runs)."""
    from prometheus_client import start_http_server

    start_http_server(port, addr=addr, registry=registry(enforcers))
