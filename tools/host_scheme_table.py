"""The tables of docs/host-scheme.md, generated from ``paccp compare`` outputs (not typed by hand).

    .venv/bin/python tools/host_scheme_table.py out/over/compare.json out/ls/compare.json ...

For each compare.json and each of its points: one row per scheme with the distance to the optimum
(share of backlogged VM-windows within 10 % of the optimum share, median relative error), the guarantee
failures over feasible windows per guaranteed class (at the sender's NIC; and, where the file was scored
with it, at every link: paccp.compare.feasible), the utilisation, the best-effort small-flow FCT p99
and, on files with a MapReduce shuffle, the mean job shuffle time; then the gaming gains. Means ± 95 % CIs
over the file's seeds, as compare.json has them.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def pm(v: dict[str, Any] | None, fmt: str, scale: float = 1.0) -> str:
    """``mean ± ci`` of a compare.json statistic, ``–`` when it has none."""
    if not v or v.get("mean") is None:
        return "–"
    s = fmt.format(v["mean"] * scale)
    if v.get("ci95") is not None and v.get("n", 0) > 1:
        s += " ± " + fmt.format(v["ci95"] * scale)
    return s


def point_table(doc: dict[str, Any], point: str) -> list[str]:
    """Markdown lines of one point of one comparison."""
    guaranteed = [p["name"] for p in doc["purchases"] if p["guarantee"] > 0]
    be = next((p["name"] for p in doc["purchases"] if p["guarantee"] == 0), None)
    head = ["scheme", "within 10 % (%)", "median err %"]
    fabric = any(
        r.get("classes", {}).get(c, {}).get("fail_share_fabric") is not None
        for r in doc["results"].get(point, {}).values()
        for c in guaranteed
    )
    head += [f"fail {c} % (feasible)" for c in guaranteed]
    head += [f"fail {c} % (every link)" for c in guaranteed] if fabric else []
    head += ["util %"]
    head += [f"{be} small FCT p99 ms"] if be else []
    shuffle = any(r.get("shuffle") for r in doc["results"].get(point, {}).values())
    head += ["shuffle ms"] if shuffle else []
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in doc["schemes"]:
        r = doc["results"].get(point, {}).get(s)
        if r is None:
            continue
        cl = r["classes"]
        row = [
            s,
            pm(r.get("distance_within"), "{:.0f}", 100),
            pm(r.get("distance_median_err"), "{:.0f}", 100),
        ]
        row += [pm(cl.get(c, {}).get("fail_share_feasible"), "{:.1f}", 100) for c in guaranteed]
        if fabric:
            row += [pm(cl.get(c, {}).get("fail_share_fabric"), "{:.1f}", 100) for c in guaranteed]
        row += [pm(r.get("utilisation"), "{:.1f}", 100)]
        if be:
            row += [pm(cl.get(be, {}).get("fct", {}).get("small", {}).get("p99_ms"), "{:.2f}")]
        if shuffle:
            row += [pm((r.get("shuffle") or {}).get("all"), "{:.2f}", 1e3)]
        lines.append("| " + " | ".join(row) + " |")
    return lines


def gaming_table(doc: dict[str, Any]) -> list[str]:
    """Markdown lines of the gaming gains (the gamer's rate with k connections over the fair share)."""
    g = doc.get("gaming")
    if not g:
        return []
    ks = [str(k) for k in g["k"]]
    lines = [
        f"Gaming ({g['where']} bottleneck of {g['rate_bps'] / 1e9:g} Gb/s, {g['vms']} VMs):",
        "",
        "| scheme | " + " | ".join(f"gain k={k}" for k in ks) + " |",
        "|" + "---|" * (len(ks) + 1),
    ]
    for s, res in g["results"].items():
        lines.append(f"| {s} | " + " | ".join(pm(res.get(k, {}).get("gain"), "{:.2f}") for k in ks) + " |")
    return lines


def render(path: Path) -> list[str]:
    """All tables of one compare.json."""
    doc = json.loads(path.read_text())
    quick = " (--quick)" if doc.get("quick") else ""
    out = [f"### {doc['name']}{quick}, seeds {doc['seeds']}", ""]
    for point in doc["points"]:
        out += [f"Point `{point}`:", "", *point_table(doc, point), ""]
    gt = gaming_table(doc)
    return out + ([*gt, ""] if gt else [])


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: host_scheme_table.py COMPARE.json ...", file=sys.stderr)
        return 2
    for a in argv:
        p = Path(a)
        if not p.is_file():
            print(f"{a}: no such file", file=sys.stderr)
            return 2
        print("\n".join(render(p)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
