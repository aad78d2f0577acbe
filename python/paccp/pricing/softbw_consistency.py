"""Price-performance consistency of a SoftBW run, per VM ("who gets less pays less").

A SoftBW run directory holds ``usage.jsonl`` (what is billed) and ``softbw_cycles.parquet`` (per VM and
billing cycle: demand, guarantee in force, rate; :mod:`paccp.softbw.records`). For each VM:

- *performance ratio*: what it got of what it was owed. Strict and fair: sum min(r, B) / sum min(d, B) over
  the cycles (B = the strict guarantee, or the fair share C / VMs of the host); dynamic: the bytes of its
  jobs that met their deadline over all its jobs' bytes; best effort: nothing is owed (ratio 1).
- *price ratio*: what it was charged over what it would have been charged had every cycle delivered what
  was owed (strict and fair: each cycle's rate raised to at least min(d, B); dynamic: every job on time),
  both computed by the book's own charging rules (:func:`paccp.pricing.charging.charge`).
- flagged when price_ratio > perf_ratio x (1 + tolerance): the VM pays for performance it did not get.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from paccp.common.usage import UsageRecord, read_usage
from paccp.errors import UserError
from paccp.pricing.book import PriceBook
from paccp.pricing.charging import charge

if TYPE_CHECKING:
    from rich.console import Console

COS = {"strict": "mrg", "fair": "ds", "best_effort": "be"}
GUARANTEE = {"strict": "strict", "fair": "fair", "best_effort": "none"}


@dataclass(frozen=True)
class VmRow:
    """One VM's price and performance."""

    tenant: str
    vm: str
    kind: str
    sold_bps: float
    cycles: int
    mean_demand_bps: float
    mean_rate_bps: float
    perf_ratio: float
    charged: Decimal
    full_charge: Decimal
    price_ratio: float
    flagged: bool

    def to_json(self) -> dict[str, Any]:
        """JSON-friendly dict (money as decimal strings)."""
        d = dict(self.__dict__)
        d["charged"], d["full_charge"] = str(self.charged), str(self.full_charge)
        d["pays_more_than_gets"] = d.pop("flagged")
        return d


def _by_vm(records: list[UsageRecord], book: PriceBook) -> dict[str, Decimal]:
    out: dict[str, Decimal] = defaultdict(Decimal)
    for ln in charge(records, "softbw", book, 0, 2**63 - 1):
        out[ln.vm] += ln.exact_amount
    return out


def softbw_consistency(run_dir: str | Path, book: PriceBook, tolerance: float = 0.05) -> list[VmRow]:
    """Per-VM price vs performance of a SoftBW run directory."""
    import pyarrow.parquet as pq

    if tolerance < 0:
        raise UserError("tolerance must not be negative")
    run = Path(run_dir)
    usage, cyc = run / "usage.jsonl", run / "softbw_cycles.parquet"
    for p in (usage, cyc):
        if not p.is_file():
            raise UserError(f"{p}: no such file (is {run_dir} a SoftBW run directory from softbw-price?)")
    records = list(read_usage(usage))
    rows = pq.read_table(cyc).to_pylist()
    if not rows:
        raise UserError(f"{cyc}: no cycles")
    cycles: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        cycles[r["vm"]].append(r)
    # what each VM would have been charged had it got what it was owed
    ideal: list[UsageRecord] = []
    for vm, cs in cycles.items():
        kind = cs[0]["kind"]
        if kind in COS:
            for c in cs:
                got = max(c["rate_bps"], min(c["demand_bps"], c["guarantee_bps"]))
                if got <= 0:
                    continue
                secs = (c["end_ns"] - c["start_ns"]) / 1e9
                ideal.append(
                    UsageRecord(
                        record_id=f"ideal:{vm}:{c['cycle']}",
                        source="sim",
                        tenant=c["tenant"],
                        vm=vm,
                        cos=COS[kind],  # type: ignore[arg-type]
                        theta_bps=round(c["sold_bps"]) if kind == "strict" else 0,
                        omega=Decimal(1),
                        start_ns=c["start_ns"],
                        end_ns=c["end_ns"],
                        bytes=int(got * secs // 8),
                        guarantee=GUARANTEE[kind],  # type: ignore[arg-type]
                    )
                )
    ideal += [r.model_copy(update={"deadline_met": True}) for r in records if r.guarantee == "dynamic"]
    charged, full = _by_vm(records, book), _by_vm(ideal, book)
    job_bytes: dict[str, list[tuple[int, bool]]] = defaultdict(list)
    for r in records:
        if r.guarantee == "dynamic":
            job_bytes[r.vm].append((r.bytes, bool(r.deadline_met)))
    out = []
    for vm, cs in sorted(cycles.items(), key=lambda kv: (kv[1][0]["tenant"], kv[0])):
        kind = cs[0]["kind"]
        if kind == "dynamic":
            total = sum(b for b, _ in job_bytes[vm])
            perf = sum(b for b, ok in job_bytes[vm] if ok) / total if total else 1.0
        elif kind == "best_effort":
            perf = 1.0
        else:
            owed = sum(min(c["demand_bps"], c["guarantee_bps"]) for c in cs)
            perf = sum(min(c["rate_bps"], c["guarantee_bps"]) for c in cs) / owed if owed > 0 else 1.0
        paid, ideal_paid = charged.get(vm, Decimal(0)), full.get(vm, Decimal(0))
        price = float(paid / ideal_paid) if ideal_paid > 0 else (0.0 if paid == 0 else float("inf"))
        n = len(cs)
        out.append(
            VmRow(
                tenant=cs[0]["tenant"],
                vm=vm,
                kind=kind,
                sold_bps=float(cs[0]["sold_bps"]),
                cycles=n,
                mean_demand_bps=sum(c["demand_bps"] for c in cs) / n,
                mean_rate_bps=sum(c["rate_bps"] for c in cs) / n,
                perf_ratio=perf,
                charged=paid,
                full_charge=ideal_paid,
                price_ratio=price,
                flagged=price > perf * (1 + tolerance),
            )
        )
    return out


def print_table(rows: list[VmRow], currency: str, tolerance: float, con: Console | None = None) -> None:
    """The per-VM table (rich), on ``con`` (default: stdout)."""
    from paccp.common import console as cons
    from paccp.units import format_rate

    cols = ("tenant", "vm", "kind", "B sold", "demand", "rate", "perf", f"charged ({currency})",
            "if fulfilled", "price", "verdict")  # fmt: skip
    t = cons.table(
        *cols,
        title="SoftBW price vs performance, per VM (charged / charge had it got what it was owed)",
        right=tuple(c for c in cols if c not in ("tenant", "vm", "kind", "verdict")),
    )
    for r in rows:
        cons.add_row(
            t, r.tenant, r.vm, r.kind, format_rate(r.sold_bps), format_rate(r.mean_demand_bps),
            format_rate(r.mean_rate_bps), f"{r.perf_ratio:.3f}", f"{r.charged:.4f}", f"{r.full_charge:.4f}",
            f"{r.price_ratio:.3f}", cons.styled("pays more than it gets", "red") if r.flagged else "ok",
        )  # fmt: skip
    con = con or cons.console()
    con.print(t)
    cons.echo(
        f"tolerance {tolerance:.0%}: {sum(r.flagged for r in rows)} VM(s) pay more than they get", con=con
    )
