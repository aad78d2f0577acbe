"""Port disciplines built from what this kernel has (htb, bfifo, u32; no prio, fq or netem qdisc).

- :func:`strict_priority_port`: a switch port whose "high" ToS class is served strictly before the "low"
  one. htb serves a class within its own rate first ("green") and lends the parent's spare rate by class
  priority, so high = rate 0.95 x link, prio 0; control (unmarked: ACKs, handshakes) = 0.04 x link, prio 0;
  low = a token 8 kbit/s, prio 1, ceil = link: low only gets what high and control leave. Strictness is
  measured by ``paccp testbed mptcp-prio``, not assumed.
- :func:`vm_port`: a VM's host egress with its high class limited to a guarantee (rate = ceil = B) and the
  low class free up to the link (the MPTCP scheme's per-VM HTB).

Classification: u32 on the IPv4 ToS byte (DSCP bits), set per subflow by ``bpf/bgwc.bpf.c``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from paccp.datapath.core.netns import Net

HIGH, LOW, CONTROL = "1:10", "1:20", "1:30"
QUANTUM = "15140"
VM_BURST = "15k"  # ten full-size packets: htb's default rate/r2q is far too big at these rates


def _cls(
    net: Net,
    node: str,
    dev: str,
    classid: str,
    rate: int,
    ceil: int,
    prio: int,
    limit: int,
    burst: str = "15k",
) -> None:
    net.exec(
        node, "tc", "class", "add", "dev", dev, "parent", "1:1", "classid", classid, "htb",
        "rate", str(max(8000, rate)), "ceil", str(ceil), "prio", str(prio), "quantum", QUANTUM,
        "burst", burst, "cburst", "15k",
    )  # fmt: skip
    leaf = classid.split(":")[1] + ":"
    net.exec(node, "tc", "qdisc", "add", "dev", dev, "parent", classid, "handle", leaf, "bfifo",
             "limit", str(limit))  # fmt: skip


def _root(net: Net, node: str, dev: str, rate: int) -> None:
    net.exec(node, "tc", "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "30")
    net.exec(
        node, "tc", "class", "add", "dev", dev, "parent", "1:", "classid", "1:1", "htb",
        "rate", str(rate), "ceil", str(rate), "quantum", QUANTUM, "burst", "15k", "cburst", "15k",
    )  # fmt: skip


def _tos_filter(net: Net, node: str, dev: str, tos: int, classid: str) -> None:
    net.exec(
        node, "tc", "filter", "add", "dev", dev, "parent", "1:", "protocol", "ip", "prio", "1",
        "u32", "match", "ip", "tos", hex(tos), "0xfc", "flowid", classid,
    )  # fmt: skip


def strict_priority_port(
    net: Net, node: str, dev: str, rate_bps: int, limit_bytes: int, high_tos: int, low_tos: int
) -> None:
    """Strict priority of ``high_tos`` over ``low_tos`` on ``dev``'s egress at ``rate_bps``."""
    _root(net, node, dev, rate_bps)
    _cls(net, node, dev, HIGH, rate_bps * 95 // 100, rate_bps, 0, limit_bytes)
    _cls(net, node, dev, CONTROL, rate_bps * 4 // 100, rate_bps, 0, limit_bytes)
    _cls(net, node, dev, LOW, 8000, rate_bps, 1, limit_bytes)
    _tos_filter(net, node, dev, high_tos, HIGH)
    _tos_filter(net, node, dev, low_tos, LOW)


def vm_port(
    net: Net,
    node: str,
    dev: str,
    rate_bps: int,
    guarantee_bps: int,
    limit_bytes: int,
    high_tos: int,
    low_tos: int,
) -> None:
    """A VM's egress: ``high_tos`` limited to ``guarantee_bps``, ``low_tos`` up to the link, strict."""
    _root(net, node, dev, rate_bps)
    _cls(net, node, dev, HIGH, guarantee_bps, guarantee_bps, 0, limit_bytes, VM_BURST)
    _cls(net, node, dev, CONTROL, rate_bps * 4 // 100, rate_bps, 0, limit_bytes)
    _cls(net, node, dev, LOW, 8000, rate_bps, 1, limit_bytes)
    _tos_filter(net, node, dev, high_tos, HIGH)
    _tos_filter(net, node, dev, low_tos, LOW)


def class_bytes(net: Net, node: str, dev: str) -> dict[str, int]:
    """Bytes sent per htb class of ``dev`` (``tc -s class show``)."""
    res = net.exec(node, "tc", "-s", "class", "show", "dev", dev, check=False)
    return {
        m.group(1): int(m.group(2))
        for m in re.finditer(r"class htb (\S+) .*?Sent (\d+) bytes", res.stdout, re.S)
    }
