"""Write the DataMining results table of docs/datamining.md from the runs' summary.json files.

    .venv/bin/python tools/datamining_table.py out/dm            # print the table
    .venv/bin/python tools/datamining_table.py out/dm --write    # replace it in docs/datamining.md

Reads DIR/fig9/summary.json and DIR/fig11/summary.json (``paccp reproduce fig9 fig11 ... --out DIR``); the
numbers are the ``settled`` ratios (pooled mean FCT over seeds, unfinished flows at their elapsed time,
seed-bootstrap 95 % interval) that ``checks`` judges.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

from paccp.experiments.workload_checks import below_one, judged_interval

DOC = Path(__file__).resolve().parents[1] / "docs" / "datamining.md"
BEGIN, END = "<!-- results:begin (tools/datamining_table.py) -->", "<!-- results:end -->"
TARGET_HALF = 0.1  # the half-width


def _cell(ci: dict[str, Any]) -> str:
    """``0.83 [0.78, 0.88]``: the pooled ratio and the interval that judges it (bootstrap and t, united)."""
    if ci.get("ratio") is None:
        return "n/a"
    iv = judged_interval(ci)
    return f"{ci['ratio']:.2f}" if iv is None else f"{ci['ratio']:.2f} [{iv[0]:.2f}, {iv[1]:.2f}]"


def _half(ci: dict[str, Any]) -> str:
    iv = judged_interval(ci)
    return "n/a" if iv is None else f"{(iv[1] - iv[0]) / 2:.2f}"


def seeds_needed(ci: dict[str, Any], target: float = TARGET_HALF) -> int | None:
    """Seeds for a judging half-width of ``target``, extrapolated from this interval.

    The per-seed spread is taken from the t interval (sd = t_half * sqrt(k) / t(k-1)), and the seeds are
    the fewest n with t(n-1) * sd / sqrt(n) <= target (the t quantile shrinks as seeds are added); without
    a t interval, the half-width scaled as 1 / sqrt(seeds). A rough guide with 3 seeds.
    """
    from scipy.stats import t as student

    iv = judged_interval(ci)
    if iv is None:
        return None
    k = int(ci["seeds"])
    half = (iv[1] - iv[0]) / 2
    if half <= target:
        return k
    if ci.get("t_half") is None:
        return math.ceil(k * (half / target) ** 2)
    sd = float(ci["t_half"]) * math.sqrt(k) / float(student.ppf(0.975, k - 1))
    n = k
    while float(student.ppf(0.975, n - 1)) * sd / math.sqrt(n) > target and n < 100_000:
        n += 1
    return n


def table(out_dir: Path) -> str:
    """The markdown table: one row per figure, load and class; ratios to BE with their 95 % intervals."""
    lines = [
        "| figure | load | class | seeds | all flows, size-adjusted | ± | verdict | seeds for ±0.1"
        " | all flows, plain | ± | finished only | small (plain) | medium (plain) | big, > 1 MB (size-adj.)"
        " | flows (class / BE) | unfinished (class / BE) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for fig in ("fig9", "fig11"):
        path = out_dir / fig / "summary.json"
        if not path.is_file():
            continue
        summary = json.loads(path.read_text(encoding="utf-8"))
        for row in summary["loads"]:
            for cos in ("ds", "mrg"):
                st = row["settled"][cos]
                ov = st["overall"]
                sized, plain = ov["sized"], ov["plain"]
                need = seeds_needed(sized)
                cells = [
                    fig,
                    f"{row['load']:.0%}",
                    cos.upper(),
                    str(sized["seeds"]),
                    _cell(sized),
                    _half(sized),
                    {True: "below 1", False: "**above 1**", None: "undecided"}[below_one(sized)],
                    "n/a" if need is None else str(need),
                    _cell(plain),
                    _half(plain),
                    _cell(ov["finished_only"]),
                    _cell(st["small"]["plain"]),
                    _cell(st["medium"]["plain"]),
                    _cell(st["big"]["sized"]),
                    f"{ov['flows']} / {ov['flows_be']}",
                    f"{ov['unfinished']} / {ov['unfinished_be']}",
                ]
                lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def cost_table(out_dir: Path) -> str:
    """Per figure and load: the seeds finished, engine events and wall time of the points (their cache
    entries; wall time measured where they ran, with the machine's load at the time)."""
    lines = [
        "| figure | load | seeds finished | events (billions) | wall, sum over points (min)"
        " | wall per point (s) |",
        "|---|---|---|---|---|---|",
    ]
    for fig in ("fig9", "fig11"):
        by_load: dict[float, list[dict[str, Any]]] = {}
        for f in sorted((out_dir / fig / "cache").glob("*.json")):
            d = json.loads(f.read_text(encoding="utf-8"))
            by_load.setdefault(float(d["params"]["load"]), []).append(d)
        for load, ds in sorted(by_load.items(), reverse=True):
            seeds = sorted(int(d["params"]["seed"]) for d in ds)
            walls = sorted(round(float(d["wall_s"])) for d in ds)
            events = sum(int(d["engine"]["events"]) for d in ds) / 1e9
            lines.append(
                f"| {fig} | {load:.0%} | {', '.join(map(str, seeds))} | {events:.2f} |"
                f" {sum(walls) / 60:.0f} | {walls[0]}-{walls[-1]} |"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    if not argv or argv[0].startswith("-"):
        print(__doc__, file=sys.stderr)
        return 2
    text = table(Path(argv[0])) + "\n" + cost_table(Path(argv[0]))
    if "--write" not in argv[1:]:
        print(text, end="")
        return 0
    doc = DOC.read_text(encoding="utf-8")
    head, sep, rest = doc.partition(BEGIN)
    _, sep2, tail = rest.partition(END)
    if not sep or not sep2:
        print(f"datamining_table: {DOC} has no {BEGIN} ... {END} block", file=sys.stderr)
        return 2
    DOC.write_text(f"{head}{BEGIN}\n{text}{END}{tail}", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
