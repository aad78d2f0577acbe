"""The markdown tables of a comparison (``table.md``, also shown by ``paccp report``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any


def _pm(v: dict[str, Any] | None, fmt: str = "{:.2f}", scale: float = 1.0) -> str:
    if not v or v.get("mean") is None:
        return "–"
    s = fmt.format(v["mean"] * scale)
    if v.get("ci95") is not None:
        s += " ± " + fmt.format(v["ci95"] * scale)
    return s


def score_rows(doc: dict[str, Any], point: str) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the main table of one point: one row per scheme."""
    classes = [p["name"] for p in doc["purchases"]]
    guaranteed = [p["name"] for p in doc["purchases"] if p["guarantee"] > 0]
    header = ["scheme"]
    header += [f"fail {c} % (feasible)" for c in guaranteed]
    header += ["util %", "opt. within 10 % (%)", "opt. median err %"]
    header += [f"spare {c}" for c in classes]
    header += [f"got {c} Mb/s" for c in classes]
    header += [f"paid {c}/h" for c in classes]
    header += [f"consist. {c}" for c in classes]
    rows = []
    for s in doc["schemes"]:
        r = doc["results"].get(point, {}).get(s)
        if r is None:
            why = doc.get("not_run", {}).get(s, {}).get(point, "not run")
            rows.append([s, f"not run: {why}"] + [""] * (len(header) - 2))
            continue
        cl = r["classes"]
        row = [s]
        row += [
            f"{_pm(cl.get(c, {}).get('fail_share'), '{:.1f}', 100)} "
            f"({_pm(cl.get(c, {}).get('fail_share_feasible'), '{:.1f}', 100)})"
            for c in guaranteed
        ]
        row += [_pm(r["utilisation"], "{:.1f}", 100)]
        row += [_pm(r.get("distance_within"), "{:.0f}", 100)]
        row += [_pm(r.get("distance_median_err"), "{:.0f}", 100)]
        row += [_pm(cl.get(c, {}).get("spare_vs_target")) for c in classes]
        row += [_pm(cl.get(c, {}).get("got_bps"), "{:.0f}", 1e-6) for c in classes]
        row += [_pm(cl.get(c, {}).get("paid_per_hour"), "{:.3f}") for c in classes]
        row += [_pm(cl.get(c, {}).get("consistency")) for c in classes]
        rows.append(row)
    return header, rows


def fct_rows(doc: dict[str, Any], point: str) -> tuple[list[str], list[list[str]]]:
    """FCT mean / p99 (ms) per class and size class, one row per scheme and class."""
    header = ["scheme", "class", "small mean / p99", "medium mean / p99", "big mean / p99", "unfinished"]
    rows = []
    for s in doc["schemes"]:
        r = doc["results"].get(point, {}).get(s)
        if r is None:
            continue
        for c, v in r["classes"].items():
            f = v["fct"]
            if not f["all"]["flows"]:
                continue
            cells = [
                f"{_pm(f[g]['mean_ms'], '{:.2f}')} / {_pm(f[g]['p99_ms'], '{:.2f}')}"
                for g in ("small", "medium", "big")
            ]
            rows.append([s, c, *cells, str(f["all"]["unfinished"])])
    return header, rows


def shuffle_rows(doc: dict[str, Any], point: str) -> tuple[list[str], list[list[str]]]:
    """MapReduce: mean job shuffle time (ms) per job class, one row per scheme."""
    header = ["scheme", "all jobs", "small", "medium", "large", "unfinished jobs"]
    rows = []
    for s in doc["schemes"]:
        r = doc["results"].get(point, {}).get(s)
        if r is None or not r.get("shuffle"):
            continue
        sh = r["shuffle"]
        cells = [_pm(sh[c], "{:.1f}", 1e3) for c in ("all", "small", "medium", "large")]
        rows.append([s, *cells, str(sh["jobs_unfinished"])])
    return (header, rows) if rows else ([], [])


def gaming_rows(doc: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """Gaming: the gamer's rate with k flows / a VM's mean rate when all have one flow, per scheme."""
    g = doc.get("gaming")
    if not g:
        return [], []
    ks = [str(k) for k in g["k"]]
    header = ["scheme", *[f"gain k={k}" for k in ks], *[f"rate k={k} Mb/s" for k in ks], "fair share Mb/s"]
    rows = []
    for s in doc["schemes"]:
        r = g["results"].get(s)
        if r is None:
            continue
        rows.append(
            [s]
            + [_pm(r[k]["gain"]) for k in ks]
            + [_pm(r[k]["rate_bps"], "{:.0f}", 1e-6) for k in ks]
            + [f"{g['rate_bps'] / g['vms'] / 1e6:.0f}"]
        )
    return header, rows


def _md(header: list[str], rows: list[list[str]]) -> str:
    if not header:
        return ""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def markdown(doc: dict[str, Any]) -> str:
    """All tables of a comparison as markdown."""
    parts = [
        f"# {doc['title']}\n",
        f"Scenario `{doc['scenario_file']}`, seeds {doc['seeds']}"
        + (" (--quick)" if doc.get("quick") else "")
        + f", prices in {doc['currency']} per VM-hour.\n",
    ]
    for p in doc["points"]:
        parts.append(f"\n## {p}\n")
        parts.append(_md(*score_rows(doc, p)))
        h, rows = fct_rows(doc, p)
        if rows:
            parts.append("\nFCT (ms):\n\n" + _md(h, rows))
        h, rows = shuffle_rows(doc, p)
        if rows:
            parts.append("\nJob shuffle time (ms, mean per job class):\n\n" + _md(h, rows))
    h, rows = gaming_rows(doc)
    if rows:
        g = doc["gaming"]
        parts.append(
            f"\n## Gaming ({g['vms']} VMs on one {g['rate_bps'] / 1e9:g} Gb/s {g['where']} bottleneck, "
            f"each buying G = {g['guarantee_bps'] / 1e6:g} Mb/s, W = {g['weight']:g})\n\n" + _md(h, rows)
        )
    return "".join(parts)


def html_tables(
    doc: dict[str, Any],
    table: Callable[[Sequence[str], Sequence[Sequence[str]]], str],
    esc: Callable[[Any], str],
) -> str:
    """The comparison's tables for ``paccp report`` (its own table and escaping helpers)."""
    parts = [
        f"<p class='small'>{esc(doc.get('scenario_file', ''))}, seeds {esc(doc.get('seeds'))}"
        f"{' (--quick)' if doc.get('quick') else ''}, prices in {esc(doc.get('currency'))} per VM-hour</p>"
    ]
    for p in doc["points"]:
        parts.append(f"<h3>{esc(p)}</h3>")
        h, rows = score_rows(doc, p)
        parts.append(table(h, [[esc(c) for c in r] for r in rows]))
        h, rows = fct_rows(doc, p)
        if rows:
            parts.append("<p class='small'>FCT (ms)</p>" + table(h, [[esc(c) for c in r] for r in rows]))
        h, rows = shuffle_rows(doc, p)
        if rows:
            parts.append(
                "<p class='small'>job shuffle time (ms)</p>" + table(h, [[esc(c) for c in r] for r in rows])
            )
    h, rows = gaming_rows(doc)
    if rows:
        parts.append("<h3>Gaming</h3>" + table(h, [[esc(c) for c in r] for r in rows]))
    return "\n".join(parts)
