"""The ns-3 side's matching rules that need no ns-3: the handshake lead (timeline), the spec, the metrics."""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from paccp.crosscheck import scenarios
from paccp.crosscheck.engine_side import ns3_spec
from paccp.crosscheck.ns3_run import timeline
from paccp.crosscheck.run import metrics


def _spec(sc: scenarios.Scenario) -> dict:
    paths = {f.id: {"data": [f.src, f.dst], "ack": [f.dst, f.src]} for f in sc.flows}  # not for the timeline
    return ns3_spec(sc, paths)


def test_handshake_lead_shifts_data_and_snapshots_not_connects() -> None:
    sc = scenarios.two_way(True)
    spec = _spec(sc)
    lead = scenarios.HANDSHAKE_LEAD_NS
    assert spec["handshake_lead_ns"] == lead
    tl = timeline(spec)
    starts = [f.start_ns / 1e9 for f in sc.flows]
    assert tl["connect_s"] == pytest.approx(starts)
    assert tl["data_s"] == pytest.approx([s + lead / 1e9 for s in starts])
    # the data start relative to each other and to the window exactly as on the engine's clock
    assert tl["warm_s"] - tl["data_s"][0] == pytest.approx((sc.warmup_ns - sc.flows[0].start_ns) / 1e9)
    assert tl["end_s"] - tl["warm_s"] == pytest.approx((sc.duration_ns - sc.warmup_ns) / 1e9)


def test_without_a_lead_ns3_connects_and_sends_at_the_start() -> None:
    spec = _spec(scenarios.pair(False))
    assert spec["handshake_lead_ns"] == 0
    tl = timeline(spec)
    assert tl["data_s"] == tl["connect_s"] == [0.0, 0.002]
    assert tl["end_s"] == pytest.approx(0.6)
    spec["handshake_lead_ns"] = -1
    with pytest.raises(ValueError, match="handshake_lead_ns"):
        timeline(spec)


def _base_rtt_ns(sc: scenarios.Scenario, src: str, dst: str) -> int:
    """Round trip of a SYN and its SYN-ACK (80 bytes on the wire) over the fewest hops, queues empty."""
    adj: dict[str, list[tuple[str, int]]] = {}
    for ln in sc.links:
        hop = ln.delay_ns + 80 * 8 * 1_000_000_000 // ln.rate_bps
        adj.setdefault(ln.a, []).append((ln.b, hop))
        adj.setdefault(ln.b, []).append((ln.a, hop))
    best, frontier = {src: 0}, [src]
    while frontier:  # breadth first: every path here is a fewest-hop path
        nxt = []
        for u in frontier:
            for v, d in adj[u]:
                if v not in best:
                    best[v] = best[u] + d
                    nxt.append(v)
        frontier = nxt
    return 2 * best[dst]


@pytest.mark.parametrize("make", [scenarios.leafspine, scenarios.two_way])
def test_the_lead_covers_a_handshake_on_the_idle_network(make: object) -> None:
    sc = make(False)  # type: ignore[operator]
    worst = max(_base_rtt_ns(sc, f.src, f.dst) for f in sc.flows)
    assert 10_000 < worst < 50_000  # 16.4 us measured in ns-3's leafspine (conn_delay_ns), ~26 us two-way
    assert sc.ns3_handshake_lead_ns >= 20 * worst
    # and it is short against the warm-up, so the data start well before the measured window
    assert sc.ns3_handshake_lead_ns <= sc.warmup_ns // 10


def test_metrics_count_flows_without_goodput() -> None:
    sc = scenarios.two_way(True)
    flows = [
        {"id": f.id, "size_bytes": None, "fct_ns": None, "retransmits": 0, "timeouts": 0,
         "acked_window_bytes": 0 if i < 2 else 1_000_000}
        for i, f in enumerate(sc.flows)
    ]  # fmt: skip
    m = metrics(sc, {"flows": flows, "channels": {}})
    assert m["flows_without_goodput"] == 2
    assert m["goodput_min_mbps"] == 0.0
    assert m["goodput_mean_mbps"] == pytest.approx(4 * 8 / 0.4 / 6)


def test_overrides_reach_both_sides_and_are_checked() -> None:
    from paccp.crosscheck.engine_side import engine_json
    from paccp.crosscheck.run import ns3_checks
    from paccp.errors import UserError

    sc = dataclasses.replace(scenarios.two_way(True), min_rto_ns=10 * scenarios.MS)
    assert engine_json(sc)["transport"]["min_rto_ns"] == 10 * scenarios.MS
    assert _spec(sc)["tcp"]["min_rto_ns"] == 10 * scenarios.MS
    assert engine_json(scenarios.two_way(True))["transport"]["min_rto_ns"] == 200 * scenarios.MS
    with pytest.raises(UserError, match="warm-up"):
        ns3_checks(["twoway"], None, print, sacks=(True,), overrides={"warmup_ns": 600 * scenarios.MS})


def test_ns3_gets_the_engines_ack_routes() -> None:
    import copy

    from paccp.crosscheck.engine_side import ack_paths, engine_json, run_engine
    from paccp.sim import engine

    sc = dataclasses.replace(scenarios.leafspine(False), duration_ns=2 * scenarios.MS, warmup_ns=0)
    _res, paths = run_engine(sc)
    assert paths == {f: {"data": p["data"], "ack": ack_paths(sc)[f]} for f, p in paths.items()}
    for f in sc.flows:
        assert paths[f.id]["ack"][0] == f.dst and paths[f.id]["ack"][-1] == f.src
    # ECMP hashes an ACK's hops on their own: on this leaf-spine most ACKs take another spine
    reverse = sum(p["ack"] == p["data"][::-1] for p in paths.values())
    assert 0 < reverse < len(paths) // 2
    assert ns3_spec(sc, paths)["flows"][3]["ack_path"] == paths["f3"]["ack"]
    # what the engine really sends: with only flow k active, the channels carrying anything are
    # exactly its data route and its ACK route
    for k in (0, 37):
        spec = copy.deepcopy(engine_json(sc))
        for i, fl in enumerate(spec["flows"]):
            if i != k:
                fl["start_ns"] = 10 * spec["duration_ns"]  # never starts; keeps flow k's ECMP draw
        used = {c["name"] for c in engine.run(spec).channels.to_pylist() if c["tx_bytes"] > 0}
        p = paths[f"f{k}"]
        want = {f"{a}->{b}" for route in (p["data"], p["ack"]) for a, b in itertools.pairwise(route)}
        assert used == want


def test_ns3_recovery_is_passed_only_when_chosen() -> None:
    from paccp.crosscheck.ns3_run import NS3_RECOVERIES

    sc = scenarios.leafspine(False)
    assert "ns3_recovery" not in _spec(sc)["tcp"]  # the runner's default: FxPrr without SACK
    classic = dataclasses.replace(sc, ns3_recovery="classic")
    assert _spec(classic)["tcp"]["ns3_recovery"] == "classic"
    assert NS3_RECOVERIES["classic"] == "ns3::TcpClassicRecovery"
    assert NS3_RECOVERIES["prr-fixed"] == "fxcc::FxPrr"
