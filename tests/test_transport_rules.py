"""One place per rule for ``[transport]``: the engine owns the rules (``check_transport`` in
crates/paccp-sim/src/sim/build.rs) and the scenario front runs them through the engine, naming its own
keys. Every bad case goes through both sides: the TOML front (one-line error naming the [transport]
key) and the engine's JSON (error naming the engine field), on the check alone and on a full run."""

from __future__ import annotations

import copy
import json
import tomllib

import pytest

from paccp.errors import UserError
from paccp.scenario import parse_scenario, to_engine
from paccp.scenario.engine_rules import TOML_NAMES
from paccp.scenario.models import TransportCfg

BASE = """
[run]
duration = "5ms"
warmup = "1ms"

[topology]
kind = "dumbbell"
left_hosts = 1
right_hosts = 1
bottleneck_rate = "1Gbit"

[[flows]]
id = "a"
src = "l0"
dst = "r0"
"""

# ([transport] keys, the key the error names, engine JSON changes, the engine field the error names)
CASES = [
    ({"mtu": 1500, "header": 1500}, "mtu", {"packet.header_bytes": 1500}, "packet.mtu_bytes"),
    ({"mtu": 70_000}, "mtu", {"packet.mtu_bytes": 70_000}, "packet.mtu_bytes"),
    ({"ack": 0}, "ack", {"packet.ack_bytes": 0}, "packet.ack_bytes"),
    ({"ack": 70_000}, "ack", {"packet.ack_bytes": 70_000}, "packet.ack_bytes"),
    ({"init_cwnd": 0}, "init_cwnd", {"transport.init_cwnd_pkts": 0.0}, "transport.init_cwnd_pkts"),
    ({"min_rto": 0}, "min_rto", {"transport.min_rto_ns": 0}, "transport.min_rto_ns"),
    ({"initial_rto": 0}, "initial_rto", {"transport.initial_rto_ns": 0}, "transport.initial_rto_ns"),
    (
        {"min_rto": "1ms", "initial_rto": "500us"},
        "initial_rto",
        {"transport.initial_rto_ns": 500_000},
        "transport.initial_rto_ns",
    ),
    (
        {"initial_rto": "2s", "max_rto": "1s"},
        "initial_rto",
        {"transport.initial_rto_ns": 2_000_000_000},
        "transport.initial_rto_ns",
    ),
    ({"max_rto": "500us"}, "max_rto", {"transport.max_rto_ns": 500_000}, "transport.max_rto_ns"),
    (
        {"host_backpressure": False, "host_fq": 2},
        "host_fq",
        {"transport.host_backpressure": False, "transport.host_fq_pkts": 2},
        "transport.host_fq_pkts",
    ),
    (
        {"delayed_ack": True, "delayed_ack_timeout": 0},
        "delayed_ack_timeout",
        {"transport.delayed_ack": True, "transport.delayed_ack_timeout_ns": 0},
        "transport.delayed_ack_timeout_ns",
    ),
    (
        {"dupack_threshold": 0},
        "dupack_threshold",
        {"transport.dupack_threshold": 0},
        "transport.dupack_threshold",
    ),
    (
        {"ack_delay": "1ms", "min_rto": "1ms"},
        "ack_delay",
        {"transport.ack_delay_mean_ns": 1_000_000},
        "transport.ack_delay_mean_ns",
    ),
]


def _base() -> dict[str, object]:
    return tomllib.loads(BASE)


def _engine_doc(changes: dict[str, object]) -> dict[str, object]:
    doc = copy.deepcopy(to_engine(parse_scenario(_base())))
    for path, value in changes.items():
        section, key = path.split(".")
        doc[section][key] = value  # type: ignore[index]
    return doc


@pytest.mark.parametrize(
    ("toml", "key", "changes", "field"), CASES, ids=[c[1] + str(i) for i, c in enumerate(CASES)]
)
def test_every_bad_case_fails_on_both_sides(
    toml: dict[str, object], key: str, changes: dict[str, object], field: str
) -> None:
    import paccp._engine as _engine

    # the scenario front: one line naming the [transport] key, in the scenario's words
    obj = _base()
    obj["transport"] = toml
    with pytest.raises(UserError) as exc:
        parse_scenario(obj)
    msg = exc.value.message
    assert f"transport: {key} " in msg and "\n" not in msg, msg
    assert "_ns" not in msg and "packet." not in msg and "_pkts" not in msg, msg
    # the engine: the same case in its JSON fails its own check and a full run, naming its field
    doc = _engine_doc(changes)
    sections = {"packet": doc["packet"], "transport": doc["transport"]}
    with pytest.raises(ValueError, match=f"^{field}: "):
        _engine.check_transport_json(json.dumps(sections))
    with pytest.raises(ValueError, match=f"^{field}: "):
        _engine.run_json(json.dumps(doc))


def test_the_good_base_passes_both_sides() -> None:
    import paccp._engine as _engine

    doc = _engine_doc({})
    _engine.check_transport_json(json.dumps({"packet": doc["packet"], "transport": doc["transport"]}))


def test_every_engine_field_the_front_writes_has_its_toml_name() -> None:
    """The name table covers every packet/transport field TransportCfg writes (no engine name leaks)."""
    full = TransportCfg(rack=True, ack_delay="1us", handshake=True).engine_sections()
    written = {f"{sec}.{k}" for sec in ("packet", "transport") for k in full[sec] if k != "handshake"}
    assert written <= set(TOML_NAMES), written - set(TOML_NAMES)
    assert all(name in TransportCfg.model_fields for name in TOML_NAMES.values())
