"""Where DS/MRG flows gain or lose against BE's, from the flow records of a workload run.

    .venv/bin/python tools/datamining_flows.py out/dm/fig9 0.8
    .venv/bin/python tools/datamining_flows.py --channels RUN_DIR    # drops per queue of a `paccp run` of a
                                                                      # VBP point (its channels.csv)

Pools DIR/points/*load=LOAD*/flows.parquet (every seed; flows starting in the 50 ms warm-up left out) and
prints per class and size (small <= 100 KB < medium <= 1 MB < big <= 100 MB < huge): flows, unfinished,
mean FCT, mean size, mean rate (size / FCT), retransmissions and timeouts per flow, the share of flows
with at least one retransmission timeout and the mean FCT of those without. For big and huge flows
(the ones that set the mean FCT) it then asks where they shared a bottleneck with whom: a flow's own
source host carries only its own VM's flows under VBP (one class), its destination's downlink mixes
classes. ``dst-shared`` is the fraction of a flow's life during which another class's > 1 MB flow ran to
the same destination; the rate of flows that mostly shared their destination with another class (> 50 %)
is where the omega/theta advantage of the law can show.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

WARMUP_NS = 50_000_000
CLASSES = (("small", 0, 100_000), ("medium", 100_000, 1_000_000), ("big", 1_000_000, 100_000_000))
BIG = 1_000_000


def _cls(size: int) -> str:
    return next((name for name, lo, hi in CLASSES if lo < size <= hi), "huge")


def _load(run: Path, load: str) -> list[dict[str, Any]]:
    flows: list[dict[str, Any]] = []
    for seed_dir in sorted(run.glob(f"points/*load={load}_seed=*")):
        seed = seed_dir.name.rsplit("=", 1)[1]
        cols = ["cos", "src", "dst", "size_bytes", "start_ns", "finish_ns", "retransmits", "timeouts"]
        for r in pq.read_table(seed_dir / "flows.parquet", columns=cols).to_pylist():
            if r["size_bytes"] is not None and r["start_ns"] >= WARMUP_NS:
                flows.append({**r, "seed": seed})
    return flows


def _overlap(a: dict[str, Any], b: dict[str, Any], end: int) -> int:
    return max(0, min(a["finish_ns"] or end, b["finish_ns"] or end) - max(a["start_ns"], b["start_ns"]))


def channels(run_dir: Path) -> int:
    """Bytes sent and packets dropped per kind of queue; host links by the class of the host's VM (VBP)."""
    import csv

    from paccp.experiments._workload_lib import FULL, host_roles

    roles = host_roles(FULL, "vbp")
    agg: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    with (run_dir / "channels.csv").open(encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            src, dst = r["from"], r["to"]
            if src.startswith("h"):
                key = ("host->leaf", roles.get(src, "?"))
            elif dst.startswith("h"):
                key = ("leaf->host", roles.get(dst, "?"))
            else:
                key = (f"{src.rstrip('0123456789')}->{dst.rstrip('0123456789')}", "")
            a = agg[key]
            a[0] += 1
            a[1] += int(r["tx_bytes"])
            a[2] += int(r["drops"])
            a[3] += int(r["drops_ack"])
    print("queue        class  queues    sent_GB    drops  (of which ACKs)  drops_per_GB")
    for (kind, cos), (n, tx, drops, acks) in sorted(agg.items()):
        per_gb = drops / (tx / 1e9) if tx else 0.0
        print(f"{kind:12} {cos:5} {n:7} {tx / 1e9:10.2f} {drops:8} {acks:16} {per_gb:13.1f}")
    return 0


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "--channels":
        return channels(Path(argv[1]))
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    run, load = Path(argv[0]), argv[1]
    flows = _load(run, load)
    if not flows:
        print(f"datamining_flows: no flows.parquet for load={load} under {run}/points", file=sys.stderr)
        return 2
    seeds = sorted({f["seed"] for f in flows}, key=int)
    print(f"{run} load {load}: {len(flows)} flows, seeds {', '.join(seeds)}")
    print(
        "class size    flows unfin  meanFCT_ms  meanMB  rate_Gbps  retx/flow  RTOs/flow  with_RTO  FCT_no_RTO"
    )
    for cos in ("be", "ds", "mrg"):
        for name in (*(c[0] for c in CLASSES), "huge"):
            sel = [f for f in flows if f["cos"] == cos and _cls(f["size_bytes"]) == name]
            fin = [f for f in sel if f["finish_ns"] is not None]
            fct = np.array([f["finish_ns"] - f["start_ns"] for f in fin], dtype=float)
            rate = np.array([f["size_bytes"] * 8 / (f["finish_ns"] - f["start_ns"]) for f in fin])
            mean_fct = fct.mean() / 1e6 if fin else 0.0
            mean_mb = np.mean([f["size_bytes"] for f in sel]) / 1e6 if sel else 0.0
            retx = np.mean([f["retransmits"] for f in sel]) if sel else 0.0
            tos = np.mean([f["timeouts"] for f in sel]) if sel else 0.0
            clean = [f["finish_ns"] - f["start_ns"] for f in fin if f["timeouts"] == 0]
            with_rto = 1 - len(clean) / len(fin) if fin else 0.0
            print(
                f"{cos:5} {name:7} {len(sel):6} {len(sel) - len(fin):5} {mean_fct:11.3f} {mean_mb:7.2f}"
                f" {rate.mean() if fin else 0:10.2f} {retx:10.1f} {tos:10.2f} {with_rto:9.1%}"
                f" {np.mean(clean) / 1e6 if clean else 0:11.3f}"
            )
    end = max((f["finish_ns"] or 0) for f in flows)
    big = [f for f in flows if f["size_bytes"] > BIG and f["finish_ns"] is not None]
    by_dst: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    by_src: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for f in big:
        by_dst[(f["seed"], f["dst"])].append(f)
        by_src[(f["seed"], f["src"])].append(f)
    print("\n> 1 MB flows: time-averaged other > 1 MB flows at the same source / destination, share of life")
    print("with another class at the destination, and the rate of those that shared it > 50 % of their life")
    print("class  flows  at_src  at_dst  dst-shared  rate_all  rate_shared(n)  rate_alone(n)")
    for cos in ("be", "ds", "mrg"):
        rows = []
        for f in (f for f in big if f["cos"] == cos):
            life = f["finish_ns"] - f["start_ns"]
            src = sum(_overlap(f, g, end) for g in by_src[(f["seed"], f["src"])] if g is not f) / life
            dst = sum(_overlap(f, g, end) for g in by_dst[(f["seed"], f["dst"])] if g is not f) / life
            other = [g for g in by_dst[(f["seed"], f["dst"])] if g["cos"] != cos]
            mixed = min(1.0, sum(_overlap(f, g, end) for g in other) / life)
            rows.append((src, dst, mixed, f["size_bytes"] * 8 / life))
        if not rows:
            continue
        a = np.array(rows)
        shared, alone = a[a[:, 2] > 0.5, 3], a[a[:, 2] <= 0.5, 3]
        print(
            f"{cos:5} {len(a):6} {a[:, 0].mean():7.2f} {a[:, 1].mean():7.2f} {a[:, 2].mean():11.2f}"
            f" {a[:, 3].mean():9.2f} {shared.mean() if shared.size else 0:9.2f} ({shared.size:4})"
            f" {alone.mean() if alone.size else 0:8.2f} ({alone.size:4})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
