"""The ``finite`` cross-check over several seeds (``paccp crosscheck --only finite --seeds N``).

One seed of ``finite`` has only 15 flows of 10 MB, and its class median is decided by which two or three
of them happen to hit a tail loss and wait a 200 ms retransmission timeout: one draw of a chaotic
process. Here seed s = 1 .. N builds ``scenarios.finite(sack, s)`` (other sizes order, hosts and start
times), runs it on the engine and on ns-3 with the same matched spec (the engine's routes), and pools:

- per size class the median and p99 FCT over the flows of all seeds (``run.metrics`` on the seeds'
  flows together: the same rule as one seed), drops, retransmissions and timeouts summed over the seeds,
  each with the ratio engine / ns-3 (``run.compare``);
- per seed the same comparison, so the spread of the per-seed ratios is visible beside the pooled one;
  a seed bootstrap of the pooled ratios (:func:`seed_bootstrap`) and the per-flow ratios (:func:`paired`);
- the issue's done-when checks (:func:`checks`) judged on the pooled figures, the spread beside.

Seed 1 is the one-seed scenario (``paccp crosscheck`` without ``--seeds``), whose output is unchanged.
"""

from __future__ import annotations

import dataclasses
import math
import random
import statistics
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from paccp.crosscheck import scenarios
from paccp.crosscheck.engine_side import ns3_spec, run_engine
from paccp.crosscheck.run import compare, format_table, metrics, run_ns3
from paccp.errors import UserError

MEDIAN_TOL = 0.10
"""Issue 16's done-when: every size class's median FCT within 10 % of ns-3's (NewReno and SACK)."""
RTO_FACTOR = 2.0
"""Issue 16's done-when: NewReno's retransmission-timeout count within 2x of ns-3's."""


def seed_list(n: int) -> list[int]:
    """The seeds of ``--seeds n``: 1 .. n (seed 1 = the one-seed run)."""
    if n < 1:
        raise UserError(f"--seeds must be at least 1, not {n}")
    return list(range(1, n + 1))


def side_metrics(sc: scenarios.Scenario, res: dict[str, Any]) -> dict[str, Any]:
    """``run.metrics`` and, per size class, the retransmission timeouts and the median FCT over all its
    flows, the unfinished ones counted as later than any (``fct_med_all_ms``); flows whose handshake never
    completed (``not_established``: every SYN lost, the 3 s retry past the run's end; they count as
    unfinished, outside the medians)."""
    out = metrics(sc, res)
    for sz in sorted({f["size_bytes"] for f in res["flows"] if f["size_bytes"]}):
        cls = [f for f in res["flows"] if f["size_bytes"] == sz]
        out[f"timeouts[{sz // 1000}K]"] = sum(f["timeouts"] for f in cls)
        # the median with the unfinished flows as later than every finished one (None: it is unfinished)
        fct = sorted(math.inf if f["fct_ns"] is None else f["fct_ns"] / 1e6 for f in cls)
        med = statistics.median(fct)
        out[f"fct_med_all_ms[{sz // 1000}K]"] = med if math.isfinite(med) else None
    if any("conn_delay_ns" in f for f in res["flows"]):
        out["not_established"] = sum(1 for f in res["flows"] if f.get("conn_delay_ns", 0) is None)
    return out


def pool(sc: scenarios.Scenario, results: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """:func:`side_metrics` over several seeds' results of one side: the flows of all seeds together
    (median and p99 per size class over the pooled flows), every seed's channels (drops summed)."""
    flows: list[dict[str, Any]] = []
    channels: dict[str, Any] = {}
    for k, res in enumerate(results):
        flows += res["flows"]
        channels |= {f"{k}:{name}": ch for name, ch in res["channels"].items()}
    return side_metrics(sc, {"flows": flows, "channels": channels})


BOOTSTRAP_DRAWS = 1000
BOOTSTRAP_LEVEL = 0.90


def seed_bootstrap(runs: dict[int, tuple[dict[str, Any], dict[str, Any]]]) -> dict[str, Any]:
    """How much the pooled ratios depend on the seeds drawn: per size class the median FCT ratio
    (``fct_med_ms[...]``, finished flows as in the medians) and the summed ``timeouts`` ratio, each as
    the central BOOTSTRAP_LEVEL interval over BOOTSTRAP_DRAWS resamplings of the seeds with replacement
    (the same seeds on both sides; ``random.Random(1)``). Empty with one seed. Not an issue target:
    shown beside the checks."""
    seeds = sorted(runs)
    if len(seeds) < 2:
        return {}
    fct: dict[int, list[dict[int, list[float]]]] = {}
    rto: dict[int, list[int]] = {}
    for s in seeds:
        fct[s], rto[s] = [], []
        for res in runs[s]:
            by: dict[int, list[float]] = {}
            for f in res["flows"]:
                if f["size_bytes"] and f["fct_ns"] is not None:
                    by.setdefault(f["size_bytes"], []).append(f["fct_ns"] / 1e6)
            fct[s].append(by)
            rto[s].append(sum(f["timeouts"] for f in res["flows"]))
    sizes = sorted({sz for s in seeds for by in fct[s] for sz in by})
    rng = random.Random(1)
    ratios: dict[str, list[float]] = {f"fct_med_ms[{sz // 1000}K]": [] for sz in sizes}
    ratios["timeouts"] = []
    for _ in range(BOOTSTRAP_DRAWS):
        pick = [rng.choice(seeds) for _ in seeds]
        for sz in sizes:
            e, r = ([x for s in pick for x in fct[s][side].get(sz, [])] for side in (0, 1))
            if e and r:
                ratios[f"fct_med_ms[{sz // 1000}K]"].append(statistics.median(e) / statistics.median(r))
        te, tr = (sum(rto[s][side] for s in pick) for side in (0, 1))
        if tr:
            ratios["timeouts"].append(te / tr)
    tail = (1 - BOOTSTRAP_LEVEL) / 2
    out: dict[str, Any] = {}
    for key, rs in ratios.items():
        if rs:
            rs.sort()
            lo, hi = rs[round(tail * (len(rs) - 1))], rs[round((1 - tail) * (len(rs) - 1))]
            out[key] = {"lo": lo, "hi": hi, "level": BOOTSTRAP_LEVEL}
    return out


def paired(runs: dict[int, tuple[dict[str, Any], dict[str, Any]]]) -> dict[str, Any]:
    """Per size class over the flows finished on both sides (matched by seed and id): the median of the
    per-flow FCT ratios engine / ns-3 and how many are within MEDIAN_TOL (not an issue target)."""
    ratios: dict[int, list[float]] = {}
    for eres, nres in runs.values():
        ref = {f["id"]: f for f in nres["flows"]}
        for f in eres["flows"]:
            r = ref.get(f["id"])
            if f["size_bytes"] and r and f["fct_ns"] and r["fct_ns"]:
                ratios.setdefault(f["size_bytes"], []).append(f["fct_ns"] / r["fct_ns"])
    return {
        f"{sz // 1000}K": {
            "flows": len(rs),
            "median_ratio": statistics.median(rs),
            "within_tol": sum(1 for x in rs if abs(x - 1.0) <= MEDIAN_TOL),
        }
        for sz, rs in sorted(ratios.items())
    }


def summarise(
    sc: scenarios.Scenario, runs: dict[int, tuple[dict[str, Any], dict[str, Any]]]
) -> dict[str, Any]:
    """Pooled and per-seed comparison of one variant from ``{seed: (engine result, ns-3 result)}``.

    ``compare``: the pooled metrics side by side (engine, ref = ns-3, ratio); ``per_seed``: each seed's
    comparison; ``spread``: per metric the per-seed ratios in seed order and their min / max."""
    seeds = sorted(runs)
    pooled = compare(pool(sc, (runs[s][0] for s in seeds)), pool(sc, (runs[s][1] for s in seeds)))
    per_seed = {s: compare(side_metrics(sc, runs[s][0]), side_metrics(sc, runs[s][1])) for s in seeds}
    spread: dict[str, Any] = {}
    for key in pooled:
        ratios = [per_seed[s].get(key, {}).get("ratio") for s in seeds]
        known = [r for r in ratios if r is not None]
        spread[key] = {
            "ratios": ratios,
            "min": min(known) if known else None,
            "max": max(known) if known else None,
        }
    return {
        "seeds": seeds,
        "compare": pooled,
        "per_seed": {str(s): c for s, c in per_seed.items()},
        "spread": spread,
        "paired": paired(runs),
        "bootstrap": seed_bootstrap(runs),
    }


def _classes(cmp: dict[str, Any]) -> list[str]:
    """The median-FCT rows of a comparison in size order (``fct_med_ms[10K]`` ...)."""
    rows = [k for k in cmp if k.startswith("fct_med_ms[")]
    return sorted(rows, key=lambda k: int(k[len("fct_med_ms[") : -2]))


def _span(spread: dict[str, Any], key: str) -> str:
    s = spread.get(key, {})
    return "-" if s.get("min") is None else f"{s['min']:.3f}-{s['max']:.3f}"


def _within(ratio: Any, tol: float) -> bool | None:
    return None if not isinstance(ratio, int | float) else abs(ratio - 1.0) <= tol


def _interval(b: dict[str, Any]) -> str:
    """A bootstrap interval as ``lo-hi`` (three decimals)."""
    return f"{b['lo']:.3f}-{b['hi']:.3f}"


def _pooled_check(
    stmt: str,
    target: str,
    scope: str,
    summary: dict[str, Any] | None,
    judge: Callable[[dict[str, Any]], tuple[str, bool | None]],
) -> dict[str, Any]:
    """One ``checks`` row on a :func:`summarise` output: "not run" (judged None) without one, else
    ``judge(summary)`` = (ours, holds), the statement followed by ``scope`` with ``{n}`` = the number
    of seeds."""
    from paccp.experiments import check

    if summary is None:
        return check(stmt, target, "not run", None)
    ours, ok = judge(summary)
    return check(f"{stmt} ({scope.format(n=len(summary['seeds']))})", target, ours, ok)


def median_check(variant: str, summary: dict[str, Any] | None) -> dict[str, Any]:
    """``checks`` row: every size class's pooled median FCT within MEDIAN_TOL of ns-3's; ``ours`` gives
    the pooled ratios and, per class, the range of the per-seed ratios."""

    def judge(s: dict[str, Any]) -> tuple[str, bool | None]:
        cmp, spread = s["compare"], s["spread"]
        keys = _classes(cmp)
        ratios = [cmp[k]["ratio"] for k in keys]
        ok = None if not keys or None in ratios else all(_within(r, MEDIAN_TOL) for r in ratios)
        names = " / ".join(k[len("fct_med_ms[") : -1] for k in keys)
        pooled = " / ".join("-" if r is None else f"{r:.3f}" for r in ratios)
        per_seed = " / ".join(_span(spread, k) for k in keys)
        boot = s.get("bootstrap") or {}
        ci = ""
        if keys and all(k in boot for k in keys):
            ci = f"; seed bootstrap {boot[keys[0]]['level']:.0%} " + " / ".join(
                _interval(boot[k]) for k in keys
            )
        return f"{names}: pooled {pooled}; per seed {per_seed}{ci}", ok

    stmt = f"finite {variant}: every size class's median FCT within {MEDIAN_TOL:.0%} of ns-3's"
    return _pooled_check(stmt, f"within {MEDIAN_TOL:.0%}", "flows of {n} seeds pooled", summary, judge)


def timeout_check(variant: str, summary: dict[str, Any] | None) -> dict[str, Any]:
    """``checks`` row: the summed retransmission timeouts within RTO_FACTOR of ns-3's (both none holds)."""

    def judge(s: dict[str, Any]) -> tuple[str, bool | None]:
        row = s["compare"].get("timeouts", {})
        e, r = row.get("engine"), row.get("ref")
        ok = None if e is None or r is None else (e <= RTO_FACTOR * r and r <= RTO_FACTOR * e)
        per_seed = ", ".join(
            f"{c['timeouts']['engine']}/{c['timeouts']['ref']}" for c in s["per_seed"].values()
        )
        boot = (s.get("bootstrap") or {}).get("timeouts")
        ci = "" if boot is None else f"; seed bootstrap {boot['level']:.0%} {_interval(boot)}"
        return f"engine {e} vs ns-3 {r}; per seed (engine/ns-3) {per_seed}{ci}", ok

    stmt = f"finite {variant}: retransmission timeouts within {RTO_FACTOR:g}x of ns-3's"
    return _pooled_check(stmt, f"within {RTO_FACTOR:g}x", "summed over {n} seeds", summary, judge)


def checks(summaries: dict[str, dict[str, Any] | None]) -> list[dict[str, Any]]:
    """The issue's done-when rows for ``finite`` on the pooled figures (``summaries``: ``newreno`` and
    ``sack`` -> :func:`summarise` output, None = not run): NewReno medians and timeouts, SACK medians."""
    return [
        median_check("NewReno", summaries.get("newreno")),
        timeout_check("NewReno", summaries.get("newreno")),
        median_check("SACK", summaries.get("sack")),
    ]


def format_spread(title: str, summary: dict[str, Any]) -> str:
    """Plain-text table: per metric the pooled ratio and each seed's ratio."""
    seeds = summary["seeds"]
    lines = [
        f"== {title}: ratio engine / ns-3, pooled and per seed",
        f"{'metric':28s} {'pooled':>7s} " + " ".join(f"{'s' + str(s):>7s}" for s in seeds),
    ]

    def f(x: Any) -> str:
        return "-" if x is None else f"{x:.3f}"

    for key, row in summary["compare"].items():
        per = summary["spread"][key]["ratios"]
        lines.append(f"{key:28s} {f(row['ratio']):>7s} " + " ".join(f"{f(r):>7s}" for r in per))
    for key, b in summary["bootstrap"].items():
        lines.append(f"{key}: pooled ratio over resampled seeds, {b['level']:.0%} interval {_interval(b)}")
    for cls, p in summary["paired"].items():
        lines.append(
            f"per-flow FCT ratio [{cls}]: median {p['median_ratio']:.3f}, {p['within_tol']} of {p['flows']} "
            f"flows within {MEDIAN_TOL:.0%}"
        )
    return "\n".join(lines)


def run_finite_seeds(
    seeds: list[int],
    log: Callable[[str], None],
    cache: Path | None = None,
    overrides: dict[str, Any] | None = None,
    sacks: tuple[bool, ...] = (False, True),
) -> dict[str, Any]:
    """Run ``finite`` with each seed on the engine and ns-3 (NewReno and SACK); pooled comparison,
    per-seed spread and the done-when ``checks``. ``overrides``: scenario fields for both sides, as
    ``run.ns3_checks`` takes them."""
    out: dict[str, Any] = {}
    summaries: dict[str, dict[str, Any] | None] = {"newreno": None, "sack": None}
    for sack in sacks:
        variant = "sack" if sack else "newreno"
        runs: dict[int, tuple[dict[str, Any], dict[str, Any]]] = {}
        ns3_flows: dict[str, Any] = {}
        for seed in seeds:
            sc = dataclasses.replace(scenarios.finite(sack, seed), **(overrides or {}))
            if not 0 <= sc.warmup_ns < sc.duration_ns:
                raise UserError(f"{sc.name}: the warm-up must be shorter than the duration")
            eres, paths = run_engine(sc)
            log(f"{sc.name} seed {seed}: engine done, running ns-3 ...")
            nres = run_ns3(ns3_spec(sc, paths), cache)
            runs[seed] = (eres, nres)
            ns3_flows[str(seed)] = nres["flows"]
        summary = summarise(sc, runs)  # run.metrics reads sc only for long-lived flows (none here)
        summary["ns3_flows"] = ns3_flows
        if overrides:
            summary["overrides"] = overrides
        summaries[variant] = summary
        out[variant] = summary
        title = f"{sc.name}, seeds {seeds[0]}-{seeds[-1]}"
        log(format_table(f"{title} pooled", summary["compare"], "ns-3"))
        log(format_spread(title, summary))
    out["checks"] = checks(summaries)
    verdict = {True: "holds", False: "FAILS", None: "not judged"}
    for c in out["checks"]:
        log(f"[{verdict[c['holds']]}] {c['statement']}: {c['ours']}")
    return out
