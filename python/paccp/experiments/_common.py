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
    """Print the comparison table (rich)."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    t = Table(title=escape(summary["title"]))
    for col in ("statement", "paper", "ours", "holds?"):
        t.add_column(col)
    for c in summary["checks"]:
        cells = (c["statement"], c["paper"], c["ours"], {True: "yes", False: "NO", None: "n/a"}[c["holds"]])
        t.add_row(*(escape(str(x)) for x in cells))
    Console().print(t)
