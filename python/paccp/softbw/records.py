"""What a SoftBW run hands to billing: usage records (the shared schema) and the per-cycle fulfilment table.

``usage.jsonl`` (``paccp bill ingest``), per VM:

- strict: one record per billing cycle with traffic: cos ``mrg``, ``theta_bps`` = B, ``guarantee = strict``,
  the bytes it got in the cycle (the book charges min(r, B) at the strict price and r - B as fair share);
- dynamic: one record per job, from its start to its finish (or the end of the run), with the job's bytes,
  ``deadline_ns`` and ``deadline_met`` (the book charges r (1 + S/(T C)) P1 with S/T the job's declared
  size over its window, and nothing for a late job); cos ``mrg`` with ``theta_bps`` = S/T;
- fair: one record per cycle, cos ``ds``, ``guarantee = fair``; best effort: cos ``be``, ``guarantee = none``.

``softbw_cycles.parquet`` (and ``.csv``): per VM and billing cycle what it asked for, what it was
guaranteed (B in force: a dynamic VM's is re-derived every cycle), what it got and its fulfilment
min(rate, B) / min(demand, B). ``paccp price consistency RUN --model softbw`` reads both.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np

from paccp.common.usage import UsageRecord
from paccp.softbw.model import BEST_EFFORT, DYNAMIC, FAIR, KINDS, STRICT, Run

COS_OF = {STRICT: "mrg", DYNAMIC: "mrg", FAIR: "ds", BEST_EFFORT: "be"}
GUARANTEE_OF = {STRICT: "strict", DYNAMIC: "dynamic", FAIR: "fair", BEST_EFFORT: "none"}
CYCLES_FILE = "softbw_cycles.parquet"
NS = 1_000_000_000


@dataclass(frozen=True)
class VmMeta:
    """Who a VM of the interval model is: (host index, VM index) -> names."""

    host: int
    slot: int
    host_name: str
    vm: str
    tenant: str


def usage_records(run: Run, vms: list[VmMeta], epoch_ns: int, run_id: str) -> list[UsageRecord]:
    """The billing records of a run (see the module docstring); times from ``epoch_ns``."""
    cyc = int(run.cycle_s * NS)
    out: list[UsageRecord] = []
    for m in vms:
        kind = int(run.kinds[m.host, m.slot])
        if kind == DYNAMIC:
            continue
        bits = run.rate_bps[:, m.host, m.slot] * run.cycle_s
        theta = round(run.sold_bps[m.host, m.slot]) if kind == STRICT else 0
        for t in np.nonzero(bits > 0)[0].tolist():
            out.append(
                UsageRecord(
                    record_id=f"sim:{run_id}:{m.vm}:c{t}",
                    source="sim",
                    tenant=m.tenant,
                    vm=m.vm,
                    cos=COS_OF[kind],  # type: ignore[arg-type]
                    theta_bps=theta,
                    omega=Decimal(1),
                    start_ns=epoch_ns + t * cyc,
                    end_ns=epoch_ns + (t + 1) * cyc,
                    bytes=int(bits[t] // 8),
                    guarantee=GUARANTEE_OF[kind],  # type: ignore[arg-type]
                )
            )
    out += _job_records(run, vms, epoch_ns, run_id)
    return out


def _job_records(run: Run, vms: list[VmMeta], epoch_ns: int, run_id: str) -> list[UsageRecord]:
    j = run.jobs
    t_end = run.rate_bps.shape[0] * run.cycle_s
    delivered = np.zeros(len(j.host))  # bits per job
    tr = run.dynamic
    for jobs_t, bits_t in ((tr.late_job, tr.late_bits), (tr.cur_job, tr.cur_bits)):
        sel = jobs_t >= 0
        np.add.at(delivered, jobs_t[sel], bits_t[sel])
    meta = {(m.host, m.slot): m for m in vms}
    out = []
    for k in range(len(j.host)):
        m = meta.get((int(j.host[k]), int(j.vm[k])))
        if m is None or delivered[k] <= 0:
            continue
        fin = float(j.finish_s[k])
        end = t_end if math.isnan(fin) else fin
        met = not math.isnan(fin) and fin <= j.deadline_s[k] + 1e-9
        window = j.deadline_s[k] - j.start_s[k]
        out.append(
            UsageRecord(
                record_id=f"sim:{run_id}:{m.vm}:job{k}",
                source="sim",
                tenant=m.tenant,
                vm=m.vm,
                flow_id=f"job{k}",
                cos="mrg",
                theta_bps=max(1, round(j.size_bits[k] / window)),
                omega=Decimal(1),
                start_ns=epoch_ns + round(j.start_s[k] * NS),
                end_ns=epoch_ns + max(round(end * NS), round(j.start_s[k] * NS) + 1),
                bytes=int(delivered[k] // 8),
                deadline_ns=epoch_ns + round(j.deadline_s[k] * NS),
                deadline_met=bool(met),
                guarantee="dynamic",
            )
        )
    return out


def cycle_rows(run: Run, vms: list[VmMeta], epoch_ns: int) -> list[dict[str, Any]]:
    """Per VM and cycle: demand, guarantee in force, rate, fulfilment (None when nothing was owed)."""
    cyc = int(run.cycle_s * NS)
    rows: list[dict[str, Any]] = []
    for m in vms:
        kind = int(run.kinds[m.host, m.slot])
        d = run.demand_bps[:, m.host, m.slot]
        b = run.guarantee_bps[:, m.host, m.slot]
        r = run.rate_bps[:, m.host, m.slot]
        owed = np.minimum(d, b)
        for t in range(len(d)):
            rows.append(
                {
                    "cycle": t,
                    "start_ns": epoch_ns + t * cyc,
                    "end_ns": epoch_ns + (t + 1) * cyc,
                    "tenant": m.tenant,
                    "host": m.host_name,
                    "vm": m.vm,
                    "kind": KINDS[kind],
                    "sold_bps": float(run.sold_bps[m.host, m.slot]),
                    "guarantee_bps": float(b[t]),
                    "demand_bps": float(d[t]),
                    "rate_bps": float(r[t]),
                    "fulfilment": float(min(r[t], b[t]) / owed[t]) if owed[t] > 0 else None,
                }
            )
    return rows


def write_cycles(rows: list[dict[str, Any]], run_dir: Path) -> Path:
    """``softbw_cycles.parquet`` and ``.csv`` in ``run_dir``."""
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    table = pa.Table.from_pylist(rows)
    pq.write_table(table, run_dir / CYCLES_FILE)
    pacsv.write_csv(table, run_dir / "softbw_cycles.csv")
    return run_dir / CYCLES_FILE
