"""One owner per default: every default the engine's JSON still has equals the scenario schema's.

The scenario schema (``paccp.scenario``) owns the defaults and always sends them to the engine. The
engine keeps a default only where it is the schema's (``cc.min_cwnd_pkts``, a flow's ``theta_bps`` /
``omega`` / ``vm`` / ``changes``, ``transport.prr`` (true), and the optional engine-only
``flows[].class`` and ``queues``, whose absence means "off"). This test leaves those keys out of the
resolved JSON and checks that the engine's output does not change; it also checks that the transport
fields whose engine defaults used to disagree with the schema (``sack``, ``host_backpressure``,
``host_fq_pkts``, and a flow's ``label``, whose schema default depends on its class) are now required.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from paccp.errors import UserError
from paccp.scenario import parse_scenario, to_engine
from paccp.sim.engine import run_json

ENGINE_DEFAULTED_FLOW_KEYS = ("theta_bps", "omega", "vm", "changes")


def _resolved() -> dict[str, Any]:
    sc = parse_scenario(
        {
            "run": {"seed": 3, "duration": "5ms", "warmup": "1ms", "sample_flows": "all"},
            "topology": {"kind": "dumbbell", "left_hosts": 2, "right_hosts": 2, "bottleneck_rate": "1Gbit"},
            "flows": [
                {"id": "a", "src": "l0", "dst": "r0"},
                {"id": "b", "src": "l1", "dst": "r1", "size": "200KB"},
            ],
        }
    )
    return to_engine(sc)


@pytest.mark.parametrize("cc", ["paccp", "reno"])
def test_engine_defaults_equal_the_schema_defaults(cc: str) -> None:
    full = _resolved()
    if cc == "reno":
        full["cc"] = {"kind": "reno", "min_cwnd_pkts": 1.0}
    stripped = copy.deepcopy(full)
    del stripped["cc"]["min_cwnd_pkts"]
    assert full["transport"]["prr"] is True  # the engine's default for an absent `prr` is the same
    del stripped["transport"]["prr"]
    for f in stripped["flows"]:
        for k in ENGINE_DEFAULTED_FLOW_KEYS:
            # Only a value equal to the schema's default may be left out.
            assert k in f
            del f[k]
    assert json.loads(run_json(json.dumps(stripped))) == json.loads(run_json(json.dumps(full)))


@pytest.mark.parametrize("key", ["sack", "host_backpressure", "host_fq_pkts"])
def test_transport_fields_without_a_shared_default_are_required(key: str) -> None:
    doc = _resolved()
    del doc["transport"][key]
    with pytest.raises(UserError, match=f"missing field `{key}`"):
        run_json(json.dumps(doc))


def test_a_flow_label_is_required() -> None:
    doc = _resolved()
    del doc["flows"][0]["label"]
    with pytest.raises(UserError, match="missing field `label`"):
        run_json(json.dumps(doc))
