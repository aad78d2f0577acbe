"""The engine twin of issue 31's four-flow NewReno dumbbell (:mod:`paccp.crosscheck.kernel_newreno` runs the
kernel side and compares): the issue's scenario, stretched in time by ``k`` (:class:`Scaled`).

Engine side (:func:`engine_twin`): the same scaled dumbbell as engine JSON, as the issue writes it
(NewReno, ``sack`` false, ``dupack_threshold`` 3, no delayed ACK, no host backpressure, init_cwnd 10)
with the kernel's values where the kernel differs from the issue: 1514/66-byte frames (Ethernet
included, timestamps on), the bfifo + one frame, Linux's 200 ms minimum and 1 s initial RTO, min cwnd 2,
the receivers' measured 30 us processing delay (:data:`paccp.datapath.core.netns.ACK_DELAY_NS`) and the
measured data starts. Run with ``prr`` true (the fixed engine) and false.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

ISSUE_RATE_BPS = 10_000_000_000
ISSUE_SENDER_DELAYS_NS = (30_000, 50_000, 70_000, 90_000)
ISSUE_LR_DELAY_NS = 20_000
ISSUE_RD_DELAY_NS = 10_000
ISSUE_START_GAP_NS = 10_000
ISSUE_DURATION_NS = 200_000_000
# the issue's "no progress" window: a flow that acknowledges nothing for this long has stalled
ISSUE_WINDOW_NS = 10_000_000
EDGE_FACTOR = 4
BUFFER_PKTS = 100
FRAME = 1514  # 1448 bytes of payload + 52 of TCP/IP with timestamps + 14 of Ethernet
HEADER = 66
# a veth hop inside the machine (the engine needs a delay on every link)
HOP_NS = 5_000
# what Linux counts about Reno recoveries, retransmissions and timeouts (sender namespaces)


@dataclass(frozen=True)
class Scaled:
    """The issue's scenario with time stretched by ``k`` (rates / k, delays and times x k); ``length``
    is the share of the issue's 200 ms that is run (1 = all of it)."""

    k: int = 100
    length: float = 1.0

    @property
    def rate_bps(self) -> int:
        return ISSUE_RATE_BPS // self.k

    @property
    def edge_bps(self) -> int:
        return EDGE_FACTOR * self.rate_bps

    @property
    def duration_ns(self) -> int:
        return round(ISSUE_DURATION_NS * self.k * self.length)

    @property
    def window_ns(self) -> int:
        return ISSUE_WINDOW_NS * self.k

    @property
    def start_gap_ns(self) -> int:
        return ISSUE_START_GAP_NS * self.k

    def base_rtt_ns(self, i: int) -> int:
        return 2 * (ISSUE_SENDER_DELAYS_NS[i] + ISSUE_LR_DELAY_NS + ISSUE_RD_DELAY_NS) * self.k

    def bdp_pkts(self, i: int) -> float:
        """Flow i's bandwidth-delay product in frames (the same for every k)."""
        return self.rate_bps * self.base_rtt_ns(i) / 1e9 / 8 / FRAME


def zero_windows(per_window: list[int]) -> dict[str, int]:
    """Windows (after the first) in which a flow got nothing through, and the longest run of them."""
    zeros, run, longest = 0, 0, 0
    for v in per_window[1:]:
        run = run + 1 if v <= 0 else 0
        zeros += v <= 0
        longest = max(longest, run)
    return {"zero_windows": zeros, "longest_zero_run": longest}


def _link(a: str, b: str, rate_bps: int, delay_ns: int, buffer: dict[str, int]) -> dict[str, Any]:
    """One full-duplex link of the engine JSON."""
    return {"a": a, "b": b, "rate_bps": rate_bps, "delay_ns": delay_ns, "buffer": buffer}


def engine_twin(
    sc: Scaled,
    prr: bool,
    starts_ns: list[int] | None = None,
    placement: str = "kernel",
    ack_delay_ns: int | None = None,
) -> dict[str, Any]:
    """The scaled scenario as engine JSON. ``placement`` "kernel": the delays where the testbed has them
    (all on the sender links); "issue": where the issue puts them. ``starts_ns``: each flow's first data
    (default: the issue's gap, scaled)."""
    from paccp.crosscheck.engine_side import tcp_flow
    from paccp.datapath.core.netns import ACK_DELAY_NS

    n = len(ISSUE_SENDER_DELAYS_NS)
    starts = starts_ns if starts_ns is not None else [i * sc.start_gap_ns for i in range(n)]
    fold = (ISSUE_LR_DELAY_NS + ISSUE_RD_DELAY_NS) * sc.k if placement == "kernel" else 0
    lr = HOP_NS if placement == "kernel" else ISSUE_LR_DELAY_NS * sc.k
    rd = HOP_NS if placement == "kernel" else ISSUE_RD_DELAY_NS * sc.k
    nodes = [{"name": "L", "kind": "switch"}, {"name": "R", "kind": "switch"}]
    links: list[dict[str, Any]] = []
    for i, d in enumerate(ISSUE_SENDER_DELAYS_NS):
        nodes += [{"name": f"s{i}", "kind": "host"}, {"name": f"d{i}", "kind": "host"}]
        links.append(_link(f"s{i}", "L", sc.edge_bps, d * sc.k + fold, {"packets": BUFFER_PKTS}))
        links.append(_link("R", f"d{i}", sc.edge_bps, rd, {"packets": BUFFER_PKTS}))
    links.append(_link("L", "R", sc.rate_bps, lr, {"bytes": BUFFER_PKTS * FRAME + FRAME}))
    return {
        "seed": 1,
        "duration_ns": sc.duration_ns + max(starts),
        "packet": {"mtu_bytes": FRAME, "header_bytes": HEADER, "ack_bytes": HEADER},
        "transport": {
            "init_cwnd_pkts": 10.0,
            "min_rto_ns": 200_000_000,
            "initial_rto_ns": 1_000_000_000,
            "max_rto_ns": 120_000_000_000,
            "delayed_ack": False,
            "delayed_ack_timeout_ns": 40_000_000,
            "dupack_threshold": 3,
            "sack": False,
            "prr": prr,
            "host_backpressure": False,
            "host_fq_pkts": 0,
            "ack_delay_mean_ns": ACK_DELAY_NS if ack_delay_ns is None else ack_delay_ns,
        },
        "cc": {"kind": "reno", "min_cwnd_pkts": 2.0},
        "topology": {
            "kind": "explicit",
            "nodes": nodes,
            "links": links,
            "nic_buffer": {"packets": BUFFER_PKTS},
        },
        "routing": {"kind": "ecmp"},
        "vms": [],
        "flows": [tcp_flow(f"f{i}", f"s{i}", f"d{i}", starts[i]) for i in range(n)],
        "arrivals": [],
        # a tenth of the issue's window: each flow's span [start, start + duration] to within it
        "sampling": {"interval_ns": sc.window_ns // 10, "flows": "all", "cwnd": False},
    }


def run_engine(
    sc: Scaled,
    prr: bool,
    starts_ns: list[int] | None = None,
    placement: str = "kernel",
    ack_delay_ns: int | None = None,
) -> dict[str, Any]:
    """Per flow: bytes acknowledged over [start, start + duration] (as iperf3 counts a flow), per issue
    window, retransmissions and timeouts."""
    from paccp.sim import engine

    doc = engine_twin(sc, prr, starts_ns, placement, ack_delay_ns)
    res = engine.run(doc)
    acked = res.samples.acked_bytes
    step = res.samples.interval_ns
    per = sc.window_ns // step
    flows = []
    for i, f in enumerate(doc["flows"]):
        k0 = f["start_ns"] // step
        row = [int(v) for v in acked[i][k0 : k0 + sc.duration_ns // step]]
        per_window = [sum(row[j : j + per]) for j in range(0, len(row), per)]
        flows.append({"bytes": sum(row), "per_window_bytes": per_window, **zero_windows(per_window)})
    for f, r, t, sp in zip(
        flows,
        res.flows.column("retransmits").to_pylist(),
        res.flows.column("timeouts").to_pylist(),
        res.flows.column("spurious_retransmits").to_pylist(),
        strict=True,
    ):
        f.update(retransmits=int(r), timeouts=int(t), spurious_retransmits=int(sp))
    drops = sum(int(c["drops"]) for c in res.channels.to_pylist() if c["name"] == "L->R")
    return {"flows": flows, "bottleneck_drops": drops}
