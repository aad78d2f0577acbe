"""Simulator-neutral scenarios of the cross-check: nodes, links, flows and TCP parameters.

Matching rules (also in docs/explanation/fidelity.md):

- **Wire sizes.** Payload (MSS) 1448 bytes = a 1500-byte IP packet with TCP timestamps (20 + 20 + 12
  bytes of headers). ns-3's point-to-point links add a 2-byte PPP header, so a data packet is 1502 bytes on
  the wire and an ACK 54 (more with SACK blocks: 64-74); the engine is given ``mtu 1502, header 54, ack
  54``. The kernel testbed counts 14 bytes of Ethernet header in HTB and bfifo: 1514 / 66, so the engine's
  kernel twin uses ``mtu 1514, header 66, ack 66``.
- **Buffers.** An engine buffer of B packets counts the packet being serialised; ns-3's device queue holds
  only the waiting ones (B - 1); see :mod:`.ns3_run`. The kernel's bfifo limit L bytes holds only the
  waiting packets too (HTB has already released the one "on the wire"), so the engine gets L + 1514 bytes.
- **TCP.** Initial window 10, minimum RTO 200 ms, no delayed ACK (ns-3 ``DelAckCount`` 1) unless a
  scenario says so, NewReno congestion control (ns-3 ``TcpNewReno``, engine ``reno``), SACK on or off on both.
- **Routes.** The engine picks the routes (per-flow ECMP); ns-3 gets the same paths as static host routes.
- **Handshake.** Without a lead (single, pair, finite, longlived) both sides connect at the flow's start
  and send data at the establishment, the engine with ns-3's handshake (``engine_side.NS3_HANDSHAKE``:
  58-byte SYN / SYN-ACK, 3 s connect timeout, 6 SYNs), and both count FCTs from the establishment. Where a
  scenario sets ``ns3_handshake_lead_ns`` (leafspine, twoway: ``HANDSHAKE_LEAD_NS``) the engine has no
  handshake and ns-3's clock runs that much ahead: every flow connects at its engine start time and sends
  data the lead later, so the data phase starts as the engine's does (``ns3_run.timeline``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

MSS = 1448
G = 1_000_000_000
MS = 1_000_000
US = 1_000
HANDSHAKE_LEAD_NS = 1 * MS
"""ns-3's connections open this long before their data start (over 20 base RTTs of any scenario here)."""


@dataclass
class Link:
    """A full-duplex link; ``buffer_pkts`` per direction (host NICs use the scenario's ``nic_pkts``)."""

    a: str
    b: str
    rate_bps: int
    delay_ns: int
    buffer_pkts: int


@dataclass
class Flow:
    """A flow; ``size_bytes`` None = long-lived."""

    id: str
    src: str
    dst: str
    size_bytes: int | None
    start_ns: int


@dataclass
class Scenario:
    """One matched scenario."""

    name: str
    what: str
    hosts: list[str]
    switches: list[str]
    links: list[Link]
    flows: list[Flow]
    duration_ns: int
    warmup_ns: int
    nic_pkts: int
    sack: bool
    delayed_ack: bool = False
    min_rto_ns: int = 200 * MS
    # ns-3's NewReno recovery (ns3_run: "prr-fixed" = FxPrr, "prr" = 3.44's, "classic" = RFC 6582); None =
    # the runner's default (FxPrr without SACK, 3.44's PRR with SACK)
    ns3_recovery: str | None = None
    # ns-3 connects this long before the data start and the engine has no handshake (ns3_run.timeline); 0 =
    # both connect at the start, the engine with ns-3's handshake (engine_side.NS3_HANDSHAKE)
    ns3_handshake_lead_ns: int = 0
    # the engine's ``transport.rack`` (Linux's RACK loss marking in a SACK recovery; `--rack`)
    engine_rack: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


def _dumbbell(n: int, access_bps: int, bott_bps: int, buf: int) -> tuple[list[str], list[str], list[Link]]:
    hosts = [f"l{i}" for i in range(n)] + [f"r{i}" for i in range(n)]
    links = [Link(f"l{i}", "left", access_bps, 1 * US, buf) for i in range(n)]
    links.append(Link("left", "right", bott_bps, 10 * US, buf))
    links += [Link(f"r{i}", "right", access_bps, 1 * US, buf) for i in range(n)]
    return hosts, ["left", "right"], links


def single(sack: bool) -> Scenario:
    """One 10 MB flow alone on the 10 Gb/s dumbbell."""
    h, s, ln = _dumbbell(1, 40 * G, 10 * G, 100)
    return Scenario(
        f"single-{'sack' if sack else 'newreno'}", "one 10 MB flow, 40G access, 10G bottleneck, 100 pkt",
        h, s, ln, [Flow("f0", "l0", "r0", 10_000_000, 0)], 300 * MS, 0, 100, sack,
    )  # fmt: skip


def pair(sack: bool) -> Scenario:
    """Two 10 MB flows started 2 ms apart (the issue's case of repeated timeouts)."""
    h, s, ln = _dumbbell(2, 40 * G, 10 * G, 100)
    fl = [Flow("f0", "l0", "r0", 10_000_000, 0), Flow("f1", "l1", "r1", 10_000_000, 2 * MS)]
    return Scenario(
        f"pair-{'sack' if sack else 'newreno'}", "two 10 MB flows 2 ms apart, 40G access, 10G bottleneck",
        h, s, ln, fl, 600 * MS, 0, 100, sack,
    )  # fmt: skip


SIZES = ((10_000, 60), (100_000, 50), (1_000_000, 35), (10_000_000, 15))


def finite(sack: bool, seed: int = 1) -> Scenario:
    """160 flows of 10 KB / 100 KB / 1 MB / 10 MB (60/50/35/15), random hosts, starts in [0, 300 ms)."""
    h, s, ln = _dumbbell(4, 40 * G, 10 * G, 100)
    rng = random.Random(seed)
    sizes = [sz for sz, k in SIZES for _ in range(k)]
    rng.shuffle(sizes)
    fl = [
        Flow(f"f{i}", f"l{rng.randrange(4)}", f"r{rng.randrange(4)}", sz, rng.randrange(300 * MS))
        for i, sz in enumerate(sizes)
    ]
    return Scenario(
        f"finite-{'sack' if sack else 'newreno'}",
        "160 finite flows (10K/100K/1M/10M), 4+4 hosts, 40G access, 10G bottleneck, 100 pkt, ~50 % load",
        h, s, ln, fl, 700 * MS, 0, 100, sack,
    )  # fmt: skip


def leafspine(sack: bool) -> Scenario:
    """4 leaves x 4 spines x 16 hosts, 10G everywhere (4:1), 64 long-lived flows to the next leaf at t=0."""
    L, S, H = 4, 4, 16
    hosts = [f"h{i}" for i in range(L * H)]
    links = [Link(f"h{i}", f"leaf{i // H}", 10 * G, 2 * US, 100) for i in range(L * H)]
    links += [Link(f"leaf{a}", f"spine{b}", 10 * G, 2 * US, 100) for a in range(L) for b in range(S)]
    fl = [Flow(f"f{i}", f"h{i}", f"h{(i + H) % (L * H)}", None, 0) for i in range(L * H)]
    return Scenario(
        f"leafspine-{'sack' if sack else 'newreno'}",
        "4x4 leaf-spine, 16 hosts/leaf, 10G links, 100 pkt, 64 synchronised long-lived flows",
        hosts, [f"leaf{a}" for a in range(L)] + [f"spine{b}" for b in range(S)], links, fl,
        30 * MS, 10 * MS, 100, sack, ns3_handshake_lead_ns=HANDSHAKE_LEAD_NS,
    )  # fmt: skip


def longlived(sack: bool) -> Scenario:
    """Four long-lived flows on the dumbbell (1G bottleneck, 10G access, 64-packet buffer)."""
    h, s, ln = _dumbbell(4, 10 * G, 1 * G, 64)
    fl = [Flow(f"f{i}", f"l{i}", f"r{i}", None, i * 100 * US) for i in range(4)]
    return Scenario(
        f"longlived-{'sack' if sack else 'newreno'}", "4 long-lived flows, 10G access, 1G bottleneck, 64 pkt",
        h, s, ln, fl, 500 * MS, 100 * MS, 100, sack,
    )  # fmt: skip


def two_way(sack: bool) -> Scenario:
    """Three long-lived flows each way over the 1G dumbbell: data and ACKs share each bottleneck queue."""
    h, s, ln = _dumbbell(3, 10 * G, 1 * G, 32)
    fl = [Flow(f"f{i}", f"l{i}", f"r{i}", None, i * 100 * US) for i in range(3)]
    fl += [Flow(f"R{i}", f"r{i}", f"l{i}", None, i * 100 * US + 50 * US) for i in range(3)]
    return Scenario(
        f"twoway-{'sack' if sack else 'newreno'}", "3 flows each way, 10G access, 1G bottleneck, 32 pkt",
        h, s, ln, fl, 500 * MS, 100 * MS, 100, sack, ns3_handshake_lead_ns=HANDSHAKE_LEAD_NS,
    )  # fmt: skip


NS3_SCENARIOS = {
    "single": single,
    "pair": pair,
    "finite": finite,
    "leafspine": leafspine,
    "longlived": longlived,
    "twoway": two_way,
}
