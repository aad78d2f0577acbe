"""The Python binding of the engine: a tiny dumbbell through paccp.sim.engine.run."""

from __future__ import annotations

import copy
import itertools
import json
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from paccp.errors import UserError
from paccp.sim.engine import run, run_json


def _scenario() -> dict[str, Any]:
    link = {"rate_bps": 1_000_000_000, "delay_ns": 10_000, "buffer": {"packets": 50}}
    flow = {
        "src": "l0",
        "dst": "r0",
        "start_ns": 0,
        "theta_bps": 0,
        "omega": 1.0,
        "vm": None,
        "label": "BE",
        "changes": [],
    }
    return {
        "seed": 7,
        "duration_ns": 20_000_000,
        "packet": {"mtu_bytes": 1500, "header_bytes": 40, "ack_bytes": 40},
        "transport": {
            "init_cwnd_pkts": 10.0,
            "min_rto_ns": 1_000_000,
            "initial_rto_ns": 3_000_000,
            "max_rto_ns": 1_000_000_000,
            "delayed_ack": False,
            "delayed_ack_timeout_ns": 40_000,
            "dupack_threshold": 3,
            "sack": False,
            "host_backpressure": False,
            "host_fq_pkts": 0,
        },
        "cc": {"kind": "paccp", "rcos": 3.0, "min_cwnd_pkts": 1.0},
        "topology": {
            "kind": "dumbbell",
            "left_hosts": 2,
            "right_hosts": 2,
            "access_link": {**link, "rate_bps": 10_000_000_000},
            "bottleneck_link": link,
            "nic_buffer": {"packets": 100},
        },
        "routing": {"kind": "ecmp"},
        "vms": [],
        "flows": [
            {**flow, "id": "long", "size_bytes": None},
            {**flow, "id": "short", "src": "l1", "dst": "r1", "size_bytes": 100_000},
        ],
        "arrivals": [],
        "sampling": {"interval_ns": 1_000_000, "flows": "all", "cwnd": True},
    }


def test_run_returns_tables_samples_and_stats() -> None:
    calls: list[tuple[int, int]] = []
    res = run(_scenario(), progress=lambda done, total: calls.append((done, total)))
    assert isinstance(res.flows, pa.Table) and isinstance(res.channels, pa.Table)
    assert res.flows.column("id").to_pylist() == ["long", "short"]
    acked = res.flows.column("bytes_acked").to_pylist()
    assert acked[1] == 100_000  # the finite flow completed with its exact size
    assert res.flows.column("finish_ns").to_pylist()[0] is None
    assert res.flows.column("finish_ns").to_pylist()[1] > 0
    # 20 ms at 1 Gb/s is 2.5 MB: the long flow moved a large share of it
    assert acked[0] > 1_500_000
    assert res.flows.column("route").to_pylist()[0] == ["l0->left", "left->right", "right->r0"]
    names = res.channels.column("name").to_pylist()
    assert "left->right" in names and len(names) == 2 * 5
    s = res.samples
    assert s.interval_ns == 1_000_000 and s.flow_ids == ["long", "short"]
    assert s.acked_bytes.dtype == np.int64 and s.acked_bytes.shape == (2, 20)
    assert int(s.acked_bytes[0].sum()) <= acked[0]
    assert s.cwnd_pkts is not None and s.cwnd_pkts.shape == (2, 20)
    assert res.stats["events"] > 0 and res.stats["packets_sent"] > 0
    assert 50 <= len(calls) <= 110
    # The first and last reports bracket the event loop (`paccp bench` times the loop between them).
    assert calls[0] == (0, 20_000_000)
    assert calls[-1] == (20_000_000, 20_000_000)
    assert all(a[0] <= b[0] for a, b in itertools.pairwise(calls))


def test_same_input_same_output() -> None:
    doc = json.dumps(_scenario())
    assert run_json(doc) == run_json(doc)


def test_bad_input_is_a_user_error_naming_the_field() -> None:
    sc = _scenario()
    sc["flows"][0]["omega"] = 0.0
    with pytest.raises(UserError, match=r"engine: flows\[0\]\.omega"):
        run(sc)
    bad = copy.deepcopy(_scenario())
    bad["flows"][0]["dst"] = "nowhere"
    with pytest.raises(UserError, match="unknown node 'nowhere'"):
        run(bad)
    with pytest.raises(UserError, match="engine: scenario JSON"):
        run_json("{not json")
    extra = _scenario()
    extra["bogus"] = 1
    with pytest.raises(UserError, match="bogus"):
        run(extra)


def test_progress_exception_propagates() -> None:
    def boom(done: int, total: int) -> None:
        raise RuntimeError("stop here")

    with pytest.raises(RuntimeError, match="stop here"):
        run(_scenario(), progress=boom)
