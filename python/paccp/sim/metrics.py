"""Flow-level metrics of workload runs: FCT per size class and class of service, deadlines, seeds.

All functions are pure: they take a flows table (a list of row dicts with at least ``cos``, ``src``,
``size_bytes``, ``start_ns``, ``finish_ns``; the columns of ``paccp.sim.rundir.FLOW_COLUMNS``) and return
plain dicts that go straight into ``summary.json``.

Rules (also in docs/howto/workloads.md):

- **Warm-up**: flows that *start* before ``warmup_ns`` are excluded from every statistic; their number is
  reported as ``excluded_warmup``. Long-lived flows (no size) are ignored.
- **Unfinished flows** are never dropped silently: ``unfinished`` counts them per group. FCT statistics
  (mean, p99) are over finished flows only, so a large ``unfinished`` count means the FCTs are optimistic.
- **Deadlines**: a finished flow meets its deadline when ``fct <= deadline``. An unfinished flow whose
  deadline had passed by the end of the run counts as *missed*; one whose deadline lies beyond the end of
  the run is *undetermined* and left out of the meet rate (reported as ``deadline_undetermined``).
- **Normalised FCT**: mean FCT of a class of service divided by the mean FCT of BE flows of the same size
  class (paper Figs. 8-11).
- **Seeds**: :func:`mean_ci` gives the mean and the half-width of the 95 % Student-t confidence interval.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from paccp.traffic.workload import MEDIUM_MAX_BYTES, SMALL_MAX_BYTES, DeadlineRule, deadlines_ns

SIZE_GROUPS = ("overall", "small", "medium", "big")
COS_ORDER = ("be", "ds", "mrg")

Row = Mapping[str, Any]


def size_class(size_bytes: int) -> str:
    """small (<= 100 KB), medium (<= 1 MB) or big."""
    if size_bytes <= SMALL_MAX_BYTES:
        return "small"
    if size_bytes <= MEDIUM_MAX_BYTES:
        return "medium"
    return "big"


def with_deadlines(rows: Sequence[Row], rule: DeadlineRule, end_ns: int) -> list[dict[str, Any]]:
    """Copy of the finite flows of ``rows`` with ``deadline_ns`` (absolute) and ``deadline_met`` set.

    ``deadline_met`` is True/False, or None when the flow is unfinished and its deadline is after
    ``end_ns`` (undetermined).
    """
    finite = [dict(r) for r in rows if r.get("size_bytes") is not None]
    if not finite:
        return []
    rel = deadlines_ns(
        rule,
        [int(r["size_bytes"]) for r in finite],
        [str(r["src"]) for r in finite],
        [str(r["cos"]) for r in finite],
        [int(r["start_ns"]) for r in finite],
        [None if r.get("finish_ns") is None else int(r["finish_ns"]) for r in finite],
    )
    for r, d in zip(finite, rel, strict=True):
        due = int(r["start_ns"]) + d
        r["deadline_ns"] = due
        fin = r.get("finish_ns")
        if fin is not None:
            r["deadline_met"] = int(fin) <= due
        else:
            r["deadline_met"] = False if due <= end_ns else None
        r["size_class"] = size_class(int(r["size_bytes"]))
    return finite


def _group_stats(rows: list[Row]) -> dict[str, Any]:
    fcts = np.asarray(
        [int(r["finish_ns"]) - int(r["start_ns"]) for r in rows if r.get("finish_ns") is not None],
        dtype=np.float64,
    )
    met = [r.get("deadline_met") for r in rows]
    decided = [m for m in met if m is not None]
    has_deadline = any("deadline_met" in r for r in rows)
    return {
        "flows": len(rows),
        "finished": int(fcts.size),
        "unfinished": len(rows) - int(fcts.size),
        "mean_fct_ns": float(fcts.mean()) if fcts.size else None,
        "p99_fct_ns": float(np.percentile(fcts, 99)) if fcts.size else None,
        "deadline_meet_rate": (float(np.mean(decided)) if decided else None) if has_deadline else None,
        "deadline_flows": len(decided),
        "deadline_undetermined": len(met) - len(decided) if has_deadline else 0,
    }


def flow_stats(rows: Iterable[Row], warmup_ns: int = 0) -> dict[str, Any]:
    """Statistics per class of service (plus ``all``) and per size group (``overall``/small/medium/big).

    Returns ``{"excluded_warmup": n, "by_cos": {cos: {group: stats}}}`` where ``stats`` has ``flows``,
    ``finished``, ``unfinished``, ``mean_fct_ns``, ``p99_fct_ns``, ``deadline_meet_rate``,
    ``deadline_flows``, ``deadline_undetermined``.
    """
    kept: list[Row] = []
    excluded = 0
    for r in rows:
        if r.get("size_bytes") is None:
            continue
        if int(r["start_ns"]) < warmup_ns:
            excluded += 1
            continue
        kept.append(r)
    cos_names = sorted(
        {str(r["cos"]) for r in kept},
        key=lambda c: (c not in COS_ORDER, COS_ORDER.index(c) if c in COS_ORDER else 0, c),
    )
    by_cos: dict[str, dict[str, Any]] = {}
    for cos in [*cos_names, "all"]:
        sel = kept if cos == "all" else [r for r in kept if r["cos"] == cos]
        groups: dict[str, Any] = {"overall": _group_stats(sel)}
        for cls in SIZE_GROUPS[1:]:
            groups[cls] = _group_stats([r for r in sel if size_class(int(r["size_bytes"])) == cls])
        by_cos[cos] = groups
    return {"excluded_warmup": excluded, "by_cos": by_cos}


def fct_norm_to_be(stats: Mapping[str, Any]) -> dict[str, dict[str, float | None]]:
    """Mean FCT of each class of service divided by BE's, per size group (None where undefined)."""
    by_cos = stats["by_cos"]
    be = by_cos.get("be")
    out: dict[str, dict[str, float | None]] = {}
    for cos, groups in by_cos.items():
        if cos == "all":
            continue
        out[cos] = {}
        for g in SIZE_GROUPS:
            num = groups[g]["mean_fct_ns"]
            den = be[g]["mean_fct_ns"] if be is not None else None
            out[cos][g] = num / den if num is not None and den else None
    return out


def meet_rates(stats: Mapping[str, Any]) -> dict[str, dict[str, float | None]]:
    """Deadline meet rate per class of service and size group."""
    return {
        cos: {g: groups[g]["deadline_meet_rate"] for g in SIZE_GROUPS}
        for cos, groups in stats["by_cos"].items()
        if cos != "all"
    }


def mean_ci(values: Sequence[float | None], confidence: float = 0.95) -> dict[str, float | int | None]:
    """Mean over seeds and the half-width of its Student-t confidence interval (None values skipped).

    With one value the half-width is None (no interval from a single seed).
    """
    xs = np.asarray([v for v in values if v is not None and not math.isnan(v)], dtype=np.float64)
    if xs.size == 0:
        return {"mean": None, "ci95": None, "n": 0}
    if xs.size == 1:
        return {"mean": float(xs[0]), "ci95": None, "n": 1}
    from scipy import stats as st

    sem = float(xs.std(ddof=1) / math.sqrt(xs.size))
    half = float(st.t.ppf(0.5 + confidence / 2, xs.size - 1) * sem)
    return {"mean": float(xs.mean()), "ci95": half, "n": int(xs.size)}


def mean_of(v: Mapping[str, Any] | None) -> float | None:
    """The mean of a :func:`mean_ci` result (None when there is none)."""
    return None if not v or v.get("mean") is None else float(v["mean"])


def combine_seeds(per_seed: Sequence[Mapping[str, Mapping[str, float | None]]]) -> dict[str, Any]:
    """Combine ``{cos: {group: value}}`` dicts of several seeds into ``{cos: {group: mean_ci}}``."""
    out: dict[str, dict[str, Any]] = {}
    keys: list[tuple[str, str]] = []
    for d in per_seed:
        for cos, groups in d.items():
            for g in groups:
                if (cos, g) not in keys:
                    keys.append((cos, g))
    for cos, g in keys:
        vals = [d.get(cos, {}).get(g) for d in per_seed]
        out.setdefault(cos, {})[g] = mean_ci(vals)
    return out


def headline(res: Mapping[str, Any]) -> dict[str, Any]:
    """Flat one-row view of a point result (for sweep.csv)."""
    row: dict[str, Any] = dict(res["params"])
    for cos, groups in (res.get("fct_norm_to_be") or {}).items():
        for g, v in groups.items():
            row[f"fct_norm_{cos}_{g}"] = v
    for cos, groups in (res.get("deadline_meet_rate") or {}).items():
        row[f"meet_{cos}_overall"] = groups.get("overall")
    allst = res["stats"]["by_cos"].get("all", {}).get("overall", {})
    row["flows"] = allst.get("flows")
    row["unfinished"] = allst.get("unfinished")
    row["key"] = res.get("key")
    return row


# --------------------------------------------------------------------------------------------------
# pooled mean FCT over seeds, with unfinished flows as lower bounds, and its seed bootstrap

BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 20261128  # a fixed stream: the interval is a function of the results, rerun-identical


def fct_totals(rows: Iterable[Row], warmup_ns: int, end_ns: int) -> dict[str, dict[str, dict[str, float]]]:
    """Per class of service (plus ``all``) and size group: ``flows``, ``unfinished``, ``sum_fct_ns`` (finished
    flows), ``sum_elapsed_ns`` (unfinished flows: ``end_ns - start_ns``, a lower bound of their FCT) and
    ``sum_bytes`` (every flow).

    The same warm-up rule as :func:`flow_stats`. Totals, not means, so that seeds pool by adding them.
    """
    out: dict[str, dict[str, dict[str, float]]] = {}
    for r in rows:
        if r.get("size_bytes") is None or int(r["start_ns"]) < warmup_ns:
            continue
        start, fin = int(r["start_ns"]), r.get("finish_ns")
        for cos in (str(r["cos"]), "all"):
            for g in ("overall", size_class(int(r["size_bytes"]))):
                t = out.setdefault(cos, {}).setdefault(
                    g,
                    {"flows": 0, "unfinished": 0, "sum_fct_ns": 0.0, "sum_elapsed_ns": 0.0, "sum_bytes": 0.0},
                )
                t["flows"] += 1
                t["sum_bytes"] += int(r["size_bytes"])
                if fin is None:
                    t["unfinished"] += 1
                    t["sum_elapsed_ns"] += max(end_ns - start, 0)
                else:
                    t["sum_fct_ns"] += int(fin) - start
    return out


def pooled_ratio_ci(
    num: Sequence[tuple[float, float]],
    den: Sequence[tuple[float, float]],
    confidence: float = 0.95,
    resamples: int = BOOTSTRAP_RESAMPLES,
) -> dict[str, float | int | None]:
    """Ratio of two pooled means over seeds, ``sum(num sums) / sum(num counts)`` over the same of ``den``,
    with its seed-bootstrap percentile interval (seeds drawn with replacement, numerator and denominator of
    a seed together, since they share the run).

    ``num[i]``/``den[i]`` are (sum, count) of seed i. Returns ``ratio``, ``lo``, ``hi``, ``half`` (half the
    interval's width) and ``seeds``; the interval is None with fewer than two seeds. With few seeds a
    percentile bootstrap is too narrow (it sees only the spread of the seeds it has), so the Student-t
    interval of the per-seed ratios (:func:`mean_ci`) comes with it: ``t_lo``, ``t_hi``, ``t_half``.
    """
    if len(num) != len(den):
        raise ValueError("numerator and denominator need one entry per seed each")
    a = np.asarray(num, dtype=np.float64).reshape(-1, 2)
    b = np.asarray(den, dtype=np.float64).reshape(-1, 2)
    k = a.shape[0]
    none: dict[str, float | int | None] = {
        **dict.fromkeys(("ratio", "lo", "hi", "half", "t_lo", "t_hi", "t_half")),
        "seeds": k,
    }
    if k == 0 or a[:, 1].sum() == 0 or b[:, 1].sum() == 0 or b[:, 0].sum() == 0:
        return none
    ratio = float((a[:, 0].sum() / a[:, 1].sum()) / (b[:, 0].sum() / b[:, 1].sum()))
    if k < 2 or resamples < 1:
        return {**none, "ratio": ratio}
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    idx = rng.integers(0, k, size=(resamples, k))
    an, ac, bn, bc = (m[idx].sum(axis=1) for m in (a[:, 0], a[:, 1], b[:, 0], b[:, 1]))
    ok = (ac > 0) & (bc > 0) & (bn > 0)  # a resample without flows of a class has no ratio
    boot = (an[ok] / ac[ok]) / (bn[ok] / bc[ok])
    lo, hi = np.percentile(boot, [50 * (1 - confidence), 50 * (1 + confidence)])
    each = (a[:, 1] > 0) & (b[:, 1] > 0) & (b[:, 0] > 0)
    t = mean_ci(list((a[each, 0] / a[each, 1]) / (b[each, 0] / b[each, 1])), confidence)
    t_mean, t_half = t["mean"], t["ci95"]
    # a ratio of positive means is positive: the t interval's lower end is clipped at 0
    t_lo, t_hi = (
        (None, None) if t_mean is None or t_half is None else (max(t_mean - t_half, 0.0), t_mean + t_half)
    )
    return {
        "ratio": ratio, "lo": float(lo), "hi": float(hi), "half": float(hi - lo) / 2,
        "t_lo": t_lo, "t_hi": t_hi, "t_half": t_half, "seeds": k,
    }  # fmt: skip
