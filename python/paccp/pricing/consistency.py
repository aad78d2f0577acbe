"""Price-performance consistency of a run, and calibration of P1 (and P2) from it.

A group is a set of purchases with the same (CoS, theta, omega). Its *price ratio* is its hourly price over
the BE price (VBP: P/P0; FBP: the add-on over its base, P^s/P0^s, the paper's analogous reading). Its
*performance ratio* is, for long-lived flows, the mean achieved rate over the BE mean rate, and for finite
flows the BE mean FCT over the group's mean FCT (inverse mean FCT ratio). A group is flagged when the
tenant pays more than it gets: price_ratio > perf_ratio x (1 + tolerance).

Under VBP (long-lived runs), flows are first summed per VM: VBP sells a VM, not a flow, so a VM's
performance is the sum of its flows' rates and its pair is the VM's pair, which every flow row of the VM
carries (``docs/run-dir.md``). A flow without a VM is its own VM.

Calibration (``docs/pricing.md`` has the derivation): with P_DS/P0 = 1 + k (omega - 1) and the measured
ratio rho, consistency needs k = (rho - 1)/(omega - 1); over several DS groups k is the least-squares fit
weighted by group size, and P1 = k P0. MRG groups then give P2 = m P0 with m fitted from
rho - 1 - k (omega - 1) = m theta[Gb/s].
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from paccp.errors import UserError
from paccp.pricing.book import FBPBook, PriceBook, VBPBook
from paccp.pricing.quote import gbps

DEFAULT_TOLERANCE = 0.05


@dataclass(frozen=True)
class Group:
    """One (CoS, theta, omega) group of a run with its price and performance ratios."""

    cos: str
    theta_bps: int
    omega: Decimal
    n: int
    performance: float  # mean rate (bit/s) or mean FCT (ns)
    price_ratio: float
    perf_ratio: float
    flagged: bool
    by_size: dict[str, float] = field(default_factory=dict)  # fct metric: perf ratio per size class

    def to_json(self) -> dict[str, Any]:
        """JSON-friendly dict."""
        return {
            "by_size_class": self.by_size,
            "cos": self.cos,
            "theta_bps": self.theta_bps,
            "omega": format(self.omega, "f"),
            "n": self.n,
            "performance": self.performance,
            "price_ratio": self.price_ratio,
            "perf_ratio": self.perf_ratio,
            "pays_more_than_gets": self.flagged,
        }


@dataclass(frozen=True)
class Consistency:
    """The consistency report of one run."""

    run_dir: str
    model: str
    metric: str  # "rate" (long-lived) or "fct" (finite flows)
    unit: str  # "VM" or "flow"
    tolerance: float
    groups: list[Group]

    def to_json(self) -> dict[str, Any]:
        """JSON-friendly dict."""
        return {
            "run_dir": self.run_dir,
            "model": self.model,
            "metric": self.metric,
            "unit": self.unit,
            "tolerance": self.tolerance,
            "groups": [g.to_json() for g in self.groups],
            "consistent": not any(g.flagged for g in self.groups),
        }


def _coeffs(book: PriceBook, model: str) -> tuple[Decimal, Decimal, Decimal]:
    sec = book.section(model)
    if isinstance(sec, VBPBook):
        return sec.p0, sec.p1, sec.p2
    if isinstance(sec, FBPBook):
        return sec.p0s, sec.p1s, sec.p2s_per_gbps_hour
    raise UserError("consistency and calibration support --model vbp or fbp")


def price_ratio(book: PriceBook, model: str, cos: str, theta_bps: int, omega: Decimal) -> Decimal:
    """Hourly price of (cos, theta, omega) over the BE price, from the book's linear price."""
    base, per_w, per_g = _coeffs(book, model)
    if base <= 0:
        raise UserError(f"the book's {model} base price is 0: price ratios are undefined")
    if cos == "be":
        return Decimal(1)
    p = base + per_w * max(omega - 1, Decimal(0))
    if cos == "mrg":
        p += per_g * gbps(theta_bps)
    return p / base


def load_flows(run_dir: str | Path) -> list[dict[str, Any]]:
    """Rows of ``RUN_DIR/flows.parquet`` (UserError if missing or lacking columns)."""
    p = Path(run_dir) / "flows.parquet"
    if not p.is_file():
        raise UserError(f"{p}: no such file (is {run_dir} a run directory from `paccp run`?)")
    import pyarrow.parquet as pq

    try:
        rows: list[dict[str, Any]] = pq.read_table(p).to_pylist()
    except Exception as exc:
        raise UserError(f"{p}: cannot read Parquet ({exc})") from None
    need = {"cos", "vm", "theta_bps", "omega", "rate_bps", "fct_ns"}
    if rows and not need <= set(rows[0]):
        raise UserError(f"{p}: missing columns {sorted(need - set(rows[0]))}")
    if not rows:
        raise UserError(f"{p}: no flows")
    return rows


def consistency(
    run_dir: str | Path,
    book: PriceBook,
    model: str = "vbp",
    tolerance: float = DEFAULT_TOLERANCE,
    metric: str = "auto",
) -> Consistency:
    """Compare price ratios with performance ratios, per (CoS, theta, omega) group, for one run."""
    if tolerance < 0:
        raise UserError("tolerance must not be negative")
    rows = load_flows(run_dir)
    finished = [r for r in rows if r.get("size_bytes") and r.get("fct_ns") is not None and r["fct_ns"] > 0]
    long_lived = [r for r in rows if not r.get("size_bytes")]
    if metric == "auto":  # long-lived flows present: compare rates of those; else FCTs of finite flows
        metric = "rate" if long_lived else "fct"
    if metric not in ("rate", "fct"):
        raise UserError(f"unknown metric {metric!r} (expected auto, rate or fct)")
    units: list[tuple[str, int, Decimal, float]] = []  # (cos, theta, omega, performance)
    unit = "flow"
    if metric == "fct":
        units = [(r["cos"], int(r["theta_bps"]), _dec(r["omega"]), float(r["fct_ns"])) for r in finished]
    else:
        live = [r for r in (long_lived or rows) if r.get("rate_bps") is not None]
        if model == "vbp":
            unit = "VM"
            per_vm: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
            for r in live:
                vm = r["vm"] if r.get("vm") is not None else f"flow:{r.get('id')}"
                per_vm[(str(vm), r["cos"])].append(r)
            for (_vm, cos), fl in per_vm.items():  # each flow row carries its VM's pair
                th = max(int(f["theta_bps"]) for f in fl)
                om = max(_dec(f["omega"]) for f in fl)
                units.append((cos, th, om, sum(float(f["rate_bps"]) for f in fl)))
        else:
            units = [(r["cos"], int(r["theta_bps"]), _dec(r["omega"]), float(r["rate_bps"])) for r in live]
    groups: dict[tuple[str, int, Decimal], list[float]] = defaultdict(list)
    for cos, th, om, perf in units:
        groups[(cos, th, om.normalize())].append(perf)
    be = [k for k in groups if k[0] == "be"]
    if not be:
        raise UserError(f"{run_dir}: no BE {unit}s to compare with")
    base_key = max(be, key=lambda k: (k[2] == 1, len(groups[k])))
    base = _mean(groups[base_key])
    if base <= 0:
        raise UserError(f"{run_dir}: the BE {metric} is 0")
    out = []
    for key in sorted(groups, key=lambda k: (["be", "ds", "mrg"].index(k[0]), k[1], k[2])):
        cos, th, om = key
        perf = _mean(groups[key])
        ratio = perf / base if metric == "rate" else (base / perf if perf > 0 else float("inf"))
        pr = float(price_ratio(book, model, cos, th, om))
        by_size: dict[str, float] = {}
        if metric == "fct":  # the same comparison within each size class (the mix of sizes differs by CoS)
            for sc in ("small", "medium", "big"):
                mine = [float(r["fct_ns"]) for r in finished if _key(r) == key and r.get("size_class") == sc]
                ref = [
                    float(r["fct_ns"]) for r in finished if _key(r) == base_key and r.get("size_class") == sc
                ]
                if mine and ref:
                    by_size[sc] = _mean(ref) / _mean(mine)
        flagged = pr > ratio * (1 + tolerance)
        out.append(Group(cos, th, om, len(groups[key]), perf, pr, ratio, flagged, by_size))
    return Consistency(str(run_dir), model, metric, unit, tolerance, out)


def _key(r: dict[str, Any]) -> tuple[str, int, Decimal]:
    return (r["cos"], int(r["theta_bps"]), _dec(r["omega"]).normalize())


def _dec(v: Any) -> Decimal:
    return Decimal(str(v))


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs)


@dataclass(frozen=True)
class Calibration:
    """Proposed P1 (and P2) that make the measured run price-performance consistent."""

    model: str
    base: Decimal
    k: float | None  # P1 / P0
    m: float | None  # P2 / P0 per Gb/s
    p1: Decimal | None
    p2: Decimal | None
    current_p1: Decimal
    current_p2: Decimal
    notes: list[str]

    def to_json(self) -> dict[str, Any]:
        """JSON-friendly dict."""
        return {
            "model": self.model,
            "base_price": str(self.base),
            "k_p1_over_p0": self.k,
            "m_p2_over_p0_per_gbps": self.m,
            "proposed_p1": None if self.p1 is None else str(self.p1),
            "proposed_p2": None if self.p2 is None else str(self.p2),
            "current_p1": str(self.current_p1),
            "current_p2": str(self.current_p2),
            "notes": self.notes,
        }


def calibrate(report: Consistency, book: PriceBook, places: int = 6) -> Calibration:
    """Least-squares P1 (from DS groups) and P2 (from MRG groups) that match the measured ratios."""
    base, cur_p1, cur_p2 = _coeffs(book, report.model)
    q = Decimal(1).scaleb(-places)
    notes: list[str] = []
    ds = [g for g in report.groups if g.cos == "ds" and g.omega > 1]
    k: float | None = None
    if ds:
        num = sum(g.n * float(g.omega - 1) * (g.perf_ratio - 1) for g in ds)
        den = sum(g.n * float(g.omega - 1) ** 2 for g in ds)
        k = num / den
        if k < 0:
            notes.append("DS performed worse than BE: k < 0, so P1 is clamped to 0")
    else:
        notes.append("no DS group with omega > 1 in the run: P1 not calibrated")
    kk = max(k, 0.0) if k is not None else float(cur_p1 / base)
    mrg = [g for g in report.groups if g.cos == "mrg" and g.theta_bps > 0]
    m: float | None = None
    if mrg:
        th = [float(gbps(g.theta_bps)) for g in mrg]
        num = sum(
            g.n * t * (g.perf_ratio - 1 - kk * float(max(g.omega - 1, Decimal(0))))
            for g, t in zip(mrg, th, strict=True)
        )
        den = sum(g.n * t * t for g, t in zip(mrg, th, strict=True))
        m = num / den
        if m < 0:
            notes.append("MRG got less than its omega alone would price: m < 0, so P2 is clamped to 0")
    else:
        notes.append("no MRG group in the run: P2 not calibrated")
    if report.metric == "fct":
        notes.append("finite flows: performance is the inverse mean-FCT ratio, which depends on the load")
    p1 = (base * Decimal(repr(max(k, 0.0)))).quantize(q) if k is not None else None
    p2 = (base * Decimal(repr(max(m, 0.0)))).quantize(q) if m is not None else None
    return Calibration(report.model, base, k, m, p1, p2, cur_p1, cur_p2, notes)
