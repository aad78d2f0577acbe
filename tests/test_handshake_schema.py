"""The scenario schema's TCP handshake keys (``[transport] handshake, syn, connect_timeout, syn_retries``):
off by default (the engine JSON then has no ``transport.handshake``, so other scenarios are unchanged),
their defaults and their engine JSON, validation, and the engine's ``handshake`` table."""

from __future__ import annotations

from typing import Any

import pytest

from paccp.errors import UserError
from paccp.scenario import parse_scenario, to_engine
from paccp.sim.engine import run


def _doc(**transport: Any) -> dict[str, Any]:
    return {
        "run": {"seed": 3, "duration": "5ms", "warmup": "1ms", "sample_flows": "all"},
        "transport": transport,
        "topology": {"kind": "dumbbell", "left_hosts": 2, "right_hosts": 2, "bottleneck_rate": "1Gbit"},
        "flows": [
            {"id": "a", "src": "l0", "dst": "r0", "size": "100KB"},
            {"id": "b", "src": "l1", "dst": "r1", "size": "100KB", "start": "1ms"},
        ],
    }


def test_the_handshake_is_off_by_default() -> None:
    eng = to_engine(parse_scenario(_doc()))
    assert "handshake" not in eng["transport"]
    assert run(eng).handshake is None


def test_handshake_defaults_and_engine_json() -> None:
    eng = to_engine(parse_scenario(_doc(handshake=True, header=52)))
    # Linux: SYN = a timestamped header + 8 option bytes, 1 s, tcp_syn_retries 6
    assert eng["transport"]["handshake"] == {
        "syn_bytes": 60,
        "connect_timeout_ns": 1_000_000_000,
        "syn_retries": 6,
    }
    eng = to_engine(parse_scenario(_doc(handshake=True, syn=58, connect_timeout="3s", syn_retries=5)))
    assert eng["transport"]["handshake"] == {
        "syn_bytes": 58,
        "connect_timeout_ns": 3_000_000_000,
        "syn_retries": 5,
    }


def test_the_engine_reports_the_establishment() -> None:
    res = run(to_engine(parse_scenario(_doc(handshake=True))))
    assert res.handshake is not None
    est = res.handshake.column("established_ns").to_pylist()
    start = res.flows.column("start_ns").to_pylist()
    finish = res.flows.column("finish_ns").to_pylist()
    assert res.handshake.column("syns").to_pylist() == [1, 1]
    for s, e, f in zip(start, est, finish, strict=True):
        assert s < e < f


@pytest.mark.parametrize(
    ("key", "value"),
    [("syn", 0), ("syn", 70_000), ("connect_timeout", 0), ("syn_retries", -1), ("syn_retries", 31)],
)
def test_handshake_keys_are_validated(key: str, value: Any) -> None:
    with pytest.raises(UserError, match=f"transport.{key}"):
        parse_scenario(_doc(handshake=True, **{key: value}))
