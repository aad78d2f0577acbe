"""Diagnose the MPTCP BG/WC testbed: per-subflow state over time (ss -ti), MPTcp counters (nstat) and htb
class bytes, for the mptcp-bg setup. Root, under ``flock /tmp/paccp-datapath.lock``.

    PACCP_NETNS_PREFIX=tb flock /tmp/paccp-datapath.lock .venv/bin/python tools/mptcp_diag.py --secs 8 \
        --tuning 1,10,32768 --out /tmp/diag.json
"""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path
from typing import Any

from paccp.datapath.core.netns import Net, testbed
from paccp.datapath.mptcp import control as mptcp
from paccp.datapath.mptcp import prio
from paccp.datapath.mptcp import testbed as mt

KEYS = ("cwnd", "bytes_acked", "bytes_retrans", "notsent", "unacked", "retrans", "rtt", "sndbuf_limited",
        "busy", "rwnd_limited", "delivery_rate", "snd_wnd", "pacing_rate", "lost")  # fmt: skip


def subflows(net: Net, node: str) -> dict[str, dict[str, Any]]:
    res = net.exec(node, "ss", "-tniH", "state", "established", f"dport = :{mt.PORT}", check=False)
    out: dict[str, dict[str, Any]] = {}
    key = ""
    for line in res.stdout.splitlines():
        if not line.startswith(("\t", " ")):
            parts = line.split()
            if len(parts) >= 4:
                key = f"{parts[-2]}>{parts[-1]}"
            continue
        if not key:
            continue
        d: dict[str, Any] = {"cls": "wc" if key.startswith("10.72.") else "bg", "raw": line.strip()}
        for k in KEYS:
            m = re.search(rf"\b{k}[: ]([\d./]+)(\w*)", line)
            if m:
                d[k] = m.group(1) + m.group(2)
        out[key] = d
        key = ""
    return out


def nstat(net: Net, node: str) -> dict[str, int]:
    res = net.exec(node, "nstat", "-az", "--json", check=False)
    try:
        data = json.loads(res.stdout)
    except json.JSONDecodeError:
        return {}
    flat: dict[str, int] = {}
    for v in data.values():
        for k, x in v.items():
            if k.startswith(
                ("MPTcp", "TcpExtTCPLoss", "TcpRetrans", "TcpExtTCPTimeouts", "TcpExtTCPSpurious")
            ):
                flat[k] = x
    return flat


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--secs", type=float, default=8.0)
    ap.add_argument("--rate", type=int, default=100_000_000)
    ap.add_argument("--tuning", default="1,10,32768,1")
    ap.add_argument("--wmem", default="")
    ap.add_argument("--rmem", default="")
    ap.add_argument("--backup", action="store_true")
    ap.add_argument("--servers", default="350:5,250:3,200:3,100:1", help="paper guarantee Mb/s:A_l,...")
    ap.add_argument("--queue-pkts", type=int, default=0)
    ap.add_argument("--out", default="/tmp/tb_diag.json")
    a = ap.parse_args()
    rate = a.rate
    spec = [tuple(int(x) for x in p.split(":")) for p in a.servers.split(",")]
    servers = [mt.Server(f"s{i}", mt.scaled(g * 1e6, rate), al) for i, (g, al) in enumerate(spec, 1)]
    mptcp.load()
    t = [int(x) for x in a.tuning.split(",")]
    mt.Tuning(t[0], t[1], t[2], bool(t[3]) if len(t) > 3 else False).apply(rate)
    mt.SWITCH_QUEUE_PKTS = a.queue_pkts or None
    if a.wmem:
        mt.SND_WMEM = a.wmem.replace(",", " ")
    if a.rmem:
        mt.RCV_RMEM = a.rmem.replace(",", " ")
    samples: list[dict[str, Any]] = []
    with testbed() as net:
        try:
            cgs = mt.build(net, servers, rate, True)
            for i, s in enumerate(servers, start=1):
                if a.backup:
                    net.ip(s.name, "mptcp", "endpoint", "flush")
                    net.ip(
                        s.name, "mptcp", "endpoint", "add", f"10.72.{i}.2", "dev", "e0", "subflow", "backup"
                    )
            for i, _s in enumerate(servers, start=1):
                net.spawn(f"r{i}", ["python3", "-c", mt.SINK, str(mt.PORT)])
            time.sleep(0.5)
            for i, s in enumerate(servers, start=1):
                cmd = [mt.SENDER, f"10.80.{i}.2", str(mt.PORT), "1", "0", str(a.secs + 1)]
                net.spawn(s.name, ["python3", "-c", *cmd], cgroup=cgs[s.name])
            for n in ("s1", "s2"):
                loop = (
                    "while :; do tc -s qdisc show dev e0 | tr '\\n' ' ' | grep -o 'bfifo 10:.*' "
                    "| grep -o 'backlog [0-9]*b' | head -1; sleep 0.01; done"
                )  # BG leaf backlog every ~10 ms: is the BG class ever idle?
                net.spawn(n, ["sh", "-c", loop], out=Path(f"/tmp/tb_backlog_{n}.txt"))
            n0 = {s.name: nstat(net, s.name) for s in servers}
            t0 = time.monotonic()
            while time.monotonic() - t0 < a.secs:
                samples.append({
                    "t": round(time.monotonic() - t0, 2),
                    "sub": {s.name: subflows(net, s.name) for s in servers},
                    "cls": {s.name: prio.class_bytes(net, s.name, "e0") for s in servers},
                    "link": prio.class_bytes(net, "sw1", "e0"),
                })  # fmt: skip
                time.sleep(0.5)
            n1 = {s.name: nstat(net, s.name) for s in servers}
            r1 = {f"r{i}": nstat(net, f"r{i}") for i in range(1, len(servers) + 1)}
            msk = {s.name: net.exec(s.name, "ss", "-MtiH", check=False).stdout for s in servers}
        finally:
            for i, _s in enumerate(servers, start=1):
                mptcp.addr_clear(f"10.71.{i}.2")
                mptcp.addr_clear(f"10.72.{i}.2")
            net.cleanup()
            mptcp.reap()
    delta = {n: {k: v - n0[n].get(k, 0) for k, v in n1[n].items() if v - n0[n].get(k, 0)} for n in n1}
    data = {"samples": samples, "nstat": delta, "rcv_nstat": r1, "msk": msk,
            "guarantees": {s.name: s.guarantee_bps for s in servers}}  # fmt: skip
    Path(a.out).write_text(json.dumps(data, indent=1))


if __name__ == "__main__":
    main()
