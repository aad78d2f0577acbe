"""The `paccp price` and `paccp bill` commands, in-process through the real entry point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pricing_fixtures import BOOK, rec

from paccp.cli import main
from paccp.common.usage import write_usage


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run ``paccp ARGS``; return (exit code, stdout, stderr)."""
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_quote_json_and_table(capsys: pytest.CaptureFixture[str], book_file: Path) -> None:
    args = ["price", "quote", "--model", "vbp", "--cos", "mrg", "--theta", "5Gbit", "--omega", "2"]
    code, out, _ = cli(capsys, *args, "--duration", "1h", "--book", str(book_file), "--json")
    assert code == 0
    q = json.loads(out)
    assert q["total"] == "0.36" and q["currency"] == "USD" and len(q["components"]) == 3
    code, out, _ = cli(capsys, *args, "--duration", "90min", "--book", str(book_file))
    assert code == 0 and "0.54" in out and "P2 theta" in out


def test_buy_json(capsys: pytest.CaptureFixture[str], book_file: Path) -> None:
    code, out, _ = cli(capsys, "price", "buy", "--model", "vbp", "--budget", "1.00", "--cos", "ds",
                       "--book", str(book_file), "--json")  # fmt: skip
    assert code == 0 and json.loads(out)[0]["quote"]["omega"] == "16.0"


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (('p0 = "0.10"', 'p0 = "ten"'), "vbp.p0"),
        (('currency = "USD"', 'currency = "dollars"'), "currency"),
        (('p2s_unit = "per_gbps_hour"', ""), "fbp.p2s_unit: Field required"),
        (('beta = "0.6"', 'beta = "1.2"'), "softbw.beta"),
        (('mode = "half_even"', 'mode = "nearest"'), "rounding.mode"),
        (("[vbp]", "[vbp"), "not valid TOML"),
    ],
)
def test_bad_book_exit_2_names_field(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, edit: tuple[str, str], needle: str
) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(BOOK.replace(*edit, 1))
    code, _, err = cli(capsys, "price", "quote", "--book", str(bad))
    assert code == 2 and err.startswith("paccp: error: ") and needle in err and len(err.splitlines()) == 1


@pytest.mark.parametrize(
    "args",
    [
        ["price", "quote", "--theta", "fast"],
        ["price", "quote", "--omega", "x"],
        ["price", "quote", "--model", "cheap"],
        ["price", "buy", "--budget", "-1"],
        ["price", "buy", "--budget", "1", "--duration", "0s"],
        ["bill", "invoice", "--tenant", "nobody", "--period", "2026-11"],
        ["bill", "invoice", "--tenant", "acme", "--period", "November"],
    ],
)
def test_bad_flags_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path, args: list[str]) -> None:
    db = str(tmp_path / "l.sqlite")
    code, _, err = cli(capsys, *args, *(["--db", db] if args[0] == "bill" else []))
    assert code == 2 and err.startswith("paccp: error: ") and len(err.splitlines()) == 1


def test_bill_flow(capsys: pytest.CaptureFixture[str], tmp_path: Path, book_file: Path) -> None:
    db = str(tmp_path / "l.sqlite")
    usage = tmp_path / "u.jsonl"
    write_usage([rec(record_id="a", cos="ds", omega="2"), rec(record_id="b", vm="vm2")], usage)
    assert (
        cli(capsys, "bill", "tenant", "add", "acme", "--model", "vbp", "--book", str(book_file), "--db", db)[
            0
        ]
        == 0
    )
    code, out, _ = cli(capsys, "bill", "tenant", "list", "--db", db)
    assert code == 0 and out.startswith("acme\tvbp\ttest")
    assert cli(capsys, "bill", "ingest", str(usage), "--tenant", "acme", "--db", db)[0] == 0
    code, out, _ = cli(capsys, "bill", "ingest", str(usage), "--tenant", "acme", "--db", db)
    assert code == 0 and "0 new, 2 already ingested" in out
    csv = tmp_path / "inv.csv"
    inv = ["bill", "invoice", "--tenant", "acme", "--period", "2026-11", "--db", db]
    code, out, _ = cli(capsys, *inv, "--json", "--csv", str(csv))
    assert code == 0 and json.loads(out)["total"] == "0.26"  # DS 0.16 + BE 0.10
    assert csv.read_text().splitlines()[-1] == "TOTAL,,,,,,,,,0.26,USD"
    code, out, _ = cli(capsys, *inv)
    assert code == 0 and "TOTAL" in out and "0.26" in out
    assert "issued revision 1" in cli(capsys, *inv, "--issue")[1]
    assert "unchanged since issued revision 1" in cli(capsys, *inv, "--issue")[1]
