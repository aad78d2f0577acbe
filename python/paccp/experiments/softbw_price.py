"""``softbw-price``: SoftBW usage-based charging of a SoftBW run, as ``paccp bill`` does it, and its
consistency.

Two servers with 10 Gb/s ports (the book's C), four VMs each, billed per 1 s cycle for an hour (five
minutes with --quick), run by the SoftBW interval model (:mod:`paccp.softbw.model`):

- ``h0`` (tenant acme, no over-commitment, N = 1): strict 4 Gb/s, dynamic (jobs of up to 4 Gb/s x 30 s),
  fair, best effort;
- ``h1`` (tenant globex, N = 2): two strict 6 Gb/s VMs with different demands, a dynamic 6 Gb/s VM, best
  effort: 18 Gb/s of guarantees on a 10 Gb/s port, so guarantees fail at times.

Per-VM demand: i.i.d. exponential per cycle with the mean in :data:`VMS`. The run's usage records
(:mod:`paccp.softbw.records`) are ingested into a fresh SQLite ledger by what ``paccp bill tenant add``,
``ingest`` and ``invoice`` call (:func:`bill`), and what ``paccp price consistency RUN --model softbw`` calls
gives the per-VM table.
The invoice totals are cross-checked against the slides' formulas evaluated independently (floats) on the
per-cycle table.
"""

from __future__ import annotations

import json
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np

from paccp.common.usage import write_usage
from paccp.experiments import Experiment, ExperimentOptions, check, register
from paccp.scenario import SoftBWCfg, check_softbw_host, epoch_ns
from paccp.softbw.model import KINDS, simulate
from paccp.softbw.records import VmMeta, cycle_rows, usage_records, write_cycles

EXP_ID = "softbw-price"
TITLE = "SoftBW usage-based charging: an invoice from a SoftBW run and per-VM price-performance consistency"
CAPACITY_BPS = 10e9
JOB_WINDOW_S = 30
EPOCH = "2026-11-01T00:00:00Z"
PERIOD = "2026-11"
HOSTS = {"h0": ("acme", 1.0), "h1": ("globex", 2.0)}  # host -> (tenant, over-commitment N)
G = 1e9
# (host, vm, kind, B or the dynamic VM's largest S/T in bit/s, mean demand bit/s)
VMS: list[tuple[str, str, str, float, float]] = [
    ("h0", "acme-strict", "strict", 4 * G, 3 * G),
    ("h0", "acme-dynamic", "dynamic", 4 * G, 2 * G),
    ("h0", "acme-fair", "fair", 0.0, 2 * G),
    ("h0", "acme-be", "best_effort", 0.0, 2 * G),
    ("h1", "globex-strict-a", "strict", 6 * G, 4 * G),
    ("h1", "globex-strict-b", "strict", 6 * G, 7 * G),
    ("h1", "globex-dynamic", "dynamic", 6 * G, 4 * G),
    ("h1", "globex-be", "best_effort", 0.0, 3 * G),
]


def config() -> SoftBWCfg:
    """The run's guarantees in the scenario schema's ``[softbw]`` form, validated by the same rules."""
    guarantees: list[dict[str, Any]] = []
    for _h, vm, kind, b, _d in VMS:
        g: dict[str, Any] = {"vm": vm, "kind": kind}
        if kind == "strict":
            g["rate"] = int(b)
        elif kind == "dynamic":
            g["size"] = int(b * JOB_WINDOW_S / 8)
            g["deadline"] = f"{JOB_WINDOW_S}s"
        guarantees.append(g)
    cfg = SoftBWCfg.model_validate(
        {
            "host_overcommit": {h: n for h, (_t, n) in HOSTS.items()},
            "billing_cycle": "1s",
            "guarantees": guarantees,
        }
    )
    for h in HOSTS:
        sold = sum(g.sold_bps for g, v in zip(cfg.guarantees, VMS, strict=True) if v[0] == h)
        check_softbw_host(cfg, h, sold, CAPACITY_BPS)
    return cfg


def bill(run_dir: Path, out: Path, db: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The run's usage billed in a fresh ledger as ``paccp bill tenant add / ingest / invoice`` and ``paccp
    price consistency --model softbw`` do it (their library calls, their text): per tenant its invoice
    (JSON body, with .csv and .txt beside), and the per-VM consistency (JSON body, with .txt)."""
    from paccp.pricing import softbw_consistency as sbw
    from paccp.pricing.book import load_book
    from paccp.pricing.charging import build_invoice
    from paccp.pricing.ledger import Ledger
    from paccp.pricing.period import Period
    from paccp.pricing.render import as_text, invoice_table, table_text

    book, text = load_book()
    led = Ledger(str(db))
    tenants = sorted({t for t, _n in HOSTS.values()})
    for tenant in tenants:
        led.add_tenant(tenant, "softbw", text)
    led.ingest_file(run_dir / "usage.jsonl", tenant=None)
    s, e = Period.parse(PERIOD, "--period").bounds_ns()
    invoices: dict[str, Any] = {}
    for tenant in tenants:
        t = led.tenant(tenant)
        inv = build_invoice(t.name, t.model, t.book, led.usage(t.name, s, e), PERIOD)
        invoices[tenant] = json.loads(json.dumps(inv.to_json()))
        (out / f"invoice-{tenant}.csv").write_text(inv.to_csv(), encoding="utf-8")
        tab = invoice_table(inv, tenant, PERIOD, t.model)
        (out / f"invoice-{tenant}.txt").write_text(table_text(tab), encoding="utf-8")
    tolerance = 0.05  # the command's default
    vms = sbw.softbw_consistency(run_dir, book, tolerance)
    cons = {"model": "softbw", "tolerance": tolerance, "vms": [v.to_json() for v in vms]}
    (out / "consistency.txt").write_text(
        as_text(lambda c: sbw.print_table(vms, book.currency, tolerance, c)), encoding="utf-8"
    )
    return invoices, json.loads(json.dumps(cons))


def expected_totals(
    cycles: list[dict[str, Any]], jobs: list[dict[str, Any]], p0: float, beta: float
) -> dict[str, float]:
    """Independent float evaluation of the slides' prices per tenant (for the cross-check only)."""
    c_g = CAPACITY_BPS / G
    p1 = beta * p0
    tot: dict[str, float] = {}
    for c in cycles:
        r, h = c["rate_bps"] / G, 1 / 3600
        if c["kind"] == "strict":
            b = c["sold_bps"] / G
            amt = min(r, b) * (1 + b / c_g) * p0 + (max(r - b, 0) ** 2 / c_g) * p1
        elif c["kind"] == "fair":
            amt = r * r / c_g * p1
        else:
            continue
        tot[c["tenant"]] = tot.get(c["tenant"], 0.0) + amt * h
    for j in jobs:
        if j["deadline_met"]:
            hours = (j["end_ns"] - j["start_ns"]) / 3.6e12
            r = j["bytes"] * 8 / ((j["end_ns"] - j["start_ns"]) / 1e9) / G
            need = j["theta_bps"] / G
            tot[j["tenant"]] = tot.get(j["tenant"], 0.0) + r * (1 + need / c_g) * p1 * hours
    return tot


def _check_cycles(cycles_n: int) -> None:
    """Refuse a --duration beyond the limit of sampled values (cycles x VMs), with the estimate."""
    from paccp import limits
    from paccp.errors import UserError

    cells = cycles_n * len(VMS)
    if cells > limits.MAX_SAMPLE_CELLS // 100:  # each cycle and VM is a usage record (about 100x a value)
        top = limits.MAX_SAMPLE_CELLS // 100 // len(VMS)
        raise UserError(
            f"--duration: {EXP_ID} would bill {cycles_n} 1 s cycles x {len(VMS)} VMs = {cells:.3g} usage"
            f" records; at most {limits.MAX_SAMPLE_CELLS // 100:.3g} (--duration {top}s or less)"
        )


def run(opts: ExperimentOptions) -> dict[str, Any]:
    """Simulate, bill as the commands do, check consistency; write DIR/softbw-price/."""
    from paccp.experiments._common import print_table, write_table
    from paccp.pricing.book import load_book
    from paccp.pricing.charging import charge

    t0 = time.perf_counter()
    out = opts.out_dir / EXP_ID
    run_dir = out / "run"
    cfg = config()
    cycles_n = 300 if opts.quick else 3600
    if opts.duration_ns is not None:
        cycles_n = max(JOB_WINDOW_S, opts.duration_ns // 1_000_000_000)
    _check_cycles(cycles_n)
    run_dir.mkdir(parents=True, exist_ok=True)
    hosts = list(HOSTS)
    slots = {h: [v for v in VMS if v[0] == h] for h in hosts}
    n = max(len(s) for s in slots.values())
    kinds = np.full((len(hosts), n), KINDS.index("best_effort"), dtype=np.int64)
    sold = np.zeros((len(hosts), n))
    mean = np.zeros((len(hosts), n))
    metas = []
    for i, h in enumerate(hosts):
        for k, (_h, vm, kind, b, d) in enumerate(slots[h]):
            kinds[i, k], sold[i, k], mean[i, k] = KINDS.index(kind), b, d
            metas.append(VmMeta(i, k, h, vm, HOSTS[h][0]))
    rng = np.random.default_rng([opts.seed, 7])
    demand = rng.exponential(1.0, size=(cycles_n, len(hosts), n)) * mean[None]
    res = simulate(np.full(len(hosts), CAPACITY_BPS), kinds, sold, demand, job_window=JOB_WINDOW_S)
    ep = epoch_ns(EPOCH)
    records = usage_records(res, metas, ep, f"{EXP_ID}-s{opts.seed}")
    write_usage(records, run_dir / "usage.jsonl")
    cycles = cycle_rows(res, metas, ep)
    write_cycles(cycles, run_dir)

    db = out / "ledger.sqlite"
    db.unlink(missing_ok=True)
    invoices, cons = bill(run_dir, out, db)
    book, _ = load_book()
    assert book.softbw is not None
    jobs = [r.model_dump() for r in records if r.guarantee == "dynamic"]
    expect = expected_totals(cycles, jobs, float(book.softbw.p0), float(book.softbw.beta))
    exact: dict[str, tuple[Decimal, Decimal]] = {}
    for t in invoices:
        lines = charge([r for r in records if r.tenant == t], "softbw", book, 0, 2**63 - 1)
        ex = sum((ln.exact_amount for ln in lines), Decimal(0))
        exact[t] = (ex, book.rounding.money(ex))
    checks = make_checks(invoices, cons, expect, exact, jobs, cycles)
    plot(cycles, out)
    summary: dict[str, Any] = {
        "kind": "experiment",
        "experiment": EXP_ID,
        "title": TITLE,
        "quick": opts.quick,
        "seed": opts.seed,
        "setup": {
            "cycles": cycles_n,
            "cycle_s": 1,
            "capacity_bps": CAPACITY_BPS,
            "hosts": {h: {"tenant": t, "overcommit": nn} for h, (t, nn) in HOSTS.items()},
            "vms": [
                {"host": h, "vm": v, "kind": k, "b_bps": b, "mean_demand_bps": d} for h, v, k, b, d in VMS
            ],
            "demand": "i.i.d. exponential per VM and 1 s cycle",
            "dynamic_jobs": f"{JOB_WINDOW_S} s blocks",
            "guarantees_schema": cfg.model_dump(mode="json"),
            "records": len(records),
        },
        "invoices": {t: {"total": inv["total"], "lines": len(inv["lines"])} for t, inv in invoices.items()},
        "expected_totals_float": expect,
        "consistency": cons["vms"],
        "checks": checks,
        "wall_s": round(time.perf_counter() - t0, 2),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    write_table(summary, out)
    print_table(summary)
    return summary


def make_checks(
    invoices: dict[str, Any],
    cons: dict[str, Any],
    expect: dict[str, float],
    exact: dict[str, tuple[Decimal, Decimal]],
    jobs: list[dict[str, Any]],
    cycles: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    """The slides' pricing statements against the invoice and the consistency table."""
    out = []
    for t, inv in invoices.items():
        ex, rounded = exact[t]
        want = expect.get(t, 0.0)
        out.append(
            check(
                f"{t}: `paccp bill` invoice = the exact charge rounded once, and the exact charge = the "
                "slides' formulas evaluated independently (floats) on the cycle table (relative 1e-6)",
                "strict r(1+B/C)P0 (+ fair share above B), dynamic r(1+S/TC)P1, fair r(r/C)P1, BE free",
                f"invoice {inv['total']}, exact {ex:.6f}, formulas {want:.6f}",
                inv["total"] == str(rounded) and abs(float(ex) - want) <= 1e-6 * max(want, 1e-12),
            )
        )
    late = [j for j in jobs if not j["deadline_met"]]
    late_lines = [
        ln
        for inv in invoices.values()
        for ln in inv["lines"]
        if ln["description"].startswith("dynamic, deadline missed")
    ]
    out.append(
        check(
            "a dynamic job that missed its deadline is not charged",
            "not charged",
            f"{len(late)} late of {len(jobs)} jobs; their lines charge "
            f"{sum(float(ln['amount']) for ln in late_lines):.2f}",
            None if not late else bool(late_lines) and all(float(ln["amount"]) == 0 for ln in late_lines),
        )
    )
    above = [c for c in cycles if c["kind"] == "strict" and c["rate_bps"] > c["sold_bps"]]
    above_lines = [
        ln for inv in invoices.values() for ln in inv["lines"] if ln["description"].startswith("above B")
    ]
    out.append(
        check(
            "traffic above a strict B is charged as fair share (its own line, x(x/C)P1)",
            "charged as fair share",
            f"{len(above)} cycles above B; {len(above_lines)} line(s), "
            f"{sum(float(ln['amount']) for ln in above_lines):.2f}",
            None if not above else bool(above_lines),
        )
    )
    vms = cons["vms"]
    worse = [v for v in vms if v["perf_ratio"] < 0.999 and v["kind"] != "best_effort"]
    out.append(
        check(
            "who gets less pays less: every VM that got less than it was owed pays less than full price",
            "price-performance consistency",
            ", ".join(f"{v['vm']} perf {v['perf_ratio']:.3f} price {v['price_ratio']:.3f}" for v in worse)
            or "none short",
            None if not worse else all(v["price_ratio"] < 1 for v in worse),
        )
    )
    out.append(
        check(
            "no VM pays more than it gets (price ratio <= perf ratio x 1.05)",
            "consistent",
            f"{sum(v['pays_more_than_gets'] for v in vms)} of {len(vms)} flagged",
            not any(v["pays_more_than_gets"] for v in vms),
        )
    )
    return out


def plot(cycles: list[dict[str, Any]], out: Path) -> Path:
    """rates.png: per-VM rate and fulfilment over time (10 s means), one column per host."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    hosts = sorted({c["host"] for c in cycles})
    fig, axes = plt.subplots(2, len(hosts), figsize=(6 * len(hosts), 6), sharex=True, squeeze=False)
    for col, h in enumerate(hosts):
        for vm in sorted({c["vm"] for c in cycles if c["host"] == h}):
            cs = [c for c in cycles if c["vm"] == vm]
            t = np.array([c["cycle"] for c in cs])
            r = np.array([c["rate_bps"] for c in cs]) / G
            f = np.array([np.nan if c["fulfilment"] is None else c["fulfilment"] for c in cs])
            w = 10
            m = len(t) // w * w
            axes[0][col].plot(t[:m:w], r[:m].reshape(-1, w).mean(1), label=f"{vm} ({cs[0]['kind']})")
            if cs[0]["kind"] != "best_effort":
                blocks = f[:m].reshape(-1, w)
                owed = (~np.isnan(blocks)).sum(axis=1)
                fb = np.where(owed > 0, np.nansum(blocks, axis=1) / np.maximum(owed, 1), np.nan)
                axes[1][col].plot(t[:m:w], fb, label=vm)
        axes[0][col].set_title(f"{h}: rate (Gb/s, 10 s means)")
        axes[1][col].set_title(f"{h}: fulfilment min(r, B) / min(d, B)")
        axes[1][col].set_xlabel("time (s)")
        for ax in axes[:, col]:
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
    fig.tight_layout()
    p = out / "rates.png"
    fig.savefig(p, dpi=100)
    plt.close(fig)
    return p


register(Experiment(id=EXP_ID, title=TITLE, run=run, takes_duration=True))
