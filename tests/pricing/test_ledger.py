"""The ledger: schema and migrations, append-only usage, idempotent all-or-nothing ingestion, invoices."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest
from pricing_fixtures import BOOK, T0, H, rec
from sqlalchemy import text
from sqlalchemy.exc import DatabaseError

from paccp.common.usage import UsageRecord, write_usage
from paccp.errors import UserError
from paccp.pricing.book import PriceBook
from paccp.pricing.charging import build_invoice, charge, parse_period
from paccp.pricing.ledger import Ledger

G = 1_000_000_000


def _ledger(db: str, model: str = "vbp", tenant: str = "acme") -> Ledger:
    led = Ledger(db)
    led.add_tenant(tenant, model, BOOK)
    return led


def _invoice(led: Ledger, tenant: str = "acme", period: str = "2026-11") -> dict[str, object]:
    t = led.tenant(tenant)
    s, e = parse_period(period)
    return build_invoice(t.name, t.model, t.book, led.usage(tenant, s, e), period).to_json()


def test_usage_is_append_only(db: str) -> None:
    led = _ledger(db)
    led.ingest([rec()], tenant="acme")
    for stmt in ("UPDATE usage SET bytes = 0", "DELETE FROM usage"):
        with pytest.raises(DatabaseError, match="append-only"), led.engine.begin() as conn:
            conn.execute(text(stmt))
    assert led.count_usage() == 1


def test_ingest_idempotent_and_conflict_rejected(db: str) -> None:
    led = _ledger(db)
    first = led.ingest([rec(record_id="a"), rec(record_id="b", vm="vm2")], tenant="acme")
    assert (first.new, first.unchanged) == (2, 0)
    again = led.ingest([rec(record_id="a"), rec(record_id="b", vm="vm2")], tenant="acme")
    assert (again.new, again.unchanged) == (0, 2)
    with pytest.raises(UserError, match="'a' was already ingested with different content"):
        led.ingest([rec(record_id="c"), rec(record_id="a", bytes=999)], tenant="acme")
    assert led.count_usage() == 2  # 'c' was not written either: one transaction per file
    with pytest.raises(UserError, match="appears twice with different content"):
        led.ingest([rec(record_id="d"), rec(record_id="d", bytes=5)], tenant="acme")


def test_unknown_tenant_rejected_nothing_written(db: str) -> None:
    led = _ledger(db)
    with pytest.raises(UserError, match="unknown tenant 'zed'"):
        led.ingest([rec(record_id="a"), rec(record_id="b", tenant="zed")], tenant=None)
    assert led.count_usage() == 0


def test_tenant_re_add(db: str) -> None:
    led = _ledger(db)
    assert led.add_tenant("acme", "vbp", BOOK) is False
    with pytest.raises(UserError, match="different model or book"):
        led.add_tenant("acme", "fbp", BOOK)
    with pytest.raises(UserError, match="no \\[softbw\\] section"):
        led.add_tenant("x", "softbw", BOOK.split("[softbw]")[0])


def test_vbp_charges_vm_hours_not_flow_hours(db: str) -> None:
    """An MRG VM (5 Gb/s, 2): flow A alone for 1 h, then A and B together for 1 h (both carry the VM's pair).

    That is 2 VM-hours at 0.10 + 0.06 + 0.20 = 0.36 (not 3 flow-hours); then 1 h idle (not charged), then
    a VM-level record of the DS VM2 (0, 2) for 30 min at 0.16.
    """
    led = _ledger(db)
    mrg = {"cos": "mrg", "vm": "vm1", "theta_bps": 5 * G, "omega": "2"}
    led.ingest(
        tenant="acme",
        records=[
            rec(record_id="a", flow_id="A", end_ns=T0 + 2 * H, **mrg),
            rec(record_id="b", flow_id="B", start_ns=T0 + H, end_ns=T0 + 2 * H, **mrg),
            rec(record_id="v2", vm="vm2", flow_id=None, cos="ds", omega="2", start_ns=T0 + 3 * H,
                end_ns=T0 + 3 * H + H // 2),
        ]
    )  # fmt: skip
    inv = _invoice(led)
    lines = inv["lines"]
    assert isinstance(lines, list)
    got = [
        (ln["vm"], ln["theta_bps"], ln["omega"], ln["quantity"], ln["unit_price"], ln["amount"])
        for ln in lines
    ]
    assert got == [
        ("vm1", 5 * G, "2", "2.000000", "0.360000", "0.72"),
        ("vm2", 0, "2", "0.500000", "0.160000", "0.08"),
    ]
    assert inv["total"] == "0.80"
    assert inv["subtotals"] == {"mrg": "0.72", "ds": "0.08"}


def test_fbp_runtime_upgrade_time_sliced(db: str) -> None:
    """Flow f: BE 1 h (add-on 0), DS (0, 2) 30 min (0.032/h), MRG (2.5 Gb/s, 2) 30 min (0.132/h)."""
    led = _ledger(db, "fbp")
    led.ingest(
        tenant="acme",
        records=[
            rec(record_id="s0"),
            rec(record_id="s1", cos="ds", omega="2", start_ns=T0 + H, end_ns=T0 + 3 * H // 2),
            rec(
                record_id="s2",
                cos="mrg",
                omega="2",
                theta_bps=2_500_000_000,
                start_ns=T0 + 3 * H // 2,
                end_ns=T0 + 2 * H,
            ),
        ],
    )
    inv = _invoice(led)
    # exact 0 + 0.016 + 0.066 = 0.082 -> total 0.08; floors 0.01 + 0.06 leave one cent, which goes to the
    # larger remainder (a tie, 0.006 each: the earlier line)
    got = [(ln["cos"], ln["amount"]) for ln in inv["lines"]]  # type: ignore[union-attr]
    assert got == [("be", "0.00"), ("ds", "0.02"), ("mrg", "0.06")]
    assert inv["total"] == "0.08"


def test_many_sub_cent_lines_are_not_rounded_away(db: str) -> None:
    """100 FBP DS slices of 36 s each (0.032/h x 0.01 h = 0.00032 each): the total is 0.032 -> 0.03."""
    led = _ledger(db, "fbp")
    led.ingest(
        tenant="acme",
        records=[
            rec(record_id=f"s{i}", flow_id=f"f{i}", cos="ds", omega="2", end_ns=T0 + H // 100)
            for i in range(100)
        ],
    )
    inv = _invoice(led)
    amounts = [Decimal(str(ln["amount"])) for ln in inv["lines"]]  # type: ignore[union-attr]
    assert inv["total"] == "0.03" and sum(amounts) == Decimal("0.03") and amounts.count(Decimal("0.01")) == 3


def test_softbw_charging_rules(db: str) -> None:
    led = _ledger(db, "softbw")
    ten_h = 10 * H
    led.ingest(
        tenant="acme",
        records=[
            # strict B = 2 at r = 5 Gb/s for 10 h: 2 (1.2) 0.05 x 10 = 1.20; x = 3: 3 (0.3) 0.03 x 10 = 0.27
            rec(record_id="st", flow_id="st", cos="mrg", theta_bps=2 * G, guarantee="strict",
                end_ns=T0 + ten_h, bytes=5 * G * 36_000 // 8),
            # dynamic, met: S = 900 GB by T = 1 h -> S/T = 2 Gb/s, r = 2: 2 (1.2) 0.03 = 0.072
            rec(record_id="dm", flow_id="dm", guarantee="dynamic", bytes=900 * G, deadline_ns=T0 + H,
                deadline_met=True),
            # dynamic, missed: not charged
            rec(record_id="dx", flow_id="dx", guarantee="dynamic", bytes=900 * G, deadline_ns=T0 + H // 2,
                deadline_met=False),
            # fair r = 5 Gb/s for 1 h: 5 (0.5) 0.03 = 0.075 -> 0.08
            rec(record_id="fa", flow_id="fa", guarantee="fair", bytes=5 * G * 3600 // 8),
            rec(record_id="be", flow_id="be", bytes=10**12),  # best effort: free
        ]
    )  # fmt: skip
    inv = _invoice(led)
    got = {(ln["flow_id"], ln["description"]): ln["amount"] for ln in inv["lines"]}  # type: ignore[union-attr]
    assert got == {
        ("be", "best effort"): "0.00",
        ("dm", "dynamic"): "0.07",
        ("dx", "dynamic, deadline missed: not charged"): "0.00",
        ("fa", "fair share"): "0.08",
        ("st", "strict"): "1.20",
        ("st", "above B as fair share"): "0.27",
    }
    assert inv["total"] == "1.62"


@pytest.mark.parametrize(
    ("kw", "needle"),
    [
        ({"guarantee": "dynamic"}, "needs deadline_ns and deadline_met"),
        ({"guarantee": "strict"}, "strict guarantee needs theta_bps"),
        (
            {"guarantee": "fair", "bytes": 10 * G * 3600 // 8 + 1},
            r"more than the link \(capacity C = 10Gbit\)",
        ),
    ],
)
def test_softbw_uncharged_records_rejected(db: str, kw: dict[str, object], needle: str) -> None:
    led = _ledger(db, "softbw")
    with pytest.raises(UserError, match=needle):
        led.ingest([rec(record_id="ok"), rec(record_id="bad", **kw)], tenant="acme")
    assert led.count_usage() == 0


def test_period_boundary_splits_by_time(db: str) -> None:
    led = _ledger(db)
    led.ingest([rec(start_ns=T0 - H, end_ns=T0 + H)], tenant="acme")  # 23:00 on Oct 31 to 01:00 on Nov 1
    assert _invoice(led, period="2026-10")["total"] == "0.10"
    assert _invoice(led, period="2026-11")["total"] == "0.10"
    assert _invoice(led, period="2026-12")["total"] == "0.00"


def test_invoice_json_and_csv(db: str) -> None:
    led = _ledger(db)
    led.ingest([rec(cos="ds", omega="2")], tenant="acme")
    t = led.tenant("acme")
    s, e = parse_period("2026-11")
    inv = build_invoice("acme", "vbp", t.book, led.usage("acme", s, e), "2026-11")
    csv_lines = inv.to_csv().splitlines()
    assert csv_lines[0].startswith(
        "vm,flow_id,cos,theta_bps,omega,description,quantity,unit,unit_price,amount"
    )
    assert csv_lines[1].endswith(",0.160000,0.16,USD") and csv_lines[-1].endswith(",0.16,USD")
    assert json.loads(json.dumps(inv.to_json()))["total"] == "0.16"
    assert isinstance(inv.total, Decimal)


def test_parquet_file_ingest(db: str, tmp_path: Path) -> None:
    led = _ledger(db)
    path = tmp_path / "u.parquet"
    recs: list[UsageRecord] = [
        rec(record_id=f"p{i}", start_ns=T0 + i * H, end_ns=T0 + (i + 1) * H) for i in range(3)
    ]
    write_usage(recs, path)
    assert led.ingest_file(path, tenant="acme").new == 3
    assert led.ingest_file(path, tenant="acme").new == 0
    assert _invoice(led)["total"] == "0.30"


def test_issued_invoices_are_revisions_never_rewritten(db: str) -> None:
    led = _ledger(db)
    led.ingest([rec(record_id="a")], tenant="acme")

    def issue() -> tuple[int, bool]:
        body = _invoice(led)
        return led.issue("acme", "2026-11", "USD", str(body["total"]), body)

    assert issue() == (1, True)
    assert issue() == (1, False)  # same content: nothing new
    led.ingest([rec(record_id="late", vm="vm9")], tenant="acme")  # November usage arriving after the invoice
    assert issue() == (2, True)
    assert [(r, tot) for r, tot, _at in led.issued("acme", "2026-11")] == [(1, "0.10"), (2, "0.20")]
    with pytest.raises(DatabaseError, match="immutable"), led.engine.begin() as conn:
        conn.execute(text("UPDATE invoice SET total = '0'"))


def test_vbp_sweep_matches_minute_by_minute_count(book: PriceBook) -> None:
    """Random overlapping records of 3 VMs on a minute grid: the sweep equals a brute-force minute count."""
    import random

    rng = random.Random(7)
    minute = H // 60
    pairs = {"vm0": ("be", 0, "1"), "vm1": ("ds", 0, "2"), "vm2": ("mrg", 3 * G, "2")}
    recs = []
    for i in range(120):
        vm = rng.choice(sorted(pairs))
        cos, th, om = pairs[vm]
        a = rng.randrange(0, 600)
        b = a + rng.randrange(0, 90)
        recs.append(rec(record_id=f"x{i}", vm=vm, flow_id=f"f{i}", cos=cos, theta_bps=th, omega=om,
                        start_ns=T0 + a * minute, end_ns=T0 + b * minute))  # fmt: skip
    s, e = parse_period("2026-11")
    got = {ln.vm: ln.exact_amount for ln in charge(recs, "vbp", book, s, e)}
    hourly = {
        "vm0": Decimal("0.10"),
        "vm1": Decimal("0.16"),
        "vm2": Decimal("0.10") + Decimal("0.06") + Decimal("0.12"),
    }
    for vm in pairs:
        busy = {
            m
            for r in recs
            if r.vm == vm
            for m in range((r.start_ns - T0) // minute, (r.end_ns - T0) // minute)
        }
        assert got.get(vm, Decimal(0)) == pytest.approx(hourly[vm] * len(busy) / 60, abs=Decimal("1e-20"))


def test_writers_lock_up_front_readers_do_not(db: str, backend: str) -> None:
    """A write transaction holds the ledger's write lock from its start; another writer waits (here: gives
    up at once), a reader reads the committed state meanwhile."""
    led = _ledger(db)
    led.ingest([rec(record_id="a")], tenant="acme")
    with led._write() as conn:
        conn.execute(text("INSERT INTO ingest_batch (source_file, file_sha256, n_new, n_same, ingested_at)"
                          " VALUES ('x', 'x', 0, 0, 'now')"))  # fmt: skip
        if backend == "sqlite":
            import sqlite3

            other = sqlite3.connect(db, timeout=0, isolation_level=None)
            with pytest.raises(sqlite3.OperationalError, match="locked"):
                other.execute("BEGIN IMMEDIATE")
            other.close()
        else:
            from paccp.pricing.ledger import PG_LOCK_KEY

            other_led = Ledger(db)
            with other_led.engine.connect() as oc:
                assert oc.execute(text(f"SELECT pg_try_advisory_xact_lock({PG_LOCK_KEY})")).scalar() is False
            other_led.close()
        assert led.tenant("acme").model == "vbp"  # a reader, while the write lock is held
        assert led.count_usage() == 1


def test_usage_ids_are_per_tenant(db: str) -> None:
    """Two tenants may use the same record id; neither can see, block or overwrite the other's record."""
    led = _ledger(db)
    led.add_tenant("zeta", "vbp", BOOK)
    assert led.ingest([rec(record_id="same")], tenant="acme").new == 1
    assert led.ingest([rec(record_id="same", tenant="zeta", bytes=7)], tenant="zeta").new == 1
    assert _invoice(led, "acme")["total"] == _invoice(led, "zeta")["total"] == "0.10"


def test_ingest_is_scoped_to_the_named_tenant(db: str) -> None:
    """A file for acme that names zeta is rejected whole; the operator's multi-tenant import accepts it."""
    led = _ledger(db)
    led.add_tenant("zeta", "vbp", BOOK)
    mixed = [rec(record_id="a"), rec(record_id="z", tenant="zeta")]
    with pytest.raises(UserError, match="belongs to tenant 'zeta', not 'acme'"):
        led.ingest(mixed, tenant="acme")
    assert led.count_usage() == 0
    assert led.ingest(mixed, tenant=None).new == 2  # explicit multi-tenant import


def test_omega_spelling_does_not_change_content(db: str) -> None:
    """The same record with omega "2.0" and "2" is one record (canonical content hash)."""
    led = _ledger(db)
    assert led.ingest([rec(record_id="a", cos="ds", omega="2.0")], tenant="acme").new == 1
    again = led.ingest([rec(record_id="a", cos="ds", omega="2")], tenant="acme")
    assert (again.new, again.unchanged) == (0, 1)
    assert _invoice(led)["lines"][0]["omega"] == "2"  # type: ignore[index]


def test_decimals_are_never_floats(db: str) -> None:
    """omega and issued totals come back as the exact decimals that went in (NUMERIC / decimal text)."""
    led = _ledger(db)
    om = "1.000000000000000000000000000001"  # 31 significant digits: a double would lose them
    led.ingest([rec(record_id="a", cos="ds", omega=om)], tenant="acme")
    (got,) = led.usage("acme", 0, 2**63 - 1)
    assert got.omega == Decimal(om) and isinstance(got.omega, Decimal)
    led.issue("acme", "2026-11", "USD", "12345678901234.57", {"k": 1})
    assert led.issued("acme", "2026-11")[0][1] == "12345678901234.57"
    with led.engine.connect() as conn:
        raw = conn.execute(text("SELECT omega, total FROM usage, invoice")).one()
    assert not any(isinstance(v, float) for v in raw)
