"""``[transport] rack`` (Linux's RACK loss marking in a SACK recovery): off by default, so the engine JSON of
other scenarios is unchanged; the cross-check's ``--rack`` sets it on the engine side; and on the
cross-check's ``finite`` SACK scenario it repairs losses that otherwise wait for the retransmission timer."""

from __future__ import annotations

import dataclasses
from typing import Any

from paccp.crosscheck import scenarios
from paccp.crosscheck.engine_side import engine_json, run_engine
from paccp.scenario import parse_scenario, to_engine


def _doc(**transport: Any) -> dict[str, Any]:
    return {
        "run": {"seed": 3, "duration": "5ms", "warmup": "1ms"},
        "transport": transport,
        "topology": {"kind": "dumbbell", "left_hosts": 2, "right_hosts": 2, "bottleneck_rate": "1Gbit"},
        "flows": [{"id": "a", "src": "l0", "dst": "r0", "size": "100KB"}],
    }


def test_rack_is_off_by_default_and_sent_only_when_on() -> None:
    assert "rack" not in to_engine(parse_scenario(_doc()))["transport"]
    assert "rack" not in to_engine(parse_scenario(_doc(rack=False)))["transport"]
    assert to_engine(parse_scenario(_doc(rack=True)))["transport"]["rack"] is True


def test_crosscheck_engine_side_sets_rack_only_when_asked() -> None:
    sc = scenarios.finite(True)
    assert "rack" not in engine_json(sc)["transport"]
    assert engine_json(dataclasses.replace(sc, engine_rack=True))["transport"]["rack"] is True


def test_rack_repairs_sack_losses_that_otherwise_wait_for_the_timer() -> None:
    # The cross-check's finite SACK scenario, seed 1 (160 flows): with RFC 6675's IsLost alone, flows
    # whose last segments were lost time out (13 timeouts when measured); RACK marks those segments lost
    # at the ACK of a later-sent retransmission (6).
    sc = scenarios.finite(True)
    timeouts = {}
    for rack in (False, True):
        res, _ = run_engine(dataclasses.replace(sc, engine_rack=rack))
        timeouts[rack] = sum(f["timeouts"] for f in res["flows"])
    assert timeouts[True] < timeouts[False], timeouts
