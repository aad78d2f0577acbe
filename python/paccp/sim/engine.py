"""Typed Python front of the Rust simulation engine (``paccp._engine``).

The engine takes one fully resolved scenario (a dict following docs/engine-contract.md) and returns its
records. This module converts them to native Python structures:

>>> from paccp.sim.engine import run
>>> res = run(scenario_dict)                      # doctest: +SKIP
>>> res.flows.column("bytes_acked").to_pylist()   # doctest: +SKIP

Engine errors (an inconsistent scenario) are raised as :class:`paccp.errors.UserError` with the prefix
``engine:``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from paccp.errors import UserError

ProgressFn = Callable[[int, int], None]

_FLOW_TYPES: dict[str, pa.DataType] = {
    "id": pa.string(),
    "label": pa.string(),
    "src": pa.string(),
    "dst": pa.string(),
    "vm": pa.string(),
    "size_bytes": pa.int64(),
    "start_ns": pa.int64(),
    "finish_ns": pa.int64(),
    "bytes_acked": pa.int64(),
    "theta_bps": pa.int64(),
    "omega": pa.float64(),
    "retransmits": pa.int64(),
    "timeouts": pa.int64(),
    "spurious_retransmits": pa.int64(),
    "route": pa.list_(pa.string()),
    "change_acked_bytes": pa.list_(pa.int64()),
}

_CHANNEL_TYPES: dict[str, pa.DataType] = {
    "name": pa.string(),
    "from": pa.string(),
    "to": pa.string(),
    "rate_bps": pa.int64(),
    "tx_bytes": pa.int64(),
    "drops": pa.int64(),
    "drops_ack": pa.int64(),  # of ``drops``, those without payload (ACKs, SYN / SYN-ACK; data: the rest)
    "max_queue_bytes": pa.int64(),
}

# Multipath connections (only when the scenario has ``connections``): one row per connection.
_CONNECTION_TYPES: dict[str, pa.DataType] = {
    "id": pa.string(),
    "subflows": pa.list_(pa.string()),
    "size_bytes": pa.int64(),
    "finish_ns": pa.int64(),
    "bytes_delivered": pa.int64(),
    "window_blocked": pa.int64(),
    "penalisations": pa.int64(),
    "reinjections": pa.int64(),
    "rto_queued": pa.int64(),
    "rto_reinjections": pa.int64(),
    "max_ooo_bytes": pa.int64(),
    "max_rwnd_bytes": pa.int64(),
}

# The TCP handshake (only when the scenario has ``transport.handshake``): one row per flow, in the flows'
# order: when its SYN-ACK arrived (its data's start; null if never, or for a flow without one) and its SYNs.
_HANDSHAKE_TYPES: dict[str, pa.DataType] = {
    "established_ns": pa.int64(),
    "syns": pa.int64(),
}

# What the hosts' congestion control saw of each VM (only with ``[scheme] kind = "paccp_host"`` and its
# window): one row per VM. ``delay_ns`` sums the queueing delay beyond the host over its ``samples`` (ACKs
# with an RTT sample);
# ``marked_ns`` / ``unmarked_ns`` / ``unused_ns`` are the time the law advanced over with the ACK marked,
# unmarked with the window in use, unmarked with it not in use (each ACK's interval since its connection's
# previous one; since the VM's previous one while its ACKs are pooled); ``law_segments`` over ``law_ns`` is
# the VM's mean law rate (its connections' windows over their RTTs).
_HOST_LAW_TYPES: dict[str, pa.DataType] = {
    "vm": pa.string(),
    "samples": pa.int64(),
    "delay_ns": pa.float64(),
    "marked_ns": pa.float64(),
    "unmarked_ns": pa.float64(),
    "unused_ns": pa.float64(),
    "law_segments": pa.float64(),
    "law_ns": pa.float64(),
}


@dataclass(frozen=True)
class Samples:
    """Per-flow time series sampled every ``interval_ns``.

    ``acked_bytes[i, k]`` is the number of bytes flow ``flow_ids[i]`` got acknowledged during interval
    ``k`` (``[k * interval, (k + 1) * interval)``). ``cwnd_pkts`` and ``wmin_pkts`` are the window and the
    minimum window (segments) at the end of each interval, ``srtt_us`` the smoothed RTT (us; 0 before the
    first RTT sample), all three ``None`` when not sampled (``run.sample_cwnd``).
    """

    interval_ns: int
    flow_ids: list[str]
    acked_bytes: npt.NDArray[np.int64]
    cwnd_pkts: npt.NDArray[np.float64] | None
    wmin_pkts: npt.NDArray[np.float64] | None
    srtt_us: npt.NDArray[np.float64] | None = None


@dataclass(frozen=True)
class EngineResult:
    """The records of one run: one row per flow, one row per channel, samples and counters."""

    flows: pa.Table
    channels: pa.Table
    samples: Samples
    stats: dict[str, int]
    # One row per multipath connection; None when the scenario has none.
    connections: pa.Table | None = None
    # One row per flow with the TCP handshake (``transport.handshake``); None without it.
    handshake: pa.Table | None = None
    # One row per VM of a ``paccp_host`` scheme with its window (``_HOST_LAW_TYPES``); None otherwise.
    host_law: pa.Table | None = None


def _table(cols: Mapping[str, list[Any]], types: Mapping[str, pa.DataType]) -> pa.Table:
    arrays = {name: pa.array(cols[name], type=typ) for name, typ in types.items()}
    return pa.table(arrays)


def _matrix(rows: list[list[Any]] | None, n_rows: int, dtype: type) -> npt.NDArray[Any]:
    if not rows:
        return np.zeros((n_rows, 0), dtype=dtype)
    return np.asarray(rows, dtype=dtype)


def parse_output(out: Mapping[str, Any]) -> EngineResult:
    """Converts the engine's output document (already decoded from JSON) to an :class:`EngineResult`."""
    s = out["samples"]
    ids = [str(x) for x in s["flow_ids"]]
    cw = s.get("cwnd_pkts")
    wm = s.get("wmin_pkts")
    rt = s.get("srtt_us")
    samples = Samples(
        interval_ns=int(s["interval_ns"]),
        flow_ids=ids,
        acked_bytes=_matrix(s["acked_bytes"], len(ids), np.int64),
        cwnd_pkts=None if cw is None else _matrix(cw, len(ids), np.float64),
        wmin_pkts=None if wm is None else _matrix(wm, len(ids), np.float64),
        srtt_us=None if rt is None else _matrix(rt, len(ids), np.float64),
    )
    return EngineResult(
        flows=_table(out["flows"], _FLOW_TYPES),
        channels=_table(out["channels"], _CHANNEL_TYPES),
        samples=samples,
        stats={str(k): int(v) for k, v in out["stats"].items()},
        connections=_table(out["connections"], _CONNECTION_TYPES) if "connections" in out else None,
        handshake=_table(out["handshake"], _HANDSHAKE_TYPES) if "handshake" in out else None,
        host_law=_table(out["host_law"], _HOST_LAW_TYPES) if "host_law" in out else None,
    )


def source_hash() -> str:
    """Hash of the engine's Rust sources this build was made from (part of every result-cache key)."""
    import paccp._engine as _engine

    return _engine.SOURCE_HASH


def memory_latency_ns(nbytes: int, loads: int) -> float:
    """Mean nanoseconds of one dependent load chasing a random cycle through ``nbytes`` of memory: where a
    working set of that size is served from (L2, L3, DRAM) on this machine. A probe of the machine, not of
    the simulation (``paccp_sim::probe``)."""
    import paccp._engine as _engine

    return float(_engine.memory_latency_ns(nbytes, loads))


def memory_sizes_kib() -> tuple[int, ...]:
    """The working-set sizes (KiB) of the memory-latency curve (``paccp_sim::probe::SIZES_KIB``)."""
    import paccp._engine as _engine

    return tuple(_engine.MEMORY_SIZES_KIB)


def run_json(scenario_json: str, progress: ProgressFn | None = None) -> str:
    """Runs the engine on a JSON document; engine errors become :class:`UserError`."""
    import paccp._engine as _engine

    try:
        out: str = _engine.run_json(scenario_json, progress)
    except ValueError as e:
        raise UserError(f"engine: {e}") from None
    return out


def run(scenario: Mapping[str, Any], progress: ProgressFn | None = None) -> EngineResult:
    """Runs one fully resolved scenario (docs/engine-contract.md) and returns its records.

    ``progress(sim_ns_done, sim_ns_total)`` is called about 100 times during the run.
    """
    try:
        doc = json.dumps(scenario)
    except (TypeError, ValueError) as e:
        raise UserError(f"engine: scenario is not JSON-serialisable: {e}") from None
    return parse_output(json.loads(run_json(doc, progress)))
