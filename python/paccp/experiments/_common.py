"""Helpers every experiment shares: the comparison table of its checks (``table.md`` and the printed one)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from paccp.common.outdir import write_text_atomic


def write_table(summary: dict[str, Any], out: Path) -> str:
    """``table.md``: statement, paper, ours, holds?"""
    lines = [f"# {summary['title']}", "", "| statement | paper | ours | holds? |", "|---|---|---|---|"]
    for c in summary["checks"]:
        holds = {True: "yes", False: "**no**", None: "n/a"}[c["holds"]]
        lines.append(f"| {c['statement']} | {c['paper']} | {c['ours']} | {holds} |")
    text = "\n".join(lines) + "\n"
    write_text_atomic(out / "table.md", text)
    return text


def print_table(summary: dict[str, Any]) -> None:
    """Print the comparison table (statements and numbers literally; plain in a pipe)."""
    from paccp.common import console as cons

    t = cons.table("statement", "paper", "ours", "holds?", title=summary["title"])
    for c in summary["checks"]:
        holds = {True: "yes", False: "NO", None: "n/a"}[c["holds"]]
        cons.add_row(t, c["statement"], c["paper"], c["ours"], holds)
    cons.print_table(t)
