"""Run directories: what ``paccp run`` (and the experiments) write for one simulation run.

Layout (docs/run-dir.md)::

    DIR/summary.json      run summary (deterministic apart from ``wall_s``)
    DIR/scenario.toml     the scenario as given (when it came from a file)
    DIR/flows.parquet     one row per flow (columns: FLOW_COLUMNS)
    DIR/flows.csv         the same as CSV
    DIR/channels.csv      one row per channel (engine counters)
    DIR/usage.jsonl       usage records (paccp.common.usage) with source "sim": one per flow, one per FBP
                          slice
    DIR/rate_<LABEL>.png  per-class rate over time (sampled flows only)

Small API, meant to be reused by other experiment modules:

- :func:`run_engine` runs a scenario with a rich progress bar and returns the engine result and wall time;
- :func:`flow_table` turns an engine result into the per-flow table (``FLOW_COLUMNS``);
- :func:`usage_records` makes the usage records;
- :func:`write_run_dir` writes all the files above; :func:`run_scenario` = run + write.

Per-flow ``rate_bps``: for a flow with rate samples (long-lived flows by default), the mean delivered rate
over the measurement window ``[max(start, warmup), end of run)``; otherwise bytes acked * 8 divided by the
flow's life (``finish - start``, or ``end of run - start`` when unfinished).
"""

from __future__ import annotations

import csv
import hashlib
import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from paccp.common.cos import classify, flow_cos, split_pair
from paccp.common.usage import UsageRecord, write_usage
from paccp.scenario import Scenario, epoch_ns, to_engine
from paccp.sim.guarantees import warnings_for

if TYPE_CHECKING:
    from paccp.sim.engine import EngineResult

FLOW_COLUMNS = (
    "id",
    "label",
    "cos",
    "src",
    "dst",
    "vm",
    "tenant",
    "size_bytes",
    "size_class",
    "theta_bps",
    "omega",
    "start_ns",
    "finish_ns",
    "fct_ns",
    "bytes_acked",
    "rate_bps",
    "deadline_ns",
    "deadline_met",
    "retransmits",
    "spurious_retransmits",
    "timeouts",
)
SMALL_MAX_BYTES = 100_000
MEDIUM_MAX_BYTES = 1_000_000


def size_class(size_bytes: int | None) -> str | None:
    """small (<= 100 KB), medium (<= 1 MB), big, or None for a long-lived flow."""
    if size_bytes is None:
        return None
    if size_bytes <= SMALL_MAX_BYTES:
        return "small"
    if size_bytes <= MEDIUM_MAX_BYTES:
        return "medium"
    return "big"


@contextmanager
def engine_progress(description: str, enabled: bool = True) -> Iterator[Callable[[int, int], None] | None]:
    """A rich progress bar driven by the engine's ``progress(sim_ns_done, sim_ns_total)`` callback."""
    if not enabled:
        yield None
        return
    from rich.progress import BarColumn, TextColumn, TimeElapsedColumn

    from paccp.common.console import is_terminal, progress

    if not is_terminal(stderr=True):  # a pipe or a log: no bar, no residue, no callback cost
        yield None
        return
    with progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.percentage:>5.1f}% simulated"),
        TimeElapsedColumn(),
    ) as bar:
        from rich.markup import escape

        task = bar.add_task(escape(description), total=1.0)

        def cb(done: int, total: int) -> None:
            bar.update(task, completed=done / total if total else 1.0)

        yield cb


def run_engine(engine_json: dict[str, Any], description: str = "simulating") -> tuple[EngineResult, float]:
    """Run the engine on resolved JSON with a progress bar; return (result, wall seconds)."""
    from paccp.errors import UserError
    from paccp.sim import engine

    t0 = time.perf_counter()
    with engine_progress(description) as cb:
        try:
            result = engine.run(engine_json, progress=cb)
        except ValueError as exc:  # the engine's own validation (docs/engine-contract.md)
            raise UserError(f"the engine rejected the scenario: {exc}") from None
    return result, time.perf_counter() - t0


def sample_rates(result: EngineResult) -> tuple[np.ndarray, list[str], np.ndarray]:
    """(interval end times in s, sampled flow ids, rates in bit/s of shape (n_flows, n_intervals))."""
    s = result.samples
    acked = np.asarray(s.acked_bytes, dtype=np.float64)
    n = acked.shape[1] if acked.ndim == 2 else 0
    times = (np.arange(1, n + 1) * s.interval_ns) / 1e9
    rates = acked * 8e9 / s.interval_ns if n else np.zeros((len(s.flow_ids), 0))
    return times, list(s.flow_ids), rates


def window_rates(result: EngineResult, warmup_ns: int, end_ns: int) -> dict[str, float]:
    """Mean delivered rate of each sampled flow over ``[warmup_ns, end_ns)`` (whole intervals only)."""
    s = result.samples
    acked = np.asarray(s.acked_bytes, dtype=np.int64)
    if acked.ndim != 2 or acked.shape[1] == 0:
        return {}
    first = -(-warmup_ns // s.interval_ns)  # first interval starting at or after warmup
    last = min(end_ns // s.interval_ns, acked.shape[1])
    if last <= first:
        raise ValueError("measurement window shorter than one sample interval")
    span = (last - first) * s.interval_ns
    return {fid: float(acked[i, first:last].sum()) * 8e9 / span for i, fid in enumerate(s.flow_ids)}


def _lookup(sc: Scenario) -> tuple[dict[str, Any], dict[str, Any]]:
    return {f.id: f for f in sc.flows}, {v.id: v for v in sc.vms}


def flow_table(sc: Scenario, result: EngineResult) -> list[dict[str, Any]]:
    """Per-flow rows with FLOW_COLUMNS (see the module docstring for ``rate_bps``)."""
    flows_cfg, vms_cfg = _lookup(sc)
    end = sc.run.duration
    sampled = window_rates(result, sc.run.warmup, end) if sc.run.sample_flows != "none" else {}
    rows: list[dict[str, Any]] = []
    for r in result.flows.to_pylist():
        fid = r["id"]
        fc = flows_cfg.get(fid)
        vm = vms_cfg.get(r["vm"]) if r["vm"] is not None else None
        cos = flow_cos(fc.cos if fc else None, vm.cos if vm else None, r["theta_bps"], r["omega"])
        tenant = (fc.tenant if fc else None) or (vm.tenant if vm else None) or sc.billing.tenant
        start, finish = r["start_ns"], r["finish_ns"]
        fct = finish - start if finish is not None else None
        if fid in sampled and start < end:
            rate = sampled[fid]
        else:
            life = (finish if finish is not None else end) - start
            rate = r["bytes_acked"] * 8e9 / life if life > 0 else 0.0
        deadline = start + fc.deadline if fc is not None and fc.deadline is not None else None
        rows.append(
            {
                "id": fid,
                "label": r["label"],
                "cos": cos,
                "src": r["src"],
                "dst": r["dst"],
                "vm": r["vm"],
                "tenant": tenant,
                "size_bytes": r["size_bytes"],
                "size_class": size_class(r["size_bytes"]),
                "theta_bps": r["theta_bps"],
                "omega": r["omega"],
                "start_ns": start,
                "finish_ns": finish,
                "fct_ns": fct,
                "bytes_acked": r["bytes_acked"],
                "rate_bps": rate,
                "deadline_ns": deadline,
                "deadline_met": (finish is not None and finish <= deadline) if deadline is not None else None,
                "retransmits": r["retransmits"],
                "spurious_retransmits": r["spurious_retransmits"],
                "timeouts": r["timeouts"],
            }
        )
    return rows


def run_id(engine_json: dict[str, Any]) -> str:
    """A stable id of a run: a hash of the resolved engine input (which includes the seed)."""
    blob = json.dumps(engine_json, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()[:12]


def usage_records(
    sc: Scenario, result: EngineResult, rows: list[dict[str, Any]], rid: str
) -> list[UsageRecord]:
    """One usage record per flow, one per FBP slice (a flow with ``changes``).

    Times are ``[billing] epoch`` + simulated ns. A VBP flow is recorded with its VM's pair (what the
    tenant bought; the engine splits it over the VM's active flows). Slices end at the flow's finish or
    at the end of the run.
    """
    flows_cfg, _ = _lookup(sc)
    epoch = epoch_ns(sc.billing.epoch)
    changes_acked = dict(
        zip(
            result.flows.column("id").to_pylist(),
            result.flows.column("change_acked_bytes").to_pylist(),
            strict=True,
        )
    )
    out: list[UsageRecord] = []
    for row in rows:
        fc = flows_cfg.get(row["id"])
        end = row["finish_ns"] if row["finish_ns"] is not None else sc.run.duration
        pairs: list[tuple[int, int, float, int]] = []  # (start, theta, omega, acked at start)
        pairs.append((row["start_ns"], row["theta_bps"], row["omega"], 0))
        if fc is not None and fc.changes:
            acked_at = changes_acked.get(row["id"]) or []
            for c, b in zip(fc.changes, acked_at, strict=False):
                if c.at >= end:
                    break
                pairs.append((c.at, c.theta, c.omega, int(b)))
        for k, (t0, theta, omega, b0) in enumerate(pairs):
            t1, b1 = (pairs[k + 1][0], pairs[k + 1][3]) if k + 1 < len(pairs) else (end, row["bytes_acked"])
            cos = row["cos"] if k == 0 else classify(theta, omega)
            out.append(
                UsageRecord(
                    # the billing epoch and tenant are in the id: the same run billed to another month
                    # or tenant is other usage, not a conflicting re-export of this one
                    record_id=f"sim:{rid}:{epoch}:{row['tenant']}:{row['id']}:{k}",
                    source="sim",
                    tenant=row["tenant"],
                    vm=row["vm"] or f"host:{row['src']}",
                    flow_id=row["id"],
                    cos=cos,
                    theta_bps=int(theta),
                    omega=Decimal(repr(float(omega))),
                    start_ns=epoch + t0,
                    end_ns=epoch + t1,
                    bytes=max(0, int(b1) - int(b0)),
                    deadline_ns=epoch + row["deadline_ns"] if row["deadline_ns"] is not None else None,
                    deadline_met=row["deadline_met"],
                )
            )
    return out


def write_flows(rows: list[dict[str, Any]], out: Path) -> None:
    """Write ``flows.parquet`` and ``flows.csv`` (columns: FLOW_COLUMNS, in that order)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema(
        [
            ("id", pa.string()),
            ("label", pa.string()),
            ("cos", pa.string()),
            ("src", pa.string()),
            ("dst", pa.string()),
            ("vm", pa.string()),
            ("tenant", pa.string()),
            ("size_bytes", pa.int64()),
            ("size_class", pa.string()),
            ("theta_bps", pa.int64()),
            ("omega", pa.float64()),
            ("start_ns", pa.int64()),
            ("finish_ns", pa.int64()),
            ("fct_ns", pa.int64()),
            ("bytes_acked", pa.int64()),
            ("rate_bps", pa.float64()),
            ("deadline_ns", pa.int64()),
            ("deadline_met", pa.bool_()),
            ("retransmits", pa.int64()),
            ("spurious_retransmits", pa.int64()),
            ("timeouts", pa.int64()),
        ]
    )
    table = pa.Table.from_pylist([{c: r.get(c) for c in FLOW_COLUMNS} for r in rows], schema=schema)
    pq.write_table(table, out / "flows.parquet")
    with (out / "flows.csv").open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(FLOW_COLUMNS)
        for r in rows:
            w.writerow(["" if r.get(c) is None else r.get(c) for c in FLOW_COLUMNS])


def write_channels(result: EngineResult, out: Path) -> None:
    """Write ``channels.csv`` (the engine's per-channel counters)."""
    t = result.channels
    cols = t.column_names
    with (out / "channels.csv").open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(cols)
        for r in t.to_pylist():
            w.writerow([r[c] for c in cols])


def class_rate_series(
    result: EngineResult, labels: dict[str, str]
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Sampled rates grouped by label: (times in s, {label: (n_flows, n_intervals) bit/s})."""
    times, ids, rates = sample_rates(result)
    groups: dict[str, list[int]] = {}
    for i, fid in enumerate(ids):
        groups.setdefault(labels[fid], []).append(i)
    return times, {lab: rates[idx] for lab, idx in sorted(groups.items())}


def optimum_applies(sc: Scenario) -> str | None:
    """None when the run's optimum is a single allocation (every flow long-lived, started before the end of
    the warm-up, with a fixed pair, PACCP's own scheme); otherwise why it does not apply."""
    if sc.arrivals or any(f.size is not None for f in sc.flows):
        return "finite flows: the allocation changes as they come and go"
    if any(f.start >= sc.run.warmup or f.changes for f in sc.flows):
        return "flows start after the warm-up or change their pair during the run"
    if sc.scheme is not None or sc.softbw is not None:
        return "the run is not PACCP's allocation"
    return None


def class_optimum(sc: Scenario, result: EngineResult, labels: dict[str, str]) -> dict[str, float] | None:
    """Per label, the mean per-flow rate of the optimum (:func:`paccp.sim.optimum.optimum_on_routes`), when
    :func:`optimum_applies`; else None."""
    if optimum_applies(sc) is not None or not labels:
        return None
    from paccp.errors import UserError
    from paccp.sim.optimum import optimum_on_routes

    try:
        _, sol = optimum_on_routes(result)
    except UserError:  # infeasible guarantees: the run's warnings say so
        return None
    by: dict[str, list[float]] = {}
    for fid, x in sol.rates_bps.items():
        by.setdefault(labels[fid], []).append(float(x))
    return {lab: float(np.mean(v)) for lab, v in sorted(by.items())}


def class_theta(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Per label, the mean per-flow guarantee at the start (a VM's theta split over its flows); labels
    without one are left out."""
    per_vm: dict[str, int] = {}
    for r in rows:
        if r["vm"] is not None:
            per_vm[r["vm"]] = per_vm.get(r["vm"], 0) + 1
    by: dict[str, list[float]] = {}
    for r in rows:
        n = per_vm.get(r["vm"], 1) if r["vm"] is not None else 1
        by.setdefault(r["label"], []).append(split_pair(float(r["theta_bps"] or 0), float(r["omega"]), n)[0])
    return {lab: float(np.mean(v)) for lab, v in sorted(by.items()) if any(v)}


def summarize(sc: Scenario, result: EngineResult, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The deterministic part of ``summary.json``: counts, per-label mean rates, FCTs, engine stats."""
    by_label: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_label.setdefault(r["label"], []).append(r)
    classes = {}
    for lab, rs in sorted(by_label.items()):
        fcts = [r["fct_ns"] for r in rs if r["fct_ns"] is not None]
        dl = [r["deadline_met"] for r in rs if r["deadline_met"] is not None]
        classes[lab] = {
            "flows": len(rs),
            "finished": len(fcts),
            "mean_rate_bps": float(np.mean([r["rate_bps"] for r in rs])),
            "mean_fct_ns": float(np.mean(fcts)) if fcts else None,
            "p99_fct_ns": float(np.percentile(fcts, 99)) if fcts else None,
            "deadline_meet_rate": float(np.mean(dl)) if dl else None,
        }
    return {
        "seed": sc.run.seed,
        "duration_ns": sc.run.duration,
        "warmup_ns": sc.run.warmup,
        "n_flows": len(rows),
        "n_finished": sum(1 for r in rows if r["finish_ns"] is not None),
        "classes": classes,
        "engine": dict(result.stats),
    }


def write_run_dir(
    out: Path,
    sc: Scenario,
    result: EngineResult,
    *,
    wall_s: float,
    scenario_text: str | None = None,
    extra: dict[str, Any] | None = None,
    plots: bool = True,
    engine_json: dict[str, Any] | None = None,
    with_optimum: bool = False,
) -> dict[str, Any]:
    """Write every file of a run directory; return the summary (also written as summary.json).

    ``with_optimum``: when the optimum applies (:func:`optimum_applies`), each class of the summary gets
    ``optimal_bps`` (its mean per-flow rate at the optimum) and the rate plots draw it.

    ``engine_json`` is the resolved engine input the run was made from (:func:`paccp.scenario.to_engine`
    of ``sc``; computed here when not given).
    """
    from paccp.sim.plots import plot_class_rates

    out.mkdir(parents=True, exist_ok=True)
    if engine_json is None:
        engine_json = to_engine(sc)
    rows = flow_table(sc, result)
    write_flows(rows, out)
    write_channels(result, out)
    write_usage(usage_records(sc, result, rows, run_id(engine_json)), out / "usage.jsonl")
    if scenario_text is not None:
        (out / "scenario.toml").write_text(scenario_text, encoding="utf-8")
    labels = {r["id"]: r["label"] for r in rows}
    times, series = class_rate_series(result, labels)
    optimum = class_optimum(sc, result, labels) if with_optimum else None
    if plots and times.size:
        plot_class_rates(times, series, out, reference_bps=optimum, theta_bps=class_theta(rows))
    summary = summarize(sc, result, rows)
    for lab, th in class_theta(rows).items():
        if with_optimum:
            summary["classes"][lab]["theta_bps"] = th
    if optimum is not None:
        for lab, x in optimum.items():
            summary["classes"][lab]["optimal_bps"] = x
    summary["run_id"] = run_id(engine_json)
    warnings = warnings_for(result, sc.run.duration)
    if warnings:  # only when there is something to say (run directories stay byte-identical otherwise)
        summary["warnings"] = warnings
    if extra:
        summary.update(extra)
    summary["wall_s"] = round(wall_s, 3)
    (out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return summary


def run_scenario(sc: Scenario, out: Path, *, scenario_text: str | None = None) -> dict[str, Any]:
    """Run a validated scenario and write its run directory.

    The directory is written beside ``out`` and moved into place at the end (:mod:`paccp.common.outdir`): it
    appears complete or not at all, and replaces a previous run's directory with everything in it.
    """
    from paccp.common.outdir import staged_dir

    engine_json = to_engine(sc)
    with staged_dir(out) as tmp:
        result, wall = run_engine(engine_json, description=f"run {out.name}")
        return write_run_dir(
            tmp,
            sc,
            result,
            wall_s=wall,
            scenario_text=scenario_text,
            engine_json=engine_json,
            with_optimum=True,
        )
