"""Terminal output in a pipe: every table-printing command keeps every label and digit.

The commands run as subprocesses with stdout to a pipe (what ``paccp ... | cat`` and CI logs see): no
markup is eaten (``[drop-tail]``, ``[tcp]``), no cell is wrapped or cut with ``…``, no colour codes and no
progress-bar residue.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from paccp.common.usage import UsageRecord, write_usage

REPO = Path(__file__).resolve().parents[1]
PACCP = [sys.executable, "-m", "paccp.cli"]
T0 = 1_793_491_200_000_000_000  # 2026-11-01T00:00:00Z
H = 3_600_000_000_000


def _piped(*args: str, env: dict[str, str] | None = None) -> str:
    """Run ``paccp ARGS`` with stdout and stderr to pipes (80 columns, as a CI runner reports)."""
    e = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "FORCE_COLOR")}
    e.update({"COLUMNS": "80", "TERM": "xterm-256color", **(env or {})})
    res = subprocess.run([*PACCP, *args], capture_output=True, text=True, env=e, timeout=300, check=False)
    assert res.returncode == 0, res.stderr
    _plain(res.stdout)
    assert "\x1b" not in res.stderr and "\r" not in res.stderr  # no progress bar drawn into a log
    return res.stdout


def _plain(text: str) -> None:
    assert "\x1b" not in text, "colour or cursor codes in a pipe"
    assert "…" not in text, "a cell cut in a pipe"


def _has_all(text: str, *needles: str) -> None:
    missing = [n for n in needles if n not in text]
    assert not missing, f"missing from the piped output: {missing}\n{text}"


def test_price_quote_and_buy_piped() -> None:
    args = ["price", "quote", "--model", "vbp", "--cos", "mrg", "--theta", "5Gbit", "--omega", "2"]
    q = json.loads(_piped(*args, "--json"))
    out = _piped(*args)
    _has_all(out, *(c["name"] for c in q["components"]), *(c["formula"] for c in q["components"]))
    _has_all(out, *(c["amount"] for c in q["components"]), q["total"], "total")
    got = json.loads(_piped("price", "buy", "--budget", "1.00", "--json"))
    out = _piped("price", "buy", "--budget", "1.00")
    for p in got:
        _has_all(out, p["cos"], p["quote"]["total"], p["leftover"])


def test_bill_invoice_piped_keeps_money_and_names(tmp_path: Path) -> None:
    db = str(tmp_path / "ledger.sqlite")
    base = {"source": "manual", "tenant": "acme", "start_ns": T0, "end_ns": T0 + H, "bytes": 10**9}
    recs = [
        UsageRecord.model_validate(
            {
                **base,
                "record_id": "a",
                "vm": "vm-[gold]-with-a-long-name",
                "flow_id": "[tcp]-flow-17",
                "cos": "mrg",
                "theta_bps": 5 * 10**9,
                "omega": "2",
            }
        ),
        UsageRecord.model_validate(
            {
                **base,
                "record_id": "b",
                "vm": "vm2",
                "flow_id": "[udp]",
                "cos": "be",
                "theta_bps": 0,
                "omega": "1",
                "end_ns": T0 + 3 * H,
            }
        ),
    ]
    usage = tmp_path / "u.jsonl"
    write_usage(recs, usage)
    _piped("bill", "tenant", "add", "acme", "--model", "vbp", "--db", db)
    _piped("bill", "ingest", str(usage), "--tenant", "acme", "--db", db)
    inv = ["bill", "invoice", "--tenant", "acme", "--period", "2026-11", "--db", db]
    doc = json.loads(_piped(*inv, "--json"))
    out = _piped(*inv)
    _has_all(out, "vm-[gold]-with-a-long-name", "TOTAL", doc["total"])  # VBP bills per VM
    for line in doc["lines"]:
        _has_all(out, line["description"], str(line["quantity"]), line["unit_price"], line["amount"])
    assert all(len(r) < 400 for r in out.splitlines())  # full width, but no padding to a huge console


def test_check_tables_keep_bracketed_labels_in_a_pipe() -> None:
    """``print_checks`` (mptcp experiments) and ``print_table`` (the others) through a pipe."""
    code = (
        "from paccp.experiments.mptcp_measure import print_checks\n"
        "from paccp.experiments._common import print_table\n"
        "checks = [\n"
        "  {'statement': '[drop-tail] row 3: WC shares follow A_l (0.123456789)', 'paper': '[1, 2, 3]',\n"
        "   'ours': 96.61234567, 'holds': False},\n"
        "  {'statement': '[tcp] gets its share; [udp] at its rate', 'paper': 'x' * 150, 'ours': 1.5e-07,\n"
        "   'holds': True},\n"
        "]\n"
        "print_checks('mptcp-table3 [quick]', checks)\n"
        "print_table({'title': 'softbw [red]x[/red]', 'checks': [dict(c, holds=None) for c in checks]})\n"
    )
    e = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=e, check=True)
    _plain(res.stdout)
    _has_all(
        res.stdout,
        "[drop-tail] row 3: WC shares follow A_l (0.123456789)",
        "[1, 2, 3]",
        "96.61234567",
        "[tcp] gets its share; [udp] at its rate",
        "x" * 150,
        "1.5e-07",
        "mptcp-table3 [quick]",
        "softbw [red]x[/red]",
        "NO",
        "n/a",
    )


def test_console_on_a_terminal_is_rich_and_in_a_pipe_plain(tmp_path: Path) -> None:
    from paccp.common import console as cons

    with (tmp_path / "log").open("w") as fh:
        con = cons.console(file=fh)
        assert not con.is_terminal and con.width == cons.PIPE_WIDTH and con.no_color
        t = cons.table("a", "b", title="[x]")
        cons.add_row(t, "[bold]y[/bold]", cons.styled("z", "red"))
        cons.print_table(t, con)
        cons.echo("[note]", con=con)
    text = (tmp_path / "log").read_text()
    _plain(text)
    _has_all(text, "[x]", "[bold]y[/bold]", "z", "[note]")
    assert re.search(r"\n\s*$", text)


@pytest.mark.slow
def test_reproduce_piped_keeps_table(tmp_path: Path) -> None:
    out = _piped("reproduce", "fig4a", "--quick", "--out", str(tmp_path / "r"))
    summary = json.loads((tmp_path / "r" / "fig4a" / "summary.json").read_text())
    for label, c in summary["classes"].items():
        _has_all(out, label, f"{c['rate_bps'] / 1e9:.2f}", f"{c['paper_bps'] / 1e9:.2f}")


def test_run_and_price_consistency_piped(tmp_path: Path) -> None:
    run = tmp_path / "run"
    out = _piped("run", str(REPO / "scenarios" / "dumbbell.toml"), "--out", str(run))
    summary = json.loads((run / "summary.json").read_text())
    for label, c in summary["classes"].items():
        line = next(ln for ln in out.splitlines() if f" {label} " in ln)
        assert str(c["flows"]) in line and f"{c['mean_rate_bps'] / 1e9:.3g} Gb/s" in line
    rep = json.loads(_piped("price", "consistency", str(run), "--json"))
    out = _piped("price", "consistency", str(run))
    for g in rep["groups"]:
        _has_all(out, g["cos"], f"{g['price_ratio']:.3f}", f"{g['perf_ratio']:.3f}")
