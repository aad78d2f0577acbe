"""The cross-check's drops by kind: the engine's split of each channel's drops into data and ACKs, and
the data / ACK totals both sides report (ns-3's records also have SYN / SYN-ACK drops, counted in
neither)."""

from __future__ import annotations

import dataclasses

from paccp.crosscheck import scenarios
from paccp.crosscheck.engine_side import run_engine
from paccp.crosscheck.run import metrics


def test_metrics_total_the_data_and_ack_drops() -> None:
    sc = scenarios.two_way(True)
    kinds = ({"syn": 1, "synack": 0, "data": 4, "ack": 2}, {"syn": 0, "synack": 0, "data": 0, "ack": 3})
    ns3 = {
        name: {"drops": sum(k.values()), "tx_bytes": 0, "drops_by_kind": k}
        for name, k in zip(("a->b", "b->a"), kinds, strict=True)
    }
    m = metrics(sc, {"flows": [], "channels": ns3})
    assert (m["drops"], m["drops_data"], m["drops_ack"]) == (10, 4, 5)
    # results without the split (older ns-3 cache files) have no data / ACK rows
    m = metrics(sc, {"flows": [], "channels": {"a->b": {"drops": 7, "tx_bytes": 0}}})
    assert "drops_data" not in m and "drops_ack" not in m


def test_the_engine_splits_every_channels_drops_into_data_and_acks() -> None:
    # two-way, 20 ms: both directions carry data and ACKs, and slow start overflows the bottlenecks
    sc = dataclasses.replace(scenarios.two_way(False), duration_ns=20 * scenarios.MS, warmup_ns=0)
    res, _paths = run_engine(sc)
    chans = res["channels"].values()
    assert all(c["drops_by_kind"]["data"] + c["drops_by_kind"]["ack"] == c["drops"] for c in chans)
    m = metrics(sc, res)
    assert m["drops_data"] > 0 and m["drops_ack"] > 0 and m["drops_data"] + m["drops_ack"] == m["drops"]
