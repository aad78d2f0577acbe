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


def _img(path: Path) -> str:
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    name = _esc(path.name)
    return (
        f'<figure><img alt="{name}" src="data:image/png;base64,{data}">'
        f'<figcaption class="small">{name}</figcaption></figure>'
    )


def _checks(checks: Sequence[Mapping[str, Any]]) -> str:
    rows = []
    for c in checks:
        holds = c.get("holds")
        cell = "n/a"
        if holds is True:
            cell = '<span class="yes">yes</span>'
        elif holds is False:
            cell = '<span class="no">no</span>'
        rows.append([_esc(c.get("statement", "")), _esc(c.get("paper", "")), _esc(c.get("ours", "")), cell])
    return _table(["statement", "paper", "ours", "holds?"], rows)


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


def _generic(summary: Mapping[str, Any]) -> str:
    rows = []
    for k, v in sorted(summary.items()):
        text = json.dumps(v, sort_keys=True) if isinstance(v, dict | list) else str(v)
        if len(text) > 400:
            text = text[:400] + " …"
        rows.append([_esc(k), _esc(text)])
    return _table(["key", "value"], rows)


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


def section(summary_path: Path, root: Path) -> str:
    """HTML of one summary.json and the PNGs beside it (:class:`Unreadable` if it cannot be used)."""
    summary = _load_summary(summary_path)
    rel = summary_path.parent.relative_to(root)
    title = summary.get("title") or summary.get("name") or summary.get("experiment") or str(rel)
    parts = [f"<h2>{_esc(title)}</h2><p class='small'>{_esc(rel) if str(rel) != '.' else '(top level)'}</p>"]
    if isinstance(summary.get("warnings"), list):
        parts += [f"<p class='no'>warning: {_esc(w)}</p>" for w in summary["warnings"]]
    if summary.get("load_definition"):
        parts.append(f"<p class='small'>{_esc(summary['load_definition'])}</p>")
    if isinstance(summary.get("checks"), list):
        parts.append(_checks(summary["checks"]))
    if summary.get("kind") == "experiment" and isinstance(summary.get("loads"), list):
        parts.append(_workload_loads(summary["loads"]))
    elif summary.get("kind") == "sweep" and isinstance(summary.get("points"), list):
        parts.append(_sweep_points(summary["points"]))
    elif summary.get("kind") == "compare":  # paccp compare (paccp.compare)
        from paccp.report.tables import html_tables

        parts.append(html_tables(summary, _table, _esc))
    else:
        parts.append(_generic(summary))
    for png in sorted(summary_path.parent.glob("*.png")):
        try:
            parts.append(_img(png))
        except OSError as exc:
            parts.append(f"<p class='no'>{_esc(png.name)}: unreadable ({_esc(exc.strerror)})</p>")
    return "\n".join(parts)


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
    sections: list[str] = []
    shown: list[Path] = []
    skipped: list[tuple[Path, str]] = []
    for p in summaries:
        try:
            sections.append(section(p, directory))
            shown.append(p)
        except Unreadable as exc:
            skipped.append((p, str(exc)))
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            skipped.append((p, f"unexpected content ({type(exc).__name__}: {str(exc)[:80]})"))
    toc = "".join(f"<li>{_esc(p.parent.relative_to(directory))}</li>" for p in shown)
    if skipped:
        items = "".join(f"<li>{_esc(p.relative_to(directory))}: {_esc(why)}</li>" for p, why in skipped)
        sections.insert(0, f"<h2>Skipped</h2><p class='no'>cannot read:</p><ul>{items}</ul>")
    doc = (
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>PACCP report</title>"
        f"<style>{_CSS}</style></head><body><h1>PACCP report: {_esc(directory.name)}</h1>"
        f"<ul class='small'>{toc}</ul>{chr(10).join(sections)}</body></html>\n"
    )
    out = directory / "report.html"
    write_text_atomic(out, doc)
    return out, skipped
