"""``paccp bench ledger``: ingest speed of the billing ledger on SQLite and on PostgreSQL (records/s).

One synthetic VBP usage file (N records of 500 VMs, 15-minute slices; default N = 200,000) is ingested
into a fresh SQLite file and into a fresh database on a throwaway PostgreSQL server
(:mod:`paccp.pricing.pgtemp`, with PostgreSQL's default durability: fsync and synchronous commit on). For
each backend the JSON gives the wall time and records/s of the whole ``ingest_file`` (read, validate, check
chargeability and duplicates, write in one transaction, commit), of the re-ingest (a no-op) and of the
invoice; ``parse_s`` is the time of reading and validating the file record by record (the path of any
other file).
``ingest_client_cpu_s`` is this process's CPU time during the ingest (all its threads),
``ingest_server_cpu_s`` PostgreSQL's (its processes, from ``/proc``), and
``ingest_records_per_cpu_s`` the records per CPU second of
both together: on a shared machine wall times vary with the load (the load average is given before and
after each backend), CPU time much less. ``columnar_parse_s`` is the time of the columnar reader alone
(:mod:`paccp.pricing.columnar`: parse, validate, content hashes), the read path of a plain JSONL file.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from paccp.common.usage import UsageRecord, read_usage, write_usage
from paccp.errors import UserError
from paccp.pricing.book import default_book_path
from paccp.pricing.columnar import read_plain_jsonl

T0 = 1_793_491_200_000_000_000  # 2026-11-01T00:00:00Z
SLICE_NS = 15 * 60 * 10**9
N_VMS = 500


def synthetic_usage(n: int, path: Path) -> None:
    """``n`` VBP records of tenant ``bench``: VM i % 500 sends in 15-minute slices through November."""
    cos_of = ("be", "ds", "mrg")
    recs = []
    for i in range(n):
        vm = i % N_VMS
        cos = cos_of[vm % 3]
        start = T0 + (i // N_VMS) * SLICE_NS
        recs.append(
            UsageRecord.model_validate(
                {
                    "record_id": f"bench:{i}",
                    "source": "manual",
                    "tenant": "bench",
                    "vm": f"vm{vm}",
                    "flow_id": f"f{i}",
                    "cos": cos,
                    "theta_bps": 2_000_000_000 if cos == "mrg" else 0,
                    "omega": "1" if cos == "be" else "2",
                    "start_ns": start,
                    "end_ns": start + SLICE_NS,
                    "bytes": 10**9,
                }
            )
        )
    write_usage(recs, path)


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _one(
    db: str, usage: Path, book_text: str, n: int, server_cpu: Callable[[], float] = lambda: 0.0
) -> dict[str, Any]:
    from paccp.pricing.charging import build_invoice, parse_period
    from paccp.pricing.ledger import Ledger

    load_before = _load()
    led = Ledger(db)
    led.add_tenant("bench", "vbp", book_text)
    t, cpu, scpu = time.perf_counter(), time.process_time(), server_cpu()
    res = led.ingest_file(usage, tenant="bench")
    ingest_s, ingest_cpu_s = time.perf_counter() - t, time.process_time() - cpu
    server_cpu_s = server_cpu() - scpu
    if res.new != n:
        raise UserError(f"bench: {res.new} of {n} records ingested")
    t = time.perf_counter()
    again = led.ingest_file(usage, tenant="bench")
    reingest_s = time.perf_counter() - t
    t = time.perf_counter()
    tn = led.tenant("bench")
    s, e = parse_period("2026-11")
    inv = build_invoice("bench", "vbp", tn.book, led.usage("bench", s, e), "2026-11")
    invoice_s = time.perf_counter() - t
    led.close()
    return {
        "ingest_s": round(ingest_s, 3),
        "ingest_records_per_s": round(n / ingest_s),
        "ingest_client_cpu_s": round(ingest_cpu_s, 3),
        "ingest_server_cpu_s": round(server_cpu_s, 3),
        "ingest_records_per_cpu_s": round(n / max(ingest_cpu_s + server_cpu_s, 1e-9)),
        "reingest_s": round(reingest_s, 3),
        "reingest_new": again.new,
        "invoice_s": round(invoice_s, 3),
        "invoice_total": str(inv.total),
        "load_average_before": load_before,
        "load_average_after": _load(),
    }


def run_cli(records: int = 200_000, out: str = "") -> None:
    """Time the ingest on both backends; print JSON (and write it to ``out``)."""
    from paccp.pricing.pgtemp import temp_postgres

    if not 1 <= records <= 5_000_000:
        raise UserError("--records must be between 1 and 5,000,000")
    book_text = default_book_path().read_text(encoding="utf-8")
    results: dict[str, Any] = {"records": records}
    with tempfile.TemporaryDirectory(prefix="paccp-ledgerbench-") as tmp:
        usage = Path(tmp) / "usage.jsonl"
        print(f"bench ledger: writing {records} records ...", file=sys.stderr, flush=True)
        synthetic_usage(records, usage)
        t = time.perf_counter()
        n = sum(1 for _ in read_usage(usage))
        results["parse_s"] = round(time.perf_counter() - t, 3)
        results["parse_records_per_s"] = round(n / (time.perf_counter() - t))
        t, cpu = time.perf_counter(), time.process_time()
        cols = read_plain_jsonl(usage.read_bytes(), lambda _names: {"bench": "vbp"})
        if cols is None or len(cols) != n:
            raise UserError("bench ledger: the columnar reader did not take the synthetic file")
        results["columnar_parse_s"] = round(time.perf_counter() - t, 3)
        results["columnar_parse_cpu_s"] = round(time.process_time() - cpu, 3)
        del cols
        print("bench ledger: SQLite ...", file=sys.stderr, flush=True)
        results["sqlite"] = _one(str(Path(tmp) / "ledger.sqlite"), usage, book_text, n)
        print("bench ledger: PostgreSQL (throwaway server) ...", file=sys.stderr, flush=True)
        with temp_postgres(durable=True) as pg:
            results["postgresql"] = _one(pg.create_database("bench"), usage, book_text, n, pg.server_cpu_s)
            results["postgresql"]["server"] = str(pg.bindir)
    if results["sqlite"]["invoice_total"] != results["postgresql"]["invoice_total"]:
        raise UserError("bench ledger: the two backends gave different invoice totals")
    doc = {
        "ledger": results,
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpu_count": os.cpu_count(),
            "load_average_1_5_15": [round(x, 2) for x in os.getloadavg()],
        },
    }
    text = json.dumps(doc, indent=2, sort_keys=True)
    print(text)
    if out:
        Path(out).write_text(text + "\n", encoding="utf-8")
