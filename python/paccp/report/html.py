"""``paccp report DIR``: one self-contained ``report.html`` for every run, sweep and experiment under DIR.

The report walks DIR for ``summary.json`` files (each one a section), embeds the PNGs next to each summary
as base64 ``data:`` URIs (so the file can be mailed or archived alone), and renders tables from the
summaries: the paper-comparison ``checks`` and ``table.md`` of experiments, the per-load metrics of workload
experiments, the points of sweeps, and a generic key/value view of anything else.
"""

from __future__ import annotations

import base64
import html
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from paccp.errors import UserError

MAX_SUMMARY_BYTES = 200 * 10**6

_CSS = """
body{font-family:system-ui,sans-serif;margin:2em;max-width:1400px;color:#222}
h1{font-size:1.6em}h2{font-size:1.25em;border-bottom:1px solid #ccc;padding-top:1em}
table{border-collapse:collapse;margin:.6em 0;font-size:.85em}
td,th{border:1px solid #ccc;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#f2f2f2}.no{color:#b00;font-weight:bold}.yes{color:#070}
img{max-width:100%;border:1px solid #eee;margin:.4em 0}.small{color:#666;font-size:.85em}
figure{margin:1em 0;max-width:900px}figcaption{font-size:.9em;color:#333}
.verdict{font-weight:bold;margin:.4em 0}td table{margin:0;font-size:1em}
details{margin:.6em 0}summary{cursor:pointer;color:#555}
"""


def _esc(x: Any) -> str:
    return html.escape(str(x))


def _num(x: Any) -> str:
    if x is None:
        return "–"
    if isinstance(x, float):
        return f"{x:.3g}"
    return _esc(x)


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    head = "".join(f"<th>{_esc(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _img(path: Path, caption: str) -> str:
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return (
        f'<figure><img alt="{_esc(caption)}" src="data:image/png;base64,{data}">'
        f"<figcaption>{_esc(caption)}</figcaption></figure>"
    )


def _verdict(ok: bool | None, text: str) -> str:
    cls = {True: "yes", False: "no", None: "small"}[ok]
    mark = {True: "✓", False: "✗", None: "–"}[ok]
    return f"<p class='verdict {cls}'>{mark} {_esc(text)}</p>"


def _checks(checks: Sequence[Mapping[str, Any]]) -> str:
    rows = []
    for c in checks:
        holds = c.get("holds")
        cell = "n/a"
        if holds is True:
            cell = '<span class="yes">yes</span>'
        elif holds is False:
            cell = '<span class="no">no</span>'
        rows.append([_esc(c.get("statement", "")), _cell(c.get("paper", "")), _cell(c.get("ours", "")), cell])
    return _table(["statement", "paper", "ours", "holds?"], rows)


def checks_verdict(checks: Sequence[Mapping[str, Any]]) -> str:
    """One line: how many checks hold, and the first that does not."""
    judged = [c for c in checks if c.get("holds") is not None]
    failed = [c for c in judged if c.get("holds") is False]
    na = len(checks) - len(judged)
    tail = f" ({na} could not be judged in this run)" if na else ""
    if not checks:
        return _verdict(None, "no checks")
    if not failed:
        return _verdict(True, f"all {len(judged)} checks hold{tail}")
    first = str(failed[0].get("statement", ""))
    more = f" and {len(failed) - 1} more" if len(failed) > 1 else ""
    return _verdict(False, f"{len(failed)} of {len(judged)} checks fail{tail}: {first}{more}")


def _rate(bps: Any) -> str:
    from paccp.units import format_rate

    if bps is None or isinstance(bps, bool) or not isinstance(bps, int | float):
        return "–"
    return format_rate(float(bps))


def _ms(ns: Any) -> str:
    return "–" if ns is None else f"{float(ns) / 1e6:.3g} ms"


def _longlived(summary: Mapping[str, Any], tolerance: float) -> str:
    """fig4a/fig4c/fig5: per class the paper's rate, ours and the optimum; the verdict."""
    rows, within = [], 0
    classes = summary["classes"]
    for label, c in classes.items():
        ratio = c["rate_bps"] / c["paper_bps"] if c.get("paper_bps") else None
        ok = ratio is not None and abs(ratio - 1) <= tolerance
        within += ok
        below = c.get("time_below_theta")
        rows.append(
            [
                _esc(label),
                _rate(c.get("paper_bps")),
                _rate(c.get("rate_bps")),
                _rate(c.get("optimal_bps")),
                f"<span class='{'yes' if ok else 'no'}'>{_num(ratio)}</span>",
                _num(c["rate_bps"] / c["optimal_bps"] if c.get("optimal_bps") else None),
                _rate(c.get("theta_bps")) if c.get("theta_bps") else "–",
                "–" if below is None else f"{below:.1%}",
            ]
        )
    head = [
        "class",
        "paper",
        "ours",
        "optimum",
        "ours / paper",
        "ours / optimum",
        "theta",
        "time below theta",
    ]
    nu = summary.get("normalized_utility")
    text = f"{within} of {len(classes)} classes within {tolerance:.0%} of the paper's rate per flow" + (
        f"; normalised utility {nu:.4f} of the optimum's (1 = optimal)" if isinstance(nu, float) else ""
    )
    return _verdict(within == len(classes), text) + _table(head, rows)


def _run(summary: Mapping[str, Any]) -> str:
    """A run directory: per class the delivered rate per flow (units), guarantee, optimum, FCTs."""
    classes = summary.get("classes") or {}
    rows = []
    for label, c in classes.items():
        o = c.get("optimal_bps")
        dl = c.get("deadline_meet_rate")
        rows.append(
            [
                _esc(label),
                _num(c.get("flows")),
                _num(c.get("finished")),
                _rate(c.get("mean_rate_bps")),
                _rate(c.get("theta_bps")) if c.get("theta_bps") else "–",
                _rate(o) if o else "–",
                _num(c["mean_rate_bps"] / o) if o and c.get("mean_rate_bps") is not None else "–",
                _ms(c.get("mean_fct_ns")),
                _ms(c.get("p99_fct_ns")),
                "–" if dl is None else f"{dl:.0%}",
            ]
        )
    head = ["class", "flows", "finished", "rate per flow", "theta per flow", "optimum per flow"]
    head += ["rate / optimum", "mean FCT", "p99 FCT", "deadlines met"]
    keep = [k for k in range(len(head)) if k < 4 or any(r[k] != "–" for r in rows)]  # no empty column
    head, rows = [head[k] for k in keep], [[r[k] for k in keep] for r in rows]
    dur, warm = summary.get("duration_ns"), summary.get("warmup_ns")
    line = f"{summary.get('n_flows', '?')} flows, {summary.get('n_finished', '?')} finished"
    if isinstance(dur, int) and isinstance(warm, int):
        line += f"; {dur / 1e6:g} ms simulated, rates measured after the {warm / 1e6:g} ms warm-up"
    if summary.get("n_finished") == 0:
        line += " (long-lived flows run to the end: no FCT)"
    return f"<p>{_esc(line)}</p>" + _table(head, rows)


def _is_scalar(v: Any) -> bool:
    return v is None or isinstance(v, str | int | float | bool)


def _cell(v: Any, depth: int = 0) -> str:
    """Any JSON value as HTML: scalars as text, lists of scalars joined, objects and lists of objects as
    nested tables; never raw JSON."""
    if _is_scalar(v):
        return _num(v)
    if isinstance(v, list):
        if all(_is_scalar(x) for x in v):
            shown = ", ".join(_num(x) for x in v[:40])
            return shown + (f", … ({len(v)} in all)" if len(v) > 40 else "")
        if depth >= 3:
            return _esc(f"({len(v)} entries)")
        if all(isinstance(x, dict) for x in v):
            cols: list[str] = []
            for x in v:
                cols += [k for k in x if k not in cols]
            rows = [[_cell(x.get(k), depth + 1) for k in cols] for x in v[:100]]
            more = f"<p class='small'>first 100 of {len(v)}</p>" if len(v) > 100 else ""
            return _table(cols, rows) + more
        return "<br>".join(_cell(x, depth + 1) for x in v[:40])
    if isinstance(v, dict):
        if depth >= 3:
            return _esc(f"({len(v)} entries)")
        return _table(["key", "value"], [[_esc(k), _cell(x, depth + 1)] for k, x in v.items()])
    return _esc(v)


def _generic(summary: Mapping[str, Any], skip: Sequence[str] = ()) -> str:
    rows = [[_esc(k), _cell(v)] for k, v in sorted(summary.items()) if k not in skip]
    return _table(["key", "value"], rows) if rows else ""


def _details(title: str, body: str) -> str:
    return f"<details><summary>{_esc(title)}</summary>{body}</details>" if body else ""


def _workload_loads(loads: Sequence[Mapping[str, Any]]) -> str:
    rows = []
    for r in loads:
        keys = " ".join(f"{k}={r[k]}" for k in ("workload", "load", "rcos") if k in r)
        for cos, v in sorted(r.get("cos", {}).items()):
            norm = v.get("fct_norm_to_be", {})
            meet = v.get("deadline_meet_rate", {})
            rows.append(
                [
                    _esc(keys),
                    _esc(cos.upper()),
                    _num(v.get("flows")),
                    _num(v.get("unfinished")),
                    *(_num(norm.get(g)) for g in ("overall", "small", "medium", "big")),
                    *(_num(meet.get(g)) for g in ("overall", "small", "medium", "big")),
                    _num(v.get("mean_fct_ms", {}).get("overall")),
                    _num(v.get("p99_fct_ms", {}).get("overall")),
                ]
            )
    header = ["point", "CoS", "flows", "unfinished"]
    header += [f"FCT/BE {g}" for g in ("all", "small", "medium", "big")]
    header += [f"meet {g}" for g in ("all", "small", "medium", "big")]
    header += ["mean FCT ms", "p99 FCT ms"]
    return _table(header, rows)


def _sweep_points(points: Sequence[Mapping[str, Any]]) -> str:
    from paccp.sim.metrics import headline

    flat = [headline(p) for p in points]
    cols: list[str] = []
    for r in flat:
        cols += [c for c in r if c not in cols]
    return _table(cols, [[_num(r.get(c)) for c in cols] for r in flat])


class Unreadable(Exception):
    """A summary.json the report cannot use (skipped and listed)."""


def _load_summary(path: Path) -> dict[str, Any]:
    try:
        data = path.read_bytes()
        if len(data) > MAX_SUMMARY_BYTES:
            raise Unreadable(f"larger than {MAX_SUMMARY_BYTES // 10**6} MB")
        summary = json.loads(data.decode("utf-8"))
    except OSError as exc:
        raise Unreadable(exc.strerror or type(exc).__name__) from None
    except UnicodeDecodeError:
        raise Unreadable("not UTF-8 text") from None
    except (json.JSONDecodeError, RecursionError, ValueError) as exc:
        raise Unreadable(f"not valid JSON ({str(exc)[:100]})") from None
    if not isinstance(summary, dict):
        raise Unreadable(f"a JSON {type(summary).__name__}, not an object")
    return summary


# Section order: what a reader came for first (experiments), then comparisons, sweeps and runs.
_ORDER = {"experiment": 0, "compare": 1, "sweep": 2, "run": 3, "other": 4}


def kind_of(summary: Mapping[str, Any]) -> tuple[str, str]:
    """(group, kind): group orders the sections (:data:`_ORDER`); kind picks the renderer and captions
    (an experiment's id, ``compare``, ``sweep``, ``run`` or ``other``)."""
    if summary.get("kind") == "compare":
        return "compare", "compare"
    if summary.get("kind") == "sweep":
        return "sweep", "sweep"
    exp = summary.get("experiment")
    if isinstance(exp, str) or isinstance(summary.get("checks"), list) or summary.get("kind") == "experiment":
        return "experiment", exp if isinstance(exp, str) else str(summary.get("id", "experiment"))
    if "n_flows" in summary and isinstance(summary.get("classes"), dict):
        return "run", "run"
    return "other", "other"


def _pngs(directory: Path) -> list[Path]:
    """The PNGs of a section: in its directory and in subdirectories without their own summary.json."""
    out = sorted(directory.glob("*.png"))
    for sub in sorted(p for p in directory.iterdir() if p.is_dir() and p.name != "cache"):
        if not (sub / "summary.json").exists():
            out += [p for p in _pngs(sub)]
    return out


def _tolerance(directory: Path) -> float:
    try:
        t = json.loads((directory / "details.json").read_text(encoding="utf-8")).get("tolerance")
        return float(t) if isinstance(t, int | float) else 0.10
    except (OSError, ValueError, AttributeError):
        return 0.10


def section(summary_path: Path, root: Path, anchor: str = "") -> str:
    """HTML of one summary.json and the PNGs beside it (:class:`Unreadable` if it cannot be used).

    An experiment opens with its verdict and its paper / ours / optimum table or its checks, then its
    plots, each captioned with what it shows; everything else in its summary is folded away below.
    """
    from paccp.report.captions import caption

    summary = _load_summary(summary_path)
    rel = summary_path.parent.relative_to(root)
    group, kind = kind_of(summary)
    title = summary.get("title") or summary.get("name") or summary.get("experiment") or str(rel)
    if group == "run":
        title = f"run: {rel}" if str(rel) != "." else "run"
    where = _esc(rel) if str(rel) != "." else "(top level)"
    parts = [f"<h2 id='{_esc(anchor)}'>{_esc(title)}</h2><p class='small'>{where}</p>"]
    if isinstance(summary.get("warnings"), list):
        parts += [f"<p class='no'>warning: {_esc(w)}</p>" for w in summary["warnings"]]
    if summary.get("load_definition"):
        parts.append(f"<p class='small'>{_esc(summary['load_definition'])}</p>")
    shown: list[str] = ["title", "warnings", "load_definition", "experiment", "kind"]
    done: set[str] = set()  # PNGs already placed
    classes = summary.get("classes")
    if group == "compare":
        from paccp.report.captions import compare_pngs
        from paccp.report.tables import html_report

        def figure(name: str) -> str:
            png = summary_path.parent / name
            if not png.is_file():
                return ""
            return _img(png, caption(kind, png.relative_to(summary_path.parent), summary))

        parts.append(html_report(summary, _table, _esc, checks_verdict, _checks, figure))
        shown += list(summary)
        done = compare_pngs()
    elif group == "run":
        parts.append(_run(summary))
        shown += ["classes", "n_flows", "n_finished", "duration_ns", "warmup_ns"]
    else:
        if (
            isinstance(classes, dict)
            and classes
            and all(isinstance(c, dict) and "paper_bps" in c for c in classes.values())
        ):
            parts.append(_longlived(summary, _tolerance(summary_path.parent)))
            shown += ["classes", "normalized_utility"]
        if isinstance(summary.get("checks"), list):
            parts.append(checks_verdict(summary["checks"]))
            parts.append(_checks(summary["checks"]))
            shown.append("checks")
        if summary.get("kind") == "experiment" and isinstance(summary.get("loads"), list):
            parts.append(_workload_loads(summary["loads"]))
            shown.append("loads")
        elif group == "sweep" and isinstance(summary.get("points"), list):
            parts.append(_sweep_points(summary["points"]))
            shown.append("points")
    for png in _pngs(summary_path.parent):
        if png.name in done and png.parent == summary_path.parent:
            continue
        try:
            parts.append(_img(png, caption(kind, png.relative_to(summary_path.parent), summary)))
        except OSError as exc:
            parts.append(f"<p class='no'>{_esc(png.name)}: unreadable ({_esc(exc.strerror)})</p>")
    rest = _generic(summary, skip=shown)
    if group == "other":
        parts.append(rest)
    else:
        parts.append(_details("Everything else in summary.json", rest))
    return "\n".join(parts)


def _toc_label(p: Path, root: Path) -> str:
    rel = p.parent.relative_to(root)
    if str(rel) != ".":
        return str(rel)
    try:
        s = _load_summary(p)
        return str(s.get("title") or s.get("name") or "(top level)")
    except Unreadable:
        return "(top level)"


def write_report(directory: Path) -> tuple[Path, list[tuple[Path, str]]]:
    """Write ``DIR/report.html`` covering every summary.json under DIR.

    Returns its path and the summaries skipped (path, reason): one that cannot be read or rendered is
    listed in the report and returned, and never stops the others.
    """
    from paccp.common.outdir import write_text_atomic

    if not directory.is_dir():
        raise UserError(f"{directory}: no such directory")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise UserError(f"{directory}: not writable (report.html is written there)")
    summaries = sorted(
        p for p in directory.rglob("summary.json") if "cache" not in p.relative_to(directory).parts
    )
    if not summaries:
        raise UserError(
            f"{directory}: no summary.json found (run paccp run/reproduce/sweep with --out there)"
        )

    def order(p: Path) -> tuple[int, int, str]:
        try:
            group = kind_of(_load_summary(p))[0]
        except Unreadable:
            group = "other"
        return _ORDER[group], len(p.relative_to(directory).parts), str(p)

    summaries.sort(key=order)
    sections: list[str] = []
    shown: list[tuple[Path, str]] = []
    skipped: list[tuple[Path, str]] = []
    for k, p in enumerate(summaries):
        try:
            sections.append(section(p, directory, anchor=f"s{k}"))
            shown.append((p, f"s{k}"))
        except Unreadable as exc:
            skipped.append((p, str(exc)))
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            skipped.append((p, f"unexpected content ({type(exc).__name__}: {str(exc)[:80]})"))
    toc = "".join(f"<li><a href='#{a}'>{_esc(_toc_label(p, directory))}</a></li>" for p, a in shown)
    if skipped:
        items = "".join(f"<li>{_esc(p.relative_to(directory))}: {_esc(why)}</li>" for p, why in skipped)
        sections.insert(0, f"<h2>Skipped</h2><p class='no'>cannot read:</p><ul>{items}</ul>")
    glossary = (
        "<p class='small'>Terms (BE, DS, MRG, theta, omega, VBP, FBP, ...): docs/glossary.md in the PACCP "
        "repository. Experiments come first, then comparisons, sweeps and single runs.</p>"
    )
    doc = (
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>PACCP report</title>"
        f"<style>{_CSS}</style></head><body><h1>PACCP report: {_esc(directory.name)}</h1>"
        f"{glossary}<ul class='small'>{toc}</ul>{chr(10).join(sections)}</body></html>\n"
    )
    out = directory / "report.html"
    write_text_atomic(out, doc)
    return out, skipped
