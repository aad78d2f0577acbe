"""The engine's side of the cross-check: a neutral scenario as engine JSON (docs/engine-contract.md)."""

from __future__ import annotations

from typing import Any

from paccp.crosscheck.scenarios import MSS, Scenario
from paccp.sim import engine

NS3_HANDSHAKE: dict[str, int] = {
    # ns-3 3.44's SYN and SYN-ACK: 20 IP + 20 TCP + 16 option bytes (timestamps 10, window scale 3, with
    # SACK SACK-permitted 2, padded to a word) + 2 PPP
    "syn_bytes": 58,
    # ns3::TcpSocket::ConnTimeout (3 s, the runner keeps the default) and ConnCount 6 (SYNs in all)
    "connect_timeout_ns": 3_000_000_000,
    "syn_retries": 5,
}
"""The engine's ``transport.handshake`` matched to ns-3's (scenarios with ``ns3_handshake_lead_ns`` 0)."""


def tcp_flow(fid: str, src: str, dst: str, start_ns: int, size_bytes: int | None = None) -> dict[str, Any]:
    """One plain TCP flow of the engine JSON (no purchase: theta 0, omega 1, class BE); ``size_bytes``
    None = long-lived."""
    return {
        "id": fid,
        "src": src,
        "dst": dst,
        "size_bytes": size_bytes,
        "start_ns": start_ns,
        "theta_bps": 0,
        "omega": 1.0,
        "vm": None,
        "label": "BE",
        "changes": [],
    }


def engine_json(sc: Scenario, prr: bool | None = None) -> dict[str, Any]:
    """The engine input matched to ns-3's wire sizes (1502-byte packets, 54-byte ACKs; see scenarios)."""
    tr: dict[str, Any] = {
        "init_cwnd_pkts": 10.0,
        "min_rto_ns": sc.min_rto_ns,
        "initial_rto_ns": 1_000_000_000,
        "max_rto_ns": 60_000_000_000,
        "delayed_ack": sc.delayed_ack,
        "delayed_ack_timeout_ns": 40_000_000,
        "dupack_threshold": 3,
        "sack": sc.sack,
        "host_backpressure": False,
        "host_fq_pkts": 0,
    }
    if prr is not None:
        tr["prr"] = prr
    if sc.engine_rack:
        tr["rack"] = True
    if sc.ns3_handshake_lead_ns == 0:
        # ns-3 connects at the start and sends its data at the establishment: so does the engine
        tr["handshake"] = NS3_HANDSHAKE
    return {
        "seed": 1,
        "duration_ns": sc.duration_ns,
        "packet": {"mtu_bytes": MSS + 54, "header_bytes": 54, "ack_bytes": 54},
        "transport": tr,
        "cc": {"kind": "reno", "min_cwnd_pkts": 1.0},
        "topology": {
            "kind": "explicit",
            "nodes": [{"name": h, "kind": "host"} for h in sc.hosts]
            + [{"name": s, "kind": "switch"} for s in sc.switches],
            "links": [
                {
                    "a": ln.a,
                    "b": ln.b,
                    "rate_bps": ln.rate_bps,
                    "delay_ns": ln.delay_ns,
                    "buffer": {"packets": ln.buffer_pkts},
                }
                for ln in sc.links
            ],
            "nic_buffer": {"packets": sc.nic_pkts},
        },
        "routing": {"kind": "ecmp"},
        "vms": [],
        "flows": [tcp_flow(f.id, f.src, f.dst, f.start_ns, f.size_bytes) for f in sc.flows],
        "arrivals": [],
        "sampling": {"interval_ns": 1_000_000, "flows": "long_lived", "cwnd": False},
    }


Paths = dict[str, dict[str, list[str]]]
"""Per flow id: the nodes its data (``data``) and its ACKs (``ack``) pass, as the engine routed them."""


def _node_path(route: list[str]) -> list[str]:
    hops = [c.split("->") for c in route]
    return [hops[0][0]] + [b for _a, b in hops]


def ack_paths(sc: Scenario, prr: bool | None = None) -> dict[str, list[str]]:
    """The engine's ACK route per flow, from dst to src.

    The engine routes a flow's ACKs with the flow's ECMP hash mixed with each node it leaves, so on a
    leaf-spine they mostly take another spine than the data (not the reverse path). The flow's hash is
    the seeded stream's draw in the flow's position, so the same flows reversed (src <-> dst, same
    order) get as their data routes exactly these ACK routes; a 1 ns run only builds them.
    """
    spec = engine_json(sc, prr)
    spec["duration_ns"] = 1
    for f in spec["flows"]:
        f["src"], f["dst"] = f["dst"], f["src"]
    return {r["id"]: _node_path(r["route"]) for r in engine.run(spec).flows.to_pylist()}


def run_engine(sc: Scenario, prr: bool | None = None) -> tuple[dict[str, Any], Paths]:
    """Run on the engine; returns (neutral result, data and ACK paths per flow) like :mod:`.ns3_run`'s
    output."""
    res = engine.run(engine_json(sc, prr))
    acks = ack_paths(sc, prr)
    # FCT from the establishment, as ns-3's (data start) when the engine does the handshake
    est = res.handshake.column("established_ns").to_pylist() if res.handshake is not None else None
    syns = res.handshake.column("syns").to_pylist() if res.handshake is not None else None
    acked = res.samples.acked_bytes
    iv = res.samples.interval_ns
    first, last = -(-sc.warmup_ns // iv), sc.duration_ns // iv
    sampled = {fid: i for i, fid in enumerate(res.samples.flow_ids)}
    flows: list[dict[str, Any]] = []
    paths: Paths = {}
    for k, r in enumerate(res.flows.to_pylist()):
        paths[r["id"]] = {"data": _node_path(r["route"]), "ack": acks[r["id"]]}
        win = int(sum(acked[sampled[r["id"]]][first:last])) if r["id"] in sampled else None
        t0 = est[k] if est is not None else r["start_ns"]
        flows.append(
            {
                "id": r["id"],
                "size_bytes": r["size_bytes"],
                "start_ns": r["start_ns"],
                "conn_delay_ns": t0 - r["start_ns"] if t0 is not None else None,
                "syns": syns[k] if syns is not None else None,
                "fct_ns": r["finish_ns"] - t0 if r["finish_ns"] is not None and t0 is not None else None,
                "retransmits": r["retransmits"],
                "timeouts": r["timeouts"],
                "spurious": r["spurious_retransmits"],
                "acked_window_bytes": win,
            }
        )
    # drops by kind as ns-3's records have them ("ack": packets without payload, SYN / SYN-ACK included)
    channels = {
        c["name"]: {
            "drops": c["drops"],
            "tx_bytes": c["tx_bytes"],
            "drops_by_kind": {"data": c["drops"] - c["drops_ack"], "ack": c["drops_ack"]},
        }
        for c in res.channels.to_pylist()
    }
    return {"flows": flows, "channels": channels}, paths


def ns3_spec(sc: Scenario, paths: Paths) -> dict[str, Any]:
    """The ns-3 runner's input: the same topology and flows, with the engine's routes (data and ACKs)."""
    hosts = set(sc.hosts)

    def q(ln: Any, frm: str) -> int:
        return sc.nic_pkts if frm in hosts else int(ln.buffer_pkts)

    spec: dict[str, Any] = {
        "nodes": sc.hosts + sc.switches,
        "hosts": sc.hosts,
        "links": [
            {
                "a": ln.a,
                "b": ln.b,
                "rate_bps": ln.rate_bps,
                "delay_ns": ln.delay_ns,
                "queue_ab_pkts": q(ln, ln.a),
                "queue_ba_pkts": q(ln, ln.b),
            }
            for ln in sc.links
        ],
        "flows": [
            {
                "id": f.id,
                "src": f.src,
                "dst": f.dst,
                "size_bytes": f.size_bytes,
                "start_ns": f.start_ns,
                "path": paths[f.id]["data"],
                "ack_path": paths[f.id]["ack"],
            }
            for f in sc.flows
        ],
        "tcp": {
            "sack": sc.sack,
            "mss": MSS,
            "min_rto_ns": sc.min_rto_ns,
            "init_cwnd": 10,
            "delayed_ack": sc.delayed_ack,
        },
        "duration_ns": sc.duration_ns,
        "warmup_ns": sc.warmup_ns,
        "handshake_lead_ns": sc.ns3_handshake_lead_ns,
    }
    if sc.ns3_recovery is not None:
        spec["tcp"]["ns3_recovery"] = sc.ns3_recovery
    return spec
