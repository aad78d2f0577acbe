"""The kernel's side of the cross-check: Reno flows through an HTB + bfifo bottleneck in namespaces.

Topology (as ``paccp testbed dumbbell``): sender namespaces ``s<i>`` -> router ``L`` -(HTB at the rate +
bfifo of ``limit`` bytes on L's egress)-> router ``R`` -> receivers ``d<i>``; veth links with GSO off
(``gso_max_segs 1``), one iperf3 flow per pair with ``-C reno``. Namespaces are named ``fx<hex>-<node>``
and removed on exit. Counters read at the end of the warm-up and at the end: iperf3's per-flow bytes and
retransmits, the bfifo's drops, and each sender's ``nstat`` TCP counters (delayed/quick ACKs, SACK
recoveries, lost retransmits, RTOs) for the diagnosis in the README.

The engine's twin (:func:`engine_twin`) uses the same rate, the bfifo limit + one 1514-byte packet (the
engine counts the packet being serialised, HTB has already released it), 1514/66-byte wire packets
(14 bytes of Ethernet in HTB and bfifo), SACK, delayed ACK, host backpressure (TSQ), 200 ms minimum RTO.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import time
from pathlib import Path
from typing import Any

from paccp import engine
from paccp.datapath.netdiag import NSTAT_KEYS, SsSampler, nstat, qdisc_drops
from paccp.datapath.testbed import Net, build_dumbbell, queue_bytes
from paccp.errors import EnvironmentUnsupported

ETH = 14


def run_kernel_dumbbell(
    n_flows: int, rate_bps: int, duration_s: int, omit_s: int, out: Path, tcpdump: bool = False
) -> dict[str, Any]:
    """n Reno flows for omit + duration seconds; counters over the last ``duration_s``."""
    out.mkdir(parents=True, exist_ok=True)
    net = Net(run_id="fx" + secrets.token_hex(3))
    dumps: list[subprocess.Popen[str]] = []
    try:
        l_if = build_dumbbell(net, rate_bps, n_flows)
        for i in range(n_flows):
            net.spawn(f"d{i}", ["iperf3", "-s", "-1", "-p", str(5201 + i)])
        if tcpdump:
            for node, ifn in (("s0", "e0"), ("d0", "e0")):
                dumps.append(net.spawn(node, ["tcpdump", "-i", ifn, "-s", "100", "-w",
                                              str(out / f"{node}.pcap")]))  # fmt: skip
        time.sleep(0.5)
        clients = [
            net.spawn(
                f"s{i}",
                [
                    "iperf3",
                    "-c",
                    f"10.202.{i}.2",
                    "-p",
                    str(5201 + i),
                    "-C",
                    "reno",
                    "-t",
                    str(duration_s + omit_s),
                    "-J",
                    "-i",
                    "1",
                ],
                out=out / f"iperf-{i}.json",
            )
            for i in range(n_flows)
        ]
        time.sleep(omit_s)
        d0, ns0 = qdisc_drops(net, "L", l_if), [nstat(net, f"s{i}") for i in range(n_flows)]
        sampler = SsSampler(net, [f"s{i}" for i in range(n_flows)], {5201 + i for i in range(n_flows)})
        sampler.start()
        time.sleep(duration_s)
        ss = sampler.stop()
        for c in clients:
            c.wait(timeout=30)
        d1, ns1 = qdisc_drops(net, "L", l_if), [nstat(net, f"s{i}") for i in range(n_flows)]
    finally:
        net.cleanup()
    flows = []
    for i in range(n_flows):
        doc = json.loads((out / f"iperf-{i}.json").read_text())
        iv = doc["intervals"][omit_s : omit_s + duration_s]
        if not iv:
            raise EnvironmentUnsupported(f"iperf3 flow {i} reported no intervals")
        bits = sum(x["sum"]["bytes"] for x in iv) * 8
        span = sum(x["sum"]["seconds"] for x in iv)
        flows.append(
            {
                "goodput_mbps": bits / span / 1e6,
                "retransmits": sum(x["sum"].get("retransmits", 0) for x in iv),
                "nstat": {k: ns1[i].get(k, 0) - ns0[i].get(k, 0) for k in NSTAT_KEYS},
            }
        )
    return {"flows": flows, "drops": d1[0] - d0[0], "bottleneck_pkts": d1[1] - d0[1],
            "queue_bytes": queue_bytes(rate_bps), "ss_medians": ss}  # fmt: skip


def engine_twin(n_flows: int, rate_bps: int, duration_ns: int, transport: dict[str, Any]) -> dict[str, Any]:
    """The same dumbbell as engine JSON (see the module docstring for the matching)."""
    nodes = [{"name": f"s{i}", "kind": "host"} for i in range(n_flows)]
    nodes += [{"name": f"d{i}", "kind": "host"} for i in range(n_flows)]
    nodes += [{"name": "L", "kind": "switch"}, {"name": "R", "kind": "switch"}]
    fast = {"rate_bps": 10_000_000_000, "delay_ns": 8_000, "buffer": {"packets": 1000}}
    links = [{"a": f"s{i}", "b": "L", **fast} for i in range(n_flows)]
    links += [{"a": f"d{i}", "b": "R", **fast} for i in range(n_flows)]
    links.append({"a": "L", "b": "R", "rate_bps": rate_bps, "delay_ns": 8_000,
                  "buffer": {"bytes": queue_bytes(rate_bps) + 1514}})  # fmt: skip
    tr = {
        "init_cwnd_pkts": 10.0, "min_rto_ns": 200_000_000, "initial_rto_ns": 1_000_000_000,
        "max_rto_ns": 60_000_000_000, "delayed_ack": True, "delayed_ack_timeout_ns": 40_000_000,
        "dupack_threshold": 3, "sack": True, "host_backpressure": True, "host_fq_pkts": 0, **transport,
    }  # fmt: skip
    return {
        "seed": 1,
        "duration_ns": duration_ns,
        "packet": {"mtu_bytes": 1448 + 52 + ETH, "header_bytes": 52 + ETH, "ack_bytes": 52 + ETH},
        "transport": tr,
        "cc": {"kind": "reno", "min_cwnd_pkts": 2.0},
        "topology": {"kind": "explicit", "nodes": nodes, "links": links, "nic_buffer": {"packets": 1000}},
        "routing": {"kind": "ecmp"},
        "vms": [],
        "flows": [
            {
                "id": f"f{i}",
                "src": f"s{i}",
                "dst": f"d{i}",
                "size_bytes": None,
                "start_ns": i * 1_000_000,
                "theta_bps": 0,
                "omega": 1.0,
                "vm": None,
                "label": "BE",
                "changes": [],
            }
            for i in range(n_flows)
        ],
        "arrivals": [],
        "sampling": {"interval_ns": 100_000_000, "flows": "long_lived", "cwnd": False},
    }


def run_engine_dumbbell(
    n_flows: int, rate_bps: int, duration_s: int, omit_s: int, transport: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The engine twin; counters over [omit, omit + duration] (drops by difference of two runs)."""
    tr = transport or {}
    full = engine.run(engine_twin(n_flows, rate_bps, (omit_s + duration_s) * 10**9, tr))
    head = engine.run(engine_twin(n_flows, rate_bps, omit_s * 10**9, tr))

    def drops(r: engine.EngineResult) -> int:
        return sum(c["drops"] for c in r.channels.to_pylist() if c["name"] == "L->R")

    def rtx(r: engine.EngineResult) -> list[int]:
        return [int(x) for x in r.flows.column("retransmits").to_pylist()]

    acked = full.samples.acked_bytes
    k0 = omit_s * 10
    flows = [
        {"goodput_mbps": float(sum(acked[i][k0:])) * 8 / duration_s / 1e6, "retransmits": a - b}
        for i, (a, b) in enumerate(zip(rtx(full), rtx(head), strict=True))
    ]
    return {"flows": flows, "drops": drops(full) - drops(head)}
