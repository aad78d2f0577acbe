"""Price-performance consistency and calibration, on fixture run dirs and on a real simulated run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from paccp.errors import UserError
from paccp.pricing.book import PriceBook
from paccp.pricing.charging import build_invoice, parse_period
from paccp.pricing.consistency import calibrate, consistency
from paccp.pricing.ledger import Ledger

G = 1e9


def flow(i: int, cos: str, theta: float, omega: float, rate: float | None, **kw: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "id": f"f{i}", "label": cos.upper(), "cos": cos, "src": f"h{i}", "dst": "h99", "vm": None,
        "size_bytes": None, "size_class": None, "theta_bps": int(theta), "omega": omega, "start_ns": 0,
        "finish_ns": None, "fct_ns": None, "bytes_acked": 0, "rate_bps": rate, "deadline_ns": None,
        "deadline_met": None,
    }  # fmt: skip
    row.update(kw)
    return row


def run_dir(tmp_path: Path, rows: list[dict[str, Any]]) -> Path:
    d = tmp_path / "run"
    d.mkdir(exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), d / "flows.parquet")
    return d


def test_long_lived_consistent_and_flagged(tmp_path: Path, book: PriceBook) -> None:
    # VBP prices: DS (0,2) 0.16/0.10 = 1.6; MRG (2 Gb/s, 1) 0.18/0.10 = 1.8
    rows = [flow(i, "be", 0, 1, 1 * G) for i in range(4)]
    rows += [flow(10 + i, "ds", 0, 2, 1.6 * G) for i in range(2)]
    rows += [flow(20 + i, "mrg", 2 * G, 1, 2 * G) for i in range(2)]
    rep = consistency(run_dir(tmp_path, rows), book, "vbp")
    got = {g.cos: (g.n, round(g.price_ratio, 6), round(g.perf_ratio, 6), g.flagged) for g in rep.groups}
    assert rep.metric == "rate"
    assert got == {"be": (4, 1.0, 1.0, False), "ds": (2, 1.6, 1.6, False), "mrg": (2, 1.8, 2.0, False)}
    rows[4]["rate_bps"] = rows[5]["rate_bps"] = 1.3 * G  # DS now gets 1.3x for a 1.6x price
    rep = consistency(run_dir(tmp_path, rows), book, "vbp", tolerance=0.05)
    assert [g.cos for g in rep.groups if g.flagged] == ["ds"]
    # 1.6 <= 1.3 * 1.25: not flagged with a 25 % tolerance
    assert not any(
        g.flagged for g in consistency(run_dir(tmp_path, rows), book, "vbp", tolerance=0.25).groups
    )


def test_vbp_sums_a_vms_flows(tmp_path: Path, book: PriceBook) -> None:
    rows = [flow(0, "be", 0, 1, 2 * G, vm="vmA"), flow(1, "be", 0, 1, 2 * G, vm="vmA")]  # one VM, 2 flows
    rows += [flow(2, "be", 0, 1, 4 * G), flow(3, "ds", 0, 2, 6 * G)]  # flows without VM: their own VM
    rep = consistency(run_dir(tmp_path, rows), book, "vbp")
    be = next(g for g in rep.groups if g.cos == "be")
    assert rep.unit == "VM" and be.n == 2 and be.performance == 4 * G
    assert next(g for g in rep.groups if g.cos == "ds").perf_ratio == 1.5
    fbp = consistency(run_dir(tmp_path, rows), book, "fbp")  # per flow under FBP
    assert fbp.unit == "flow" and next(g for g in fbp.groups if g.cos == "be").n == 3


def test_finite_flows_use_inverse_mean_fct(tmp_path: Path, book: PriceBook) -> None:
    rows = [flow(i, "be", 0, 1, None, size_bytes=10**6, fct_ns=10_000_000 + i) for i in range(3)]
    rows += [flow(10, "ds", 0, 2, None, size_bytes=10**6, fct_ns=6_250_001)]
    rows += [
        flow(20 + i, "be", 0, 1, None, size_bytes=10**4, fct_ns=100_000, size_class="small") for i in range(2)
    ]
    rows += [flow(30, "ds", 0, 2, None, size_bytes=10**4, fct_ns=80_000, size_class="small")]
    for r in rows[:4]:
        r["size_class"] = "medium"
    rep = consistency(run_dir(tmp_path, rows), book, "vbp")
    ds = next(g for g in rep.groups if g.cos == "ds")
    # overall: mean BE FCT (3 x ~10 ms + 2 x 0.1 ms) / 5 over mean DS FCT (6.25 ms + 0.08 ms) / 2
    assert rep.metric == "fct" and ds.perf_ratio == pytest.approx((30.2e6 / 5) / (6.33e6 / 2), rel=1e-5)
    assert ds.by_size == {"small": pytest.approx(1.25), "medium": pytest.approx(1.6, rel=1e-6)}
    assert not ds.flagged  # price 1.6 < perf 1.908


def test_calibrate_recovers_k_and_m(tmp_path: Path, book: PriceBook) -> None:
    """rho_DS = 1 + k (omega - 1) with k = 0.5 and rho_MRG = 1 + k (omega-1) + m theta with m = 0.25."""
    rows = [flow(i, "be", 0, 1, 1 * G) for i in range(4)]
    rows += [flow(10, "ds", 0, 2, 1.5 * G), flow(11, "ds", 0, 3, 2.0 * G)]
    rows += [flow(20, "mrg", 2 * G, 2, 2.0 * G)]  # 1 + 0.5 + 0.25 * 2
    cal = calibrate(consistency(run_dir(tmp_path, rows), book, "vbp"), book)
    assert cal.k == pytest.approx(0.5) and cal.m == pytest.approx(0.25)
    assert str(cal.p1) == "0.050000" and str(cal.p2) == "0.025000"


def test_consistency_input_errors(tmp_path: Path, book: PriceBook) -> None:
    with pytest.raises(UserError, match="no such file"):
        consistency(tmp_path, book)
    with pytest.raises(UserError, match="no BE"):
        consistency(run_dir(tmp_path, [flow(0, "ds", 0, 2, G)]), book)
    with pytest.raises(UserError, match="vbp or fbp"):
        consistency(run_dir(tmp_path, [flow(0, "be", 0, 1, G)]), book, "softbw")


def test_simulated_run_priced_and_billed(
    tmp_path: Path, repo: Path, book: PriceBook, book_file: Path
) -> None:
    """A real `paccp run` of the small dumbbell, fed to `paccp price consistency` and to the ledger."""
    out = tmp_path / "dumbbell"
    cli = [sys.executable, "-m", "paccp.cli"]
    scenario = str(repo / "scenarios" / "dumbbell.toml")
    run = subprocess.run(
        [*cli, "run", scenario, "--out", str(out)], capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr
    cons = subprocess.run(
        [*cli, "price", "consistency", str(out), "--book", str(book_file), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert cons.returncode == 0, cons.stderr
    rep = json.loads(cons.stdout)
    assert {g["cos"] for g in rep["groups"]} == {"be", "ds", "mrg"}
    ds = next(g for g in rep["groups"] if g["cos"] == "ds")
    assert ds["price_ratio"] == pytest.approx(1.6) and ds["perf_ratio"] > 1.0  # DS gets more than BE
    # its usage records bill: tenants acme (flows) and globex (the MRG VM)
    led = Ledger(str(tmp_path / "l.sqlite"))
    for t in ("acme", "globex"):
        led.add_tenant(t, "fbp", book_file.read_text())
    lines = [json.loads(x) for x in (out / "usage.jsonl").read_text().splitlines()]
    n_records = len(lines)
    # record ids carry the billing epoch (2026-11-01T00:00:00Z) and the tenant: the same run billed to
    # another month or tenant is other usage, not a conflicting copy of this one
    summary = json.loads((out / "summary.json").read_text())
    for r in lines:
        assert r["record_id"].startswith(f"sim:{summary['run_id']}:1793491200000000000:{r['tenant']}:")
    assert led.ingest_file(out / "usage.jsonl", tenant=None).new == n_records  # two tenants: operator import
    assert led.ingest_file(out / "usage.jsonl", tenant=None).new == 0
    s, e = parse_period("2026-11")
    inv = build_invoice("acme", "fbp", book, led.usage("acme", s, e), "2026-11")
    # FBP: the BE flow's upgrade to (0, 2) at 60 ms is charged 40 ms of the DS add-on; the DS flow 100 ms
    by = {(ln.flow_id, ln.cos): ln for ln in inv.lines}
    assert by[("be", "be")].exact_amount == 0
    assert by[("be", "ds")].quantity * 3600 * 1000 == pytest.approx(40)  # ms
    assert by[("ds", "ds")].quantity * 3600 * 1000 == pytest.approx(100)
