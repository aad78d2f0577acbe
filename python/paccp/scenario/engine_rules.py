"""The engine's rules for the ``[transport]`` table, run by the engine itself (``paccp_sim``'s
``check_transport``: the one place they live) with its errors named in the scenario's own words.

The engine names its JSON fields (``transport.initial_rto_ns``); :data:`TOML_NAMES` maps each to the
``[transport]`` key it comes from, so an error reads ``initial_rto must be between min_rto and max_rto``.
"""

from __future__ import annotations

import json
import re
from typing import Any

#: engine JSON field -> the [transport] key it is written from (TransportCfg.engine_sections)
TOML_NAMES = {
    "packet.mtu_bytes": "mtu",
    "packet.header_bytes": "header",
    "packet.ack_bytes": "ack",
    "transport.init_cwnd_pkts": "init_cwnd",
    "transport.min_rto_ns": "min_rto",
    "transport.initial_rto_ns": "initial_rto",
    "transport.max_rto_ns": "max_rto",
    "transport.delayed_ack": "delayed_ack",
    "transport.delayed_ack_timeout_ns": "delayed_ack_timeout",
    "transport.dupack_threshold": "dupack_threshold",
    "transport.sack": "sack",
    "transport.host_backpressure": "host_backpressure",
    "transport.host_fq_pkts": "host_fq",
    "transport.prr": "prr",
    "transport.rack": "rack",
    "transport.ack_delay_mean_ns": "ack_delay",
}
_FIELD = re.compile(r"\b(?:packet|transport)\.[a-z_]+\b")


def in_toml_words(engine_message: str) -> str:
    """An engine error (``field: message``) with every engine field name replaced by its [transport] key."""
    field, sep, msg = engine_message.partition(": ")
    if not sep:
        return engine_message
    name = TOML_NAMES.get(field, field)
    return f"{name} {_FIELD.sub(lambda m: TOML_NAMES.get(m.group(0), m.group(0)), msg)}"


def check_transport(sections: dict[str, Any]) -> None:
    """Run the engine's checks on the ``packet`` and ``transport`` sections; ValueError in TOML words."""
    import paccp._engine as _engine

    try:
        _engine.check_transport_json(json.dumps(sections))
    except ValueError as exc:
        raise ValueError(in_toml_words(str(exc))) from None
