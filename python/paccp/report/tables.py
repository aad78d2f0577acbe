"""The markdown tables of a comparison (``table.md``, also shown by ``paccp report``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from paccp.sim.metrics import mean_of


def _pm(v: dict[str, Any] | None, fmt: str = "{:.2f}", scale: float = 1.0) -> str:
    if not v or v.get("mean") is None:
        return "–"
    s = fmt.format(v["mean"] * scale)
    if v.get("ci95") is not None:
        s += " ± " + fmt.format(v["ci95"] * scale)
    return s


def _feasible_label(results: Any) -> str:
    """What the figures in brackets after a class's failures count over: the windows in which its host's
    NIC could carry the guarantees of its VMs, and, where the comparison was scored with it, those in
    which every link could (:mod:`paccp.compare.feasible`). ``results``: the schemes' results of a point."""
    every = any(c.get("fail_share_fabric") is not None for r in results if r for c in r["classes"].values())
    return "feasible: NIC; every link" if every else "feasible"


def _feasible_fails(c: dict[str, Any]) -> dict[str, Any] | None:
    """A class's failure share over the windows feasible at every link (compare files scored before that
    figure existed: at the NIC)."""
    return c.get("fail_share_fabric") or c.get("fail_share_feasible")


def _fails(c: dict[str, Any]) -> str:
    """A class's failure share: all its demanding windows (feasible at its NIC; at every link)."""
    s = f"{_pm(c.get('fail_share'), '{:.1f}', 100)} ({_pm(c.get('fail_share_feasible'), '{:.1f}', 100)}"
    if c.get("fail_share_fabric") is not None:
        s += f"; {_pm(c.get('fail_share_fabric'), '{:.1f}', 100)}"
    return s + ")"


def _below(r: dict[str, Any]) -> str:
    """The VMs within 10 % of their optimum share in fewer than 95 % of their windows (the issue's per-VM
    bar), mean over seeds, of the VMs scored."""
    n = r.get("distance_vms") or 0
    return f"{_pm(r.get('distance_vms_below'), '{:.1f}')} of {n}" if n else "–"


def score_rows(doc: dict[str, Any], point: str) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the main table of one point: one row per scheme."""
    classes = [p["name"] for p in doc["purchases"]]
    guaranteed = [p["name"] for p in doc["purchases"] if p["guarantee"] > 0]
    header = ["scheme"]
    label = _feasible_label(doc["results"].get(point, {}).values())
    header += [f"fail {c} % ({label})" for c in guaranteed]
    header += ["util %", "opt. within 10 % (%)", "opt. median err %", "VMs < 95 % within"]
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
        row += [_fails(cl.get(c, {})) for c in guaranteed]
        row += [_pm(r["utilisation"], "{:.1f}", 100)]
        row += [_pm(r.get("distance_within"), "{:.0f}", 100)]
        row += [_pm(r.get("distance_median_err"), "{:.0f}", 100)]
        row += [_below(r)]
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


# What the main table's column headers mean (table.md and the terminal show them; terms: docs/glossary.md).
COLUMNS = (
    "Columns: **fail C % (feasible)** = share of measurement windows in which class C wanted at least its "
    "guarantee and got less (in brackets: counting only windows where the guarantee was feasible at its "
    "host's NIC; then, where shown, at every link of the network); "
    "**util %** = utilisation of the bottleneck channels; **spare C** = the share of the spare bandwidth "
    "(above the guarantees) class C got, divided by the share its weight entitles it to (1 = on target); "
    "**got C Mb/s** = its rate while it had data to send; **paid C/h** = its price per VM-hour; "
    "**consist. C** = (got / the reference class's got) / (paid / the reference's paid), the reference "
    "being the class with the smallest weight, then guarantee; 1 = a class gets what it pays for."
)


_REPO = Path(__file__).resolve().parents[3]  # python/paccp/report/tables.py -> the checkout


def scenario_label(path: str) -> str:
    """The comparison file as a reader would pass it: relative to the checkout when it lies inside it
    (``scenarios/compare-overcommit.toml``, not the absolute path of the machine that ran it)."""
    if not path:
        return path
    try:
        return str(Path(path).resolve().relative_to(_REPO))
    except ValueError:
        return path


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
        f"Scenario `{scenario_label(doc['scenario_file'])}`, seeds {doc['seeds']}"
        + (" (--quick)" if doc.get("quick") else "")
        + f", prices in {doc['currency']} per VM-hour.\n",
        f"\n{COLUMNS}\n",
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
        f"<p class='small'>{esc(scenario_label(doc.get('scenario_file', '')))}, seeds {esc(doc.get('seeds'))}"
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


# --- the comparison in the HTML report, ordered by the question each part answers -------------------------

QUESTIONS = (
    ("guarantees", "Guarantees: does each class get what it bought?", ("guarantee.png",)),
    ("weights", "Weights: is the spare shared by the weights?", ("spare.png", "got.png")),
    ("utilisation", "Utilisation: is the capacity used?", ("utilisation.png",)),
    ("fct", "Flow completion times", ("fct.png", "shuffle.png")),
    ("price", "Price: does a class get what it pays for?", ("paid.png", "consistency.png")),
    ("gaming", "Gaming: does opening more flows pay?", ("gaming.png",)),
)


def _results(doc: dict[str, Any], point: str) -> dict[str, Any]:
    return {s: r for s, r in doc["results"].get(point, {}).items() if r is not None}


def _question_checks(doc: dict[str, Any], key: str) -> list[dict[str, Any]]:
    words = {"guarantees": ("guarantee",), "gaming": ("flows get", "flow's rate")}.get(key, ())
    return [c for c in doc.get("checks", []) if any(w in str(c.get("statement", "")) for w in words)]


def has_fct(doc: dict[str, Any]) -> bool:
    """Whether any scheme finished a flow (else there is no FCT to show)."""
    return any(
        v["fct"]["all"]["flows"] and mean_of(v["fct"]["all"].get("mean_ms")) is not None
        for res in doc["results"].values()
        for r in res.values()
        if r
        for v in r["classes"].values()
    )


def _closest_to_one(doc: dict[str, Any], point: str, key: str) -> tuple[str, float] | None:
    """The scheme whose per-class ``key`` is closest to 1 on average (|log|), and that average."""
    import math

    best: tuple[str, float] | None = None
    for s, r in _results(doc, point).items():
        vals = [mean_of(c.get(key)) for c in r["classes"].values()]
        vals2 = [v for v in vals if v is not None and v > 0]
        if not vals2:
            continue
        dev = sum(abs(math.log(v)) for v in vals2) / len(vals2)
        if best is None or dev < best[1]:
            best = (s, dev)
    return best


def _question(doc: dict[str, Any], key: str, point: str) -> tuple[str, list[list[str]], str]:
    """(verdict text, rows with a header first, ok?) of one question at one point ('' when no data)."""
    res = _results(doc, point)
    classes = [p["name"] for p in doc["purchases"]]
    if key == "guarantees":
        guaranteed = [p["name"] for p in doc["purchases"] if p["guarantee"] > 0]
        if not guaranteed:
            return "no class buys a guarantee here", [], ""
        label = _feasible_label(res.values())
        head = ["scheme", *[f"{c}: windows failed % ({label})" for c in guaranteed]]
        rows = [head]
        clean = []
        for s, r in res.items():
            cl = r["classes"]
            rows.append([s] + [_fails(cl.get(c, {})) for c in guaranteed])
            if all((mean_of(_feasible_fails(cl.get(c, {}))) or 0) == 0 for c in guaranteed):
                clean.append(s)
        text = f"no guarantee failure where the guarantee was feasible: {', '.join(clean) or 'no scheme'}"
        return text, rows, "yes" if clean else "no"
    if key == "weights":
        head = ["scheme", *[f"{c}: spare / target" for c in classes], *[f"{c}: got Mb/s" for c in classes]]
        rows = [head]
        for s, r in res.items():
            cl = r["classes"]
            rows.append(
                [s]
                + [_pm(cl.get(c, {}).get("spare_vs_target")) for c in classes]
                + [_pm(cl.get(c, {}).get("got_bps"), "{:.0f}", 1e-6) for c in classes]
            )
        best = _closest_to_one(doc, point, "spare_vs_target")
        text = f"closest to the weights' target (spare / target = 1): {best[0]}" if best else "no data"
        return text, rows, "yes" if best else ""
    if key == "utilisation":
        rows = [["scheme", "utilisation %"]]
        util = {s: mean_of(r["utilisation"]) for s, r in res.items()}
        rows += [[s, _pm(r["utilisation"], "{:.1f}", 100)] for s, r in res.items()]
        known = {s: u for s, u in util.items() if u is not None}
        if not known:
            return "no data", rows, ""
        hi, lo = max(known, key=known.__getitem__), min(known, key=known.__getitem__)
        return f"highest: {hi} ({known[hi]:.0%}); lowest: {lo} ({known[lo]:.0%})", rows, "yes"
    if key == "fct":
        if not has_fct(doc):
            return "no flow finished in this comparison (long-lived traffic): no FCT to show", [], ""
        h, fr = fct_rows(doc, point)
        rows = [h, *fr]
        hs, sr = shuffle_rows(doc, point)
        if sr:
            rows += [hs, *sr]
        fastest: dict[str, tuple[str, float]] = {}
        for s, r in res.items():
            for c, v in r["classes"].items():
                m = mean_of(v["fct"]["small"].get("p99_ms"))
                if m is not None and (c not in fastest or m < fastest[c][1]):
                    fastest[c] = (s, m)
        text = "shortest small-flow p99 FCT: " + "; ".join(
            f"{c} {s} ({m:.2f} ms)" for c, (s, m) in fastest.items()
        )
        return text, rows, "yes"
    if key == "price":
        head = ["scheme", *[f"{c}: paid {doc['currency']}/h" for c in classes]]
        head += [f"{c}: got/paid vs ref." for c in classes]
        rows = [head]
        for s, r in res.items():
            cl = r["classes"]
            rows.append(
                [s]
                + [_pm(cl.get(c, {}).get("paid_per_hour"), "{:.3f}") for c in classes]
                + [_pm(cl.get(c, {}).get("consistency")) for c in classes]
            )
        best = _closest_to_one(doc, point, "consistency")
        text = (
            f"most consistent (a class gets in proportion to what it pays, 1 = consistent): {best[0]}"
            if best
            else "no data"
        )
        return text, rows, "yes" if best else ""
    return "", [], ""


def html_report(
    doc: dict[str, Any],
    table: Callable[[Sequence[str], Sequence[Sequence[str]]], str],
    esc: Callable[[Any], str],
    verdict: Callable[[Sequence[dict[str, Any]]], str],
    checks_table: Callable[[Sequence[dict[str, Any]]], str],
    figure: Callable[[str], str],
) -> str:
    """The comparison for ``paccp report``: one part per question (guarantees, weights, utilisation,
    FCT, price, gaming), each with a one-line verdict per point, its table and its plots (only those
    with data). ``figure(name)`` is the captioned image of a PNG of the comparison ('' if absent)."""
    seeds = ", ".join(map(str, doc.get("seeds", [])))
    parts = [
        f"<p class='small'>{esc(scenario_label(doc.get('scenario_file', '')))}, seeds {esc(seeds)}"
        f"{' (--quick)' if doc.get('quick') else ''}; schemes {esc(', '.join(doc.get('schemes', [])))};"
        f" prices in {esc(doc.get('currency'))} per VM-hour</p>"
    ]
    not_run = doc.get("not_run") or {}
    if not_run:
        items = "".join(
            f"<li>{esc(s)} at {esc(p)}: {esc(why)}</li>"
            for s, per in not_run.items()
            for p, why in per.items()
        )
        parts.append(f"<p>Not run:</p><ul>{items}</ul>")
    for key, heading, pngs in QUESTIONS:
        parts.append(f"<h3>{esc(heading)}</h3>")
        checks = _question_checks(doc, key)
        if key == "gaming":
            g = doc.get("gaming")
            h, rows = gaming_rows(doc)
            if not rows or not g:
                parts.append("<p class='small'>no gaming runs in this comparison</p>")
                continue
            parts.append(
                f"<p class='small'>{g['vms']} VMs on one {g['rate_bps'] / 1e9:g} Gb/s {esc(g['where'])} "
                f"bottleneck, each buying G = {g['guarantee_bps'] / 1e6:g} Mb/s, W = {g['weight']:g}; gain = "
                "the gamer's rate with k flows / a VM's mean rate when all have one flow</p>"
            )
            if checks:
                parts.append(verdict(checks))
            parts.append(table(h, [[esc(c) for c in r] for r in rows]))
        else:
            if checks:
                parts.append(verdict(checks))
            for p in doc["points"]:
                text, rows, ok = _question(doc, key, p)
                mark = {"yes": "✓", "no": "✗"}.get(ok, "–")
                label = f"{p}: " if len(doc["points"]) > 1 or p else ""
                parts.append(f"<p class='verdict {ok or 'small'}'>{mark} {esc(label + text)}</p>")
                if rows:
                    parts.append(table(rows[0], [[esc(c) for c in r] for r in rows[1:]]))
        if checks:
            parts.append(checks_table(checks))
        if key == "fct" and not has_fct(doc):
            continue
        parts += [f for f in (figure(n) for n in pngs) if f]
    return "\n".join(parts)
