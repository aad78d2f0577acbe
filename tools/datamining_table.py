"""Write the DataMining results table of docs/datamining.md from the runs' summary.json files.

    .venv/bin/python tools/datamining_table.py out/dm            # print the table
    .venv/bin/python tools/datamining_table.py out/dm --write    # replace it in docs/datamining.md

Reads DIR/fig9/summary.json and DIR/fig11/summary.json (``paccp reproduce fig9 fig11 ... --out DIR``); the
numbers are the ``settled`` ratios (pooled mean FCT over seeds, unfinished flows at their elapsed time,
seed-bootstrap 95 % interval) that ``checks`` judges.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

DOC = Path(__file__).resolve().parents[1] / "docs" / "datamining.md"
BEGIN, END = "<!-- results:begin (tools/datamining_table.py) -->", "<!-- results:end -->"
GROUPS = ("overall", "small", "medium", "big")


def _cell(ci: dict[str, Any]) -> str:
    if ci.get("ratio") is None:
        return "n/a"
    if ci.get("lo") is None:
        return f"{ci['ratio']:.2f}"
    return f"{ci['ratio']:.2f} [{ci['lo']:.2f}, {ci['hi']:.2f}]"


def _verdict(ci: dict[str, Any]) -> str:
    lo, hi = ci.get("lo"), ci.get("hi")
    if lo is None or hi is None:
        return "n/a"
    return "below 1" if hi < 1 else ("**above 1**" if lo > 1 else "undecided")


def table(out_dir: Path) -> str:
    """The markdown table: one row per figure, load and class; ratios to BE with their 95 % intervals."""
    lines = [
        "| figure | load | class | seeds | overall, size-adjusted | ± | verdict | overall, plain | ±"
        " | finished only | small | medium | big | flows (class / BE) | unfinished (class / BE) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
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
                cells = [
                    fig,
                    f"{row['load']:.0%}",
                    cos.upper(),
                    str(sized["seeds"]),
                    _cell(sized),
                    _half(sized),
                    _verdict(sized),
                    _cell(plain),
                    _half(plain),
                    _cell(ov["finished_only"]),
                    *(_cell(st[g]["sized"]) for g in GROUPS[1:]),
                    f"{ov['flows']} / {ov['flows_be']}",
                    f"{ov['unfinished']} / {ov['unfinished_be']}",
                ]
                lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _half(ci: dict[str, Any]) -> str:
    return "n/a" if ci.get("half") is None else f"{ci['half']:.2f}"


def main(argv: list[str]) -> int:
    if not argv or argv[0].startswith("-"):
        print(__doc__, file=sys.stderr)
        return 2
    text = table(Path(argv[0]))
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
