"""Makes ``ledger-v3.sqlite``: a ledger written by the code before Alembic (schema_version 3).

Provenance: run once with main at commit dc293e4 (``git archive dc293e4 python pricebooks``, that tree's
``python`` first on ``sys.path``):

    PYTHONPATH=/tmp/old/python python tests/pricing/data/make_v3_ledger.py tests/pricing/data

It writes ``ledger-v3.sqlite`` (tenants acme/vbp, beta/fbp, gamma/softbw; usage; one issued invoice),
``ledger-v3-usage.jsonl`` (the records it ingested, as that code wrote them) and ``ledger-v3-invoices.json``
(the invoices that code computed). ``test_migrations.py`` upgrades a copy in place and compares.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from paccp.common.usage import UsageRecord, write_usage
from paccp.pricing.charging import build_invoice, parse_period
from paccp.pricing.ledger import Ledger

T0 = 1_793_491_200_000_000_000  # 2026-11-01T00:00:00Z
H = 3_600_000_000_000
G = 1_000_000_000
BOOK = (Path(__file__).parent / "book-v3.toml").read_text()


def rec(**kw: object) -> UsageRecord:
    base: dict[str, object] = {"record_id": "r", "source": "manual", "tenant": "acme", "vm": "vm1",
                               "flow_id": "f1", "cos": "be", "theta_bps": 0, "omega": "1",
                               "start_ns": T0, "end_ns": T0 + H, "bytes": 1000}  # fmt: skip
    base.update(kw)
    return UsageRecord.model_validate(base)


def main(out: Path) -> None:
    db = out / "ledger-v3.sqlite"
    db.unlink(missing_ok=True)
    led = Ledger(str(db))
    led.add_tenant("acme", "vbp", BOOK)
    led.add_tenant("beta", "fbp", BOOK)
    led.add_tenant("gamma", "softbw", BOOK)
    recs = [
        rec(record_id="a1", cos="ds", omega="2.0"),  # stored as "2.0": the migration re-hashes it as "2"
        rec(record_id="a2", vm="vm2", cos="mrg", theta_bps=5 * G, omega="1.50", start_ns=T0 - H),
        rec(record_id="a3", vm="vm3", start_ns=T0 + 2 * H, end_ns=T0 + 5 * H),
        rec(record_id="b1", tenant="beta", cos="ds", omega="3", end_ns=T0 + H // 2),
        rec(record_id="b2", tenant="beta", cos="mrg", theta_bps=2 * G, omega="2", start_ns=T0 + H // 2),
        rec(record_id="g1", tenant="gamma", guarantee="fair", bytes=5 * G * 3600 // 8),
        rec(record_id="g2", tenant="gamma", cos="mrg", theta_bps=2 * G, guarantee="strict",
            bytes=3 * G * 3600 // 8),
    ]  # fmt: skip
    write_usage(recs, out / "ledger-v3-usage.jsonl")
    led.ingest_file(out / "ledger-v3-usage.jsonl")
    invoices = {}
    for t in led.tenants():
        for period in ("2026-10", "2026-11"):
            s, e = parse_period(period)
            inv = build_invoice(t.name, t.model, t.book, led.usage(t.name, s, e), period).to_json()
            invoices[f"{t.name} {period}"] = inv
    body = invoices["acme 2026-11"]
    led.issue("acme", "2026-11", "USD", str(body["total"]), body)
    (out / "ledger-v3-invoices.json").write_text(json.dumps(invoices, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
