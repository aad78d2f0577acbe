"""Property-based tests (Hypothesis) of the price-book and usage parsers and the `paccp price` / `paccp bill`
entry points: for any generated input the command succeeds, or exits 2 with ONE line on stderr; never a
traceback, and a failed command leaves nothing behind (no usage rows, no tenant, no file).

Examples are bounded (``max_examples``) so the suite stays within a few seconds per property.
"""

from __future__ import annotations

import contextlib
import io
import json
import string
from decimal import Decimal
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from pricing_fixtures import BOOK, rec

from paccp.cli import main
from paccp.pricing.book import ROUNDING_MODES, Rounding
from paccp.pricing.ledger import Ledger

SETTINGS = settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def run(*args: str) -> tuple[int, str, str]:
    """``paccp ARGS`` in-process; (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(list(args))
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return code, out.getvalue(), err.getvalue()


def assert_clean(code: int, err: str) -> None:
    """Success, or exit 2 with exactly one line on stderr (no traceback)."""
    event(f"exit {code}")
    assert "Traceback" not in err, err
    if code != 0:
        lines = err.strip().splitlines()
        assert (
            code == 2 and len(lines) == 1 and lines[0].startswith(("paccp: error: ", "Usage:", "Error:"))
        ), err


# numbers, strings and other values as a hostile TOML or JSON author writes them
NUMBERS = st.one_of(
    st.integers(min_value=-(10**30), max_value=10**30),
    st.sampled_from(["nan", "inf", "-inf", "1e26", "1e400", "-0", "0.05", "1e-40", "0", "0.1", "2", "12.5"]),
    st.decimals(allow_nan=True, allow_infinity=True, places=None).map(str),
)
TEXT = st.text(alphabet=string.printable + "\x00\x1b[]/é\u202e", max_size=30)
TOML_VALUES = st.one_of(
    NUMBERS.map(str),
    NUMBERS.map(lambda v: json.dumps(str(v))),
    TEXT.map(json.dumps),
    st.sampled_from(["true", "[]", "{}", '"10Gbit"', '"1e400Gbit"', '"-5Gbit"', '"half_up"', '"per_gb"']),
)
BOOK_KEYS = [
    "quantum",
    "mode",
    "p0",
    "p1",
    "p2",
    "p0s",
    "p1s",
    "p2s",
    "p2s_unit",
    "beta",
    "capacity",
    "currency",
]


@st.composite
def books(draw: st.DrawFn) -> str:
    """The test book with some values replaced, some lines dropped, or junk appended."""
    lines = BOOK.strip().splitlines()
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(lines) - 1))
        action = draw(st.sampled_from(["value", "value", "drop", "junk"]))
        key = lines[i].split("=")[0].strip()
        if action == "value" and "=" in lines[i]:
            lines[i] = f"{key} = {draw(TOML_VALUES)}"
        elif action == "drop":
            lines.pop(i)
        else:
            lines.insert(i, draw(TEXT))
    return "\n".join(lines) + "\n"


@SETTINGS
@given(text=books())
def test_any_book_is_accepted_or_refused_in_one_line(tmp_path: Path, text: str) -> None:
    path = tmp_path / "book.toml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    code, out, err = run("price", "check", str(path))
    assert_clean(code, err)
    if code == 0:  # an accepted book quotes (or refuses a purchase) cleanly
        for model in ("vbp", "fbp", "softbw"):
            code, out, err = run("price", "quote", "--model", model, "--cos", "mrg", "--theta", "1Gbit",
                                 "--omega", "2", "--book", str(path), "--json")  # fmt: skip
            assert_clean(code, err)
            if code == 0:
                q = json.loads(out)
                assert sum(Decimal(c["amount"]) for c in q["components"]) == Decimal(q["total"])


JUNK = st.one_of(NUMBERS.map(str), TEXT, st.sampled_from(["1e30Gbit", "-1h", "0s", "10GB", "nan"]))


def mostly(*valid: str) -> st.SearchStrategy[str]:
    """A valid value three times in four, junk otherwise."""
    return st.integers(0, 3).flatmap(lambda k: JUNK if k == 0 else st.sampled_from(valid))


@SETTINGS
@given(
    model=st.sampled_from(["vbp", "fbp", "softbw", "x"]),
    cos=st.sampled_from(["be", "ds", "mrg", "gold"]),
    theta=mostly("0", "1Gbit", "2.5Gbit", "9Gbit"),
    omega=mostly("1", "2", "1.5", "3.25"),
    duration=mostly("1h", "90min", "7d", "1s"),
    budget=mostly("0", "1", "12.50", "1000"),
    rate=mostly("1Gbit", "5Gbit", "12Gbit"),
    quantum=st.sampled_from(["0.01", "0.05", "0.25", "1", "0.001"]),
)
def test_quote_and_buy_arguments(
    tmp_path: Path,
    model: str,
    cos: str,
    theta: str,
    omega: str,
    duration: str,
    budget: str,
    rate: str,
    quantum: str,
) -> None:
    path = tmp_path / "book.toml"
    path.write_text(BOOK.replace('quantum = "0.01"', f'quantum = "{quantum}"'))
    q = Decimal(quantum)
    args = ["--model", model, "--book", str(path), "--json", "--duration", duration]
    code, out, err = run(
        "price", "quote", *args, "--cos", cos, "--theta", theta, "--omega", omega, "--rate", rate
    )
    assert_clean(code, err)
    if code == 0:
        got = json.loads(out)
        amounts = [Decimal(c["amount"]) for c in got["components"]]
        assert sum(amounts) == Decimal(got["total"]) and all(a % q == 0 for a in amounts)
    code, out, err = run("price", "buy", *args, "--budget", budget)
    assert_clean(code, err)
    if code == 0:
        for p in json.loads(out):
            assert Decimal(p["quote"]["total"]) <= Decimal(budget) and Decimal(p["quote"]["total"]) % q == 0


@settings(max_examples=200, deadline=None)
@given(
    parts=st.lists(st.decimals(min_value=0, max_value=10**9, places=12, allow_nan=False), max_size=30),
    quantum=st.sampled_from(["0.01", "0.05", "0.1", "0.25", "1", "5", "0.000001", "0.3"]),
    mode=st.sampled_from(sorted(ROUNDING_MODES)),
)
def test_allocation_adds_up_for_any_quantum(parts: list[Decimal], quantum: str, mode: str) -> None:
    r = Rounding(quantum=Decimal(quantum), mode=mode)  # type: ignore[arg-type]
    amounts, total = r.allocate(parts)
    q = Decimal(quantum)
    assert sum(amounts, Decimal(0)) == total and total % q == 0
    assert total == r.money(sum(parts, Decimal(0)))
    for a, e in zip(amounts, parts, strict=True):
        assert a % q == 0 and e - q < a < e + q


JSON_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False), TEXT, st.lists(st.integers(), max_size=2),
    st.sampled_from(["1e999999", "NaN", "2.0", "-1", "ds", "mrg", "strict", "dynamic", 10**400]),
)  # fmt: skip
FIELDS = list(json.loads(rec().to_json_line()))


@st.composite
def usage_lines(draw: st.DrawFn) -> bytes:
    """A few usage records, each a valid one with some fields replaced, dropped or added; or raw bytes."""
    out = []
    for k in range(draw(st.integers(1, 4))):
        if draw(st.integers(0, 9)) == 0:
            out.append(draw(st.binary(max_size=40)).replace(b"\n", b" "))
            continue
        d: dict[str, Any] = json.loads(rec(record_id=f"p{draw(st.integers(0, 10**6))}-{k}").to_json_line())
        for _ in range(draw(st.integers(0, 3))):
            key = draw(st.sampled_from([*FIELDS, "extra"]))
            if draw(st.booleans()) and key in d:
                d.pop(key)
            else:
                d[key] = draw(JSON_VALUES)
        out.append(json.dumps(d, default=str).encode("utf-8", errors="surrogatepass"))
    return b"\n".join(out) + b"\n"


@SETTINGS
@given(data=usage_lines(), tenant=st.sampled_from(["acme", "other"]))
def test_any_usage_file_is_ingested_whole_or_not_at_all(tmp_path: Path, data: bytes, tenant: str) -> None:
    db = str(tmp_path / "l.sqlite")
    if not Path(db).exists():
        led = Ledger(db)
        led.add_tenant("acme", "softbw", BOOK)
        led.add_tenant("other", "vbp", BOOK)
    before = Ledger(db).count_usage()
    path = tmp_path / "u.jsonl"
    path.write_bytes(data)
    n = sum(1 for line in data.splitlines() if line.strip())
    code, out, err = run("bill", "ingest", str(path), "--tenant", tenant, "--db", db)
    assert_clean(code, err)
    after = Ledger(db).count_usage()
    if code != 0:
        assert after == before  # nothing written
    else:
        assert after - before == int(out.split(": ")[1].split()[0]) <= n
        code, _, err = run("bill", "invoice", "--tenant", tenant, "--period", "2026-11", "--db", db, "--json")
        assert code == 0, err


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=300), suffix=st.sampled_from([".jsonl", ".parquet"]))
def test_any_bytes_as_a_usage_file(tmp_path: Path, data: bytes, suffix: str) -> None:
    db = str(tmp_path / "l.sqlite")
    if not Path(db).exists():
        Ledger(db).add_tenant("acme", "vbp", BOOK)
    path = tmp_path / f"u{suffix}"
    path.write_bytes(b"PAR1" + data if suffix == ".parquet" and data[:1] == b"P" else data)
    code, _, err = run("bill", "ingest", str(path), "--tenant", "acme", "--db", db)
    assert_clean(code, err)


@SETTINGS
@given(name=st.text(max_size=140), period=st.one_of(TEXT, st.from_regex(r"\A[0-9]{4}-[0-9]{2}\Z")))
def test_tenant_names_and_periods(tmp_path: Path, name: str, period: str) -> None:
    db = str(tmp_path / "l.sqlite")
    book = tmp_path / "book.toml"
    book.write_text(BOOK)
    if not Path(db).exists():
        Ledger(db).add_tenant("acme", "vbp", BOOK)
    before = [t.name for t in Ledger(db).tenants()]
    code, _, err = run("bill", "tenant", "add", name, "--book", str(book), "--db", db)
    assert_clean(code, err)
    after = [t.name for t in Ledger(db).tenants()]
    assert after == before if code else name in after
    csv = tmp_path / "inv.csv"
    csv.unlink(missing_ok=True)
    code, _, err = run("bill", "invoice", "--tenant", name, "--period", period, "--db", db, "--csv", str(csv))
    assert_clean(code, err)
    assert csv.exists() == (code == 0)  # a failed invoice writes no CSV
