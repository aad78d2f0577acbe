"""The results pages of the documentation site, generated from one reproduction (``paccp docs results``).

Input: a directory written by ``paccp reproduce all`` (``DIR/<job>/summary.json``, the PNGs beside it and
``DIR/reproduce-all.json``), or the small copy of it this module keeps under ``docs/results/data``. Output:
``docs/results/index.md`` (the reproduction's commit, date, wall time, load, and every job with its
verdict, the missing ones listed as missing) and one page per job: the paper's figure vs ours vs the
optimum with the tolerance, or the checks (statement, paper, ours, holds?), or the comparison's tables,
then the plots with their captions. Nothing is typed by hand: rerun the command after a reproduction.

The data copy holds ``summary.json``, ``details.json`` and the PNGs only (no Parquet, no caches), so the
site builds from the repository without running anything; the pages are byte-identical for the same
input (sorted keys and paths, no build time).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from paccp.errors import UserError
from paccp.report.captions import caption
from paccp.report.html import kind_of
from paccp.report.tables import markdown as compare_markdown
from paccp.units import format_rate

RECORD = "reproduce-all.json"
DATA = "data"
_KEEP = ("summary.json", "details.json")
_HOLDS = {True: "yes", False: "**no**", None: "n/a"}


def _md_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    def cell(v: Any) -> str:
        s = v if isinstance(v, str) else json.dumps(v, sort_keys=True)
        return " ".join(s.split()).replace("|", "\\|")

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(c) for c in r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def _rate(bps: Any) -> str:
    return format_rate(float(bps)) if isinstance(bps, int | float) and not isinstance(bps, bool) else "–"


def _ratio(a: Any, b: Any) -> str:
    ok = isinstance(a, int | float) and isinstance(b, int | float) and b
    return f"{a / b:.2f}" if ok else "–"


def checks_summary(checks: Sequence[Mapping[str, Any]]) -> tuple[bool | None, str]:
    """(all hold?, one line): how many checks hold; None when none could be judged."""
    judged = [c for c in checks if c.get("holds") is not None]
    failed = [c for c in judged if c.get("holds") is False]
    if not judged:
        return None, "no check could be judged"
    na = len(checks) - len(judged)
    tail = f", {na} not judged" if na else ""
    if failed:
        first = " ".join(str(failed[0].get("statement", "")).split())
        more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
        return False, f"{len(judged) - len(failed)} of {len(judged)} checks hold{tail}; not: {first}{more}"
    return True, f"all {len(judged)} checks hold{tail}"


def longlived_summary(summary: Mapping[str, Any], tolerance: float) -> tuple[bool, str, str]:
    """(all within tolerance?, one line, table): per class the paper's rate, ours and the optimum."""
    rows, within = [], 0
    classes = summary["classes"]
    for label, c in classes.items():
        paper, ours, best = c.get("paper_bps"), c.get("rate_bps"), c.get("optimal_bps")
        ok = isinstance(paper, int | float) and paper > 0 and abs(ours / paper - 1) <= tolerance
        within += ok
        rows.append([label, _rate(paper), _rate(ours), _rate(best), _ratio(ours, paper), _ratio(ours, best)])
        rows[-1].append("yes" if ok else "**no**")
    head = ["class", "paper", "ours", "optimum", "ours / paper", "ours / optimum", f"within {tolerance:.0%}?"]
    line = f"{within} of {len(classes)} classes within {tolerance:.0%} of the paper's rate per flow"
    nu = summary.get("normalized_utility")
    if isinstance(nu, float):
        line += f"; normalised utility {nu:.4f} of the optimum's"
    return within == len(classes), line, _md_table(head, rows)


def _tolerance(d: Path) -> float:
    try:
        t = json.loads((d / "details.json").read_text(encoding="utf-8")).get("tolerance")
    except (OSError, ValueError, AttributeError):
        return 0.10
    return float(t) if isinstance(t, int | float) else 0.10


def _pngs(d: Path) -> list[Path]:
    """The plots of a job: the figures in its directory; only when it has none, those of its
    sub-directories (one per variant, e.g. mptcp-bg's tcp/ and udp/), not every run's own plots."""
    top = sorted(d.glob("*.png"))
    if top:
        return top
    out: list[Path] = []
    for sub in sorted(p for p in d.iterdir() if p.is_dir() and not p.name.startswith("cache")):
        out += sorted(sub.glob("*.png"))
    return out


def copy_data(src: Path, data: Path, jobs: Sequence[str]) -> None:
    """Copy what the pages need (summary/details JSON, PNGs, the record) from a reproduction to ``data``."""
    if data.exists():
        shutil.rmtree(data)
    data.mkdir(parents=True)
    shutil.copy2(src / RECORD, data / RECORD)
    for job in jobs:
        d = src / job
        if not (d / "summary.json").is_file():
            continue
        for name in _KEEP:
            if (d / name).is_file():
                (data / job).mkdir(parents=True, exist_ok=True)
                shutil.copy2(d / name, data / job / name)
        for png in _pngs(d):
            dest = data / job / png.relative_to(d)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(png, dest)


def _checks_section(checks: Sequence[Mapping[str, Any]], line: str) -> list[str]:
    """``line`` (theirs from :func:`checks_summary`) and the table of the checks (statement, paper,
    ours, holds?)."""
    rows = [
        [c.get("statement", ""), c.get("paper", ""), c.get("ours", ""), _HOLDS[c.get("holds")]]
        for c in checks
    ]
    return [f"**{line}.**\n", _md_table(["statement", "paper", "ours", "holds?"], rows)]


def job_page(job: str, d: Path, rel_data: str) -> tuple[str, bool | None, str]:
    """(markdown, verdict, one line) of one job from ``d/summary.json``."""
    summary = json.loads((d / "summary.json").read_text(encoding="utf-8"))
    group, kind = kind_of(summary)
    title = summary.get("title") or summary.get("experiment") or job
    parts = [f"# {job}: {title}\n" if title != job else f"# {job}\n"]
    verdict: bool | None = None
    line = ""
    if group == "compare":
        body = compare_markdown(summary).split("\n", 1)[1]  # its own title is the page's
        parts.append(body.replace("\n## ", "\n### ").replace("\n# ", "\n## "))
        line = f"{len(summary.get('schemes', []))} schemes, {len(summary.get('points', []))} points"
        if isinstance(summary.get("checks"), list) and summary["checks"]:
            # no verdict: a statement about another scheme that does not hold is a finding of the
            # comparison, not a failure to reproduce; the bars of [compare.bars] say "(issue 25)"
            parts += [
                "### Checks\n",
                *_checks_section(summary["checks"], checks_summary(summary["checks"])[1]),
            ]
    else:
        classes = summary.get("classes")
        if isinstance(classes, dict) and classes and all("paper_bps" in c for c in classes.values()):
            verdict, line, table = longlived_summary(summary, _tolerance(d))
            parts += [f"**{line}** (tolerance from the experiment's details.json).\n", table]
        if isinstance(summary.get("checks"), list):
            verdict, line = checks_summary(summary["checks"])
            parts += _checks_section(summary["checks"], line)
    for png in _pngs(d):
        rp = png.relative_to(d)
        text = caption(kind, rp, summary)
        parts.append(f"![{rp}]({rel_data}/{job}/{rp.as_posix()})\n\n*{rp}*: {text}\n")
    return "\n".join(parts), verdict, line


def _job_times(record: Mapping[str, Any], job: str) -> tuple[str, str]:
    """A job's wall and CPU time from the attempt that ran it (a resumed run skips it)."""
    for attempt in [record, *reversed(record.get("earlier_attempts", []))]:
        j = attempt.get("jobs", {}).get(job, {})
        if j.get("status") == "done" and isinstance(j.get("wall_s"), int | float):
            return f"{j['wall_s'] / 60:.1f} min", f"{j.get('cpu_s', 0):.0f} s"
    return "not recorded", ""


def _all_cached(summary: Path) -> bool:
    """Whether the comparison's last attempt took every run from its cache (its time is then scoring)."""
    try:
        doc = json.loads(summary.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    runs = doc.get("runs") if isinstance(doc, dict) else None
    return isinstance(runs, int) and runs > 0 and doc.get("runs_cached") == runs


def write_pages(src: Path, out: Path, replace: bool = False) -> list[Path]:
    """Write ``out/index.md`` and one page per job from the reproduction ``src`` (copied to ``out/data``
    first unless ``src`` is that copy); returns the pages written. The pages are of ``src`` alone, so
    pages in ``out`` of jobs that ``src`` never ran would be dropped: a UserError names them unless
    ``replace`` (a directory of ``paccp reproduce compare`` alone once dropped every paper page)."""
    record_path = src / RECORD
    if not record_path.is_file():
        raise UserError(f"{src}: no {RECORD} (run paccp reproduce all --out {src} first)")
    try:
        record = json.loads(record_path.read_text(encoding="utf-8"))
        # every attempt's jobs, in the first attempt's order: a later attempt may have run one group only
        # (``paccp reproduce compare`` into a directory ``paccp reproduce all`` made), and the pages are
        # of the whole directory, not of its last attempt
        tries = [*record.get("earlier_attempts", []), record]  # oldest first
        jobs: dict[str, Any] = {}
        for attempt in tries:
            for name, job in attempt["jobs"].items():
                jobs[name] = {**jobs.get(name, {}), **job}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise UserError(f"{record_path}: not a reproduction record ({exc})") from None
    data = out / DATA
    dropped = sorted(p.parent.name for p in data.glob("*/summary.json") if p.parent.name not in jobs)
    if dropped and not replace:
        raise UserError(
            f"{src} has no {', '.join(dropped[:3])}{' ...' if len(dropped) > 3 else ''} "
            f"({len(dropped)} job(s) with pages in {out}); run them into {src} too (or regenerate from "
            f"{data} after adding its jobs there), or pass --replace to drop their pages"
        )
    if src.resolve() != data.resolve():
        copy_data(src, data, sorted(jobs))
    for old in out.glob("*.md"):
        old.unlink()
    written: list[Path] = []
    rows: list[list[str]] = []
    missing: list[str] = []
    for job in jobs:  # in the order of the reproduction's job list (paccp, softbw, mptcp, compare)
        d = data / job
        if not (d / "summary.json").is_file():
            missing.append(job)
            rows.append(
                [job, jobs[job].get("group", ""), "**missing**", jobs[job].get("status", "not run"), "", ""]
            )
            continue
        text, verdict, line = job_page(job, d, DATA)
        (out / f"{job}.md").write_text(text, encoding="utf-8")
        written.append(out / f"{job}.md")
        mark = {True: "holds", False: "**differs**", None: "–"}[verdict]
        wall, cpu = _job_times(record, job)
        if _all_cached(d / "summary.json"):
            wall += " (scores only: every run from its cache)"
        rows.append([f"[{job}]({job}.md)", jobs[job].get("group", ""), mark, line, wall, cpu])
    wall = sum(a.get("wall_s", 0.0) for a in tries)
    cpu = sum(a.get("cpu_s", 0.0) for a in tries)
    attempts = len(tries)
    highest = max((a.get("load_avg_1min_max", 0.0) for a in tries), default="?")
    load = tries[0].get("load_avg_start", ["?"])[0], highest
    commits = ", ".join(f"`{c}`" for c in dict.fromkeys(a.get("commit", "unknown") for a in tries))
    head = [
        "# Results of one full reproduction\n",
        "Generated by `paccp docs results` from the outputs of "
        + ", then ".join(
            f"`{c}`" for c in dict.fromkeys(a.get("command", "paccp reproduce all") for a in tries)
        )
        + " into one directory (each attempt runs what is not complete yet); never edited by hand.\n",
        _md_table(
            ["", ""],
            [
                ["commit", commits],
                ["started (UTC)", tries[0].get("started_utc", "?")],
                ["finished (UTC)", record.get("finished_utc") or "not finished (stopped or still running)"],
                ["interrupted", "yes" if record.get("interrupted") else "no"],
                ["wall time", f"{wall / 60:.1f} min ({attempts} attempt(s))"],
                ["CPU time of the jobs", f"{cpu / 60:.1f} min (all attempts)"],
                ["workers / CPUs", f"{record.get('workers', '?')} / {record.get('cpus', '?')}"],
                ["load average (1 min) at the start / highest seen", f"{load[0]} / {load[1]}"],
                ["scaled down (--quick)", "yes" if record.get("quick") else "no (full size)"],
            ],
        ),
        "\nA verdict *holds* when every check of the paper holds (or every class is within the tolerance"
        " of the paper's rate); *differs* names the first check that does not, and its page says by how"
        " much. Wall and CPU time per job are those of the attempt that ran it; on a machine shared with"
        " other jobs the wall time mostly measures the load, the CPU time the work.\n",
        _md_table(["job", "group", "verdict", "summary", "wall", "CPU"], rows),
    ]
    if missing:
        head.append(
            f"\n**Missing from this reproduction ({len(missing)})**: {', '.join(missing)} (not finished when"
            " the pages were generated; rerun `paccp reproduce all --out DIR` to resume, then"
            " `paccp docs results DIR`).\n"
        )
    (out / "index.md").write_text("\n".join(head), encoding="utf-8")
    return [out / "index.md", *written]
