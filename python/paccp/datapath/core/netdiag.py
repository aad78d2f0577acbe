"""Diagnostics of a namespace testbed run: TCP counters, qdisc drops, socket state samples, packet traces.

Used by the Fig. 7 testbed and the kernel cross-check (``paccp.crosscheck.kernel_side``) to explain where
the kernel and the engine disagree (docs/explanation/fidelity.md):

- :func:`nstat` - a namespace's TCP MIB counters (``nstat -az``): recoveries, timeouts, delayed ACKs ...
- :func:`qdisc_drops` - drops and packets of the bfifo under the HTB class of :meth:`Net.shape`.
- :class:`SsSampler` - ``ss -tin`` of the iperf3 data connections every ``period_s`` (cwnd, ssthresh,
  srtt, retransmits), run in a thread while the flows run.
- :func:`summarise_ss` - per connection medians of those samples.
"""

from __future__ import annotations

import json
import re
import statistics
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Collection

    from paccp.datapath.core.netns import Net

NSTAT_KEYS = (
    "TcpRetransSegs", "TcpExtTCPLostRetransmit", "TcpExtTCPTimeouts", "TcpExtTCPSackRecovery",
    "TcpExtTCPRenoRecovery", "TcpExtTCPFastRetrans", "TcpExtTCPSlowStartRetrans", "TcpExtDelayedACKs",
    "TcpExtTCPHPAcks", "TcpExtTCPPureAcks", "TcpExtTCPDSACKRecv", "TcpExtTCPSpuriousRTOs",
    "TcpExtTCPSackShifted", "TcpOutSegs", "TcpInSegs", "TcpExtTCPFullUndo", "TcpExtTCPPartialUndo",
    "TcpExtTCPDSACKUndo", "TcpExtTCPLossUndo", "TcpExtTCPLossProbes", "TcpExtTCPDelivered",
    "TcpExtTCPAutoCorking", "TcpExtTCPOrigDataSent", "TcpExtTCPSACKReorder", "TcpExtTCPRcvCoalesce",
    "TcpExtTCPBacklogCoalesce", "TcpExtTCPOFOQueue",
)  # fmt: skip


def nstat(net: Net, node: str, keys: Collection[str] = NSTAT_KEYS) -> dict[str, int]:
    """The namespace's TCP counters named in ``keys`` (absolute values; {} when nstat fails)."""
    res = net.exec(node, "nstat", "-az", "--json", check=False)
    try:
        doc = json.loads(res.stdout)
    except ValueError:
        return {}
    kv: dict[str, int] = {}
    for grp in doc.values():
        kv.update({k: int(v) for k, v in grp.items() if k in keys})
    return kv


def nstat_delta(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    """Counter increments from snapshot ``a`` to ``b``."""
    return {k: b.get(k, 0) - a.get(k, 0) for k in NSTAT_KEYS}


def qdisc_drops(net: Net, node: str, ifn: str) -> tuple[int, int]:
    """(dropped, sent packets) of the bfifo ``10:`` under HTB class 1:10 on ``ifn``."""
    res = net.exec(node, "tc", "-s", "qdisc", "show", "dev", ifn, check=False)
    m = re.search(r"qdisc bfifo 10:.*?Sent \d+ bytes (\d+) pkt \(dropped (\d+)", res.stdout, re.S)
    return (int(m.group(2)), int(m.group(1))) if m else (0, 0)


_SS_FIELDS = {
    "cwnd": re.compile(r"\bcwnd:(\d+)"),
    "ssthresh": re.compile(r"\bssthresh:(\d+)"),
    "rtt_ms": re.compile(r"\brtt:([\d.]+)/"),
    "retrans": re.compile(r"\bretrans:\d+/(\d+)"),
    "unacked": re.compile(r"\bunacked:(\d+)"),
    "bytes_acked": re.compile(r"\bbytes_acked:(\d+)"),
}
# iperf3's control connection shares the data port; it carries a few KB of JSON over the whole test
# and is caught with data in flight only when a sample falls on that exchange. A connection that never
# got this much acknowledged is not a data connection.
DATA_MIN_BYTES_ACKED = 64 * 1024


def parse_ss(text: str, ports: set[int]) -> dict[str, dict[str, float]]:
    """``ss -tin`` output -> {"src>dst": fields} for connections to one of ``ports`` (data senders)."""
    out: dict[str, dict[str, float]] = {}
    lines = text.splitlines()
    for i, line in enumerate(lines[:-1]):
        parts = line.split()
        if len(parts) < 5 or parts[0] != "ESTAB":
            continue
        src, dst = parts[3], parts[4]
        try:
            if int(dst.rsplit(":", 1)[1]) not in ports:
                continue
        except ValueError:
            continue
        info = lines[i + 1]
        row = {k: float(m.group(1)) for k, rx in _SS_FIELDS.items() if (m := rx.search(info))}
        if "cwnd" in row and "rtt_ms" in row and "bytes_acked" in row and row.get("unacked", 0) > 0:
            out[f"{src}>{dst}"] = row
    return out


class SsSampler(threading.Thread):
    """Samples ``ss -tin`` in ``nodes`` every ``period_s`` until :meth:`stop` (data connections only)."""

    def __init__(self, net: Net, nodes: list[str], ports: set[int], period_s: float = 0.5) -> None:
        super().__init__(daemon=True)
        self.net, self.nodes, self.ports, self.period_s = net, nodes, ports, period_s
        self.samples: dict[str, list[dict[str, float]]] = {}
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.wait(self.period_s):
            for node in self.nodes:
                res = self.net.exec(node, "ss", "-tin", check=False)
                for key, row in parse_ss(res.stdout, self.ports).items():
                    self.samples.setdefault(f"{node} {key}", []).append(row)

    def stop(self) -> dict[str, dict[str, float]]:
        """Stop sampling; per connection the median of every field and the number of samples."""
        self._halt.set()
        self.join(timeout=10)
        return summarise_ss(self.samples)


def summarise_ss(samples: dict[str, list[dict[str, float]]]) -> dict[str, dict[str, float]]:
    """Per data connection: the median of each sampled field, and ``n`` samples.

    Connections whose ``bytes_acked`` never reached :data:`DATA_MIN_BYTES_ACKED` are left out (iperf3's
    control connection, sampled while it sends its results)."""
    out: dict[str, dict[str, float]] = {}
    for key, rows in samples.items():
        if max((r.get("bytes_acked", 0.0) for r in rows), default=0.0) < DATA_MIN_BYTES_ACKED:
            continue
        fields = sorted({k for r in rows for k in r})
        med = {f: statistics.median([r[f] for r in rows if f in r]) for f in fields}
        out[key] = {**{f: round(v, 3) for f, v in med.items()}, "n": float(len(rows))}
    return out
