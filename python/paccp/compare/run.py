"""``paccp compare``: run every scheme on the same setup, score, aggregate over seeds, write the outputs.

Runs go through the sweep machinery (:func:`paccp.sim.sweep.run_points`: local process pool or Ray, a result
cache in ``DIR/cache-m<N>/cache`` keyed by the engine input, N the measurement version, a progress bar).
Outputs in DIR: ``compare.json`` (and the same document as ``summary.json``, which ``paccp report``
renders), ``table.md``, ``runs.csv`` (one row per scheme, point, seed and class) and one PNG per score
(schemes side by side).
"""

from __future__ import annotations

import csv
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from paccp.compare.bars import bar_checks
from paccp.compare.measure import (
    MEASURE_VERSION,
    RAW_KEYS,
    evaluate,
    gaming_gains,
    gaming_rates,
    score_run,
)
from paccp.compare.schemes import SCHEMES, Scheme, VmUse
from paccp.compare.setup import Setup, build_setup, gaming_setup
from paccp.compare.spec import Spec, book_path, load_spec
from paccp.errors import UserError
from paccp.sim.metrics import mean_ci
from paccp.sim.sweep import Point, resolve, run_points

if TYPE_CHECKING:
    from paccp.pricing.book import PriceBook


@dataclass
class Job:
    """One simulation of the comparison."""

    kind: str  # "main" or "gaming"
    scheme: Scheme
    point: str  # point name, or "k=<k>" for gaming
    seed: int
    setup: Setup
    sweep_point: Point


def _point(scheme: Scheme, setup: Setup, params: dict[str, Any], where: str) -> Point:
    return resolve(Point(scenario=scheme.build(setup), params=params), where=where)


def plan(spec: Spec, schemes: list[Scheme]) -> tuple[list[Job], dict[str, dict[str, str]]]:
    """Every run of the comparison, and the (scheme, point) pairs a scheme cannot run, with the reason.

    The setup is first validated under plain TCP (which runs anything): a mistake there is the user's and
    stops the comparison. A scheme that then rejects the setup (a check of its own scenario section) is
    reported as not run, with its one-line reason.
    """
    cfg = spec.cfg
    if cfg.bars is not None and cfg.bars.scheme not in SCHEMES:
        raise UserError(f"{spec.path}: compare.bars.scheme: unknown scheme {cfg.bars.scheme!r}")
    jobs: list[Job] = []
    not_run: dict[str, dict[str, str]] = {}
    tcp = SCHEMES["tcp"]
    for pt in cfg.points:
        for seed in cfg.seeds:
            setup = build_setup(spec, pt, seed)
            where = f"{spec.path} point {pt.name!r} seed {seed}"
            _point(tcp, setup, {}, where)  # user mistakes surface here
            for s in schemes:
                if pt.name in not_run.get(s.name, {}):
                    continue
                try:
                    sp = _point(s, setup, {"scheme": s.name, "point": pt.name, "seed": seed}, where)
                except UserError as exc:
                    not_run.setdefault(s.name, {})[pt.name] = exc.message
                    continue
                jobs.append(Job("main", s, pt.name, seed, setup, sp))
    if cfg.gaming is not None:
        for k in cfg.gaming.k:
            for seed in cfg.seeds:
                setup = gaming_setup(cfg.gaming, k, seed, cfg.window, spec.base.get("transport"))
                for s in schemes:
                    try:
                        sp = _point(s, setup, {"scheme": s.name, "gaming_k": k, "seed": seed}, "gaming")
                    except UserError as exc:
                        not_run.setdefault(s.name, {})[f"gaming k={k}"] = exc.message
                        continue
                    jobs.append(Job("gaming", s, f"k={k}", seed, setup, sp))
    for s in schemes:  # a point some seeds of which failed is not run at all
        for name in not_run.get(s.name, {}):
            jobs = [j for j in jobs if not (j.scheme is s and j.point == name)]
    return jobs, not_run


def check_prices(spec: Spec, jobs: list[Job], book: PriceBook) -> None:
    """Price every (scheme, purchase) of the plan once at zero use, before any run: a purchase the book
    refuses (e.g. a SoftBW guarantee at or above the book's capacity C) is an error naming the purchase,
    not a failure in the aggregation after all the runs (which left a partial directory)."""
    seen: set[tuple[str, str]] = set()
    for j in jobs:
        for vm in j.setup.vms:
            key = (j.scheme.name, vm.purchase.name)
            if key in seen:
                continue
            seen.add(key)
            try:
                j.scheme.price(book, vm, VmUse(0.0, 1.0, 0.0, 1.0))
            except UserError as exc:
                raise UserError(
                    f"{spec.path}: compare.purchases: {vm.purchase.name!r} (scheme {j.scheme.name}, price "
                    f"book {book.name!r}): {exc.message}"
                ) from None


def run_compare(
    scenario: Path,
    schemes: list[Scheme],
    out: Path,
    *,
    quick: bool = False,
    seeds: tuple[int | None, int | None] = (None, None),
    executor: str = "local",
    workers: int = 2,
    address: str | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Run the comparison and write its outputs; return the compare.json document. ``seeds``: (first,
    count) from ``--seed`` / ``--seeds`` (:meth:`paccp.compare.spec.Spec.with_seeds`), after ``quick``."""
    from paccp import limits
    from paccp.common.outdir import check_out_dir, resumable_dir
    from paccp.pricing.book import load_book

    limits.check_int(workers, "--workers", 1, 4096)
    spec = load_spec(scenario)
    if quick:
        spec = spec.quick()
    spec = spec.with_seeds(*seeds)
    book, _text = load_book(book_path(spec))
    check_out_dir(out)
    t0 = time.perf_counter()
    jobs, not_run = plan(spec, schemes)
    check_prices(spec, jobs, book)  # a purchase the book cannot price fails here, not after every run
    with resumable_dir(out):
        raws = run_points(
            [j.sweep_point for j in jobs],
            out / f"cache-m{MEASURE_VERSION}",
            executor=executor,
            workers=workers,
            address=address,
            progress=progress,
            evaluate_fn=evaluate,
            result_keys=RAW_KEYS,
        )
        scores = score_all(jobs, raws, book, spec.cfg.bottlenecks, progress)
        doc = aggregate(spec, schemes, jobs, raws, scores, book, not_run, quick)
        doc["wall_s"] = round(time.perf_counter() - t0, 1)
        doc["runs"] = len(jobs)
        doc["runs_cached"] = sum(1 for r in raws if r.get("cached"))
        write_outputs(doc, jobs, raws, scores, out)
    return doc


# ------------------------------------------------------------------------------------------------ aggregate


def score_all(
    jobs: list[Job], raws: list[dict[str, Any]], book: Any, bottlenecks: str, progress: bool = False
) -> list[dict[str, Any] | None]:
    """Each main run's scores (:func:`paccp.compare.measure.score_run`; None for a gaming run), computed
    once for the table and runs.csv, with a progress bar (the distance to the optimum solves an optimum
    per window, or per piece of one: about a minute for the leaf-spine file, four for the Clos file)."""
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn

    from paccp.common.console import progress as bar

    mains = sum(1 for j in jobs if j.kind == "main")
    out: list[dict[str, Any] | None] = []
    cols = (TextColumn("scores"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with bar(*cols, disable=not progress or not mains) as pb:
        task = pb.add_task("runs", total=mains)
        for j, raw in zip(jobs, raws, strict=True):
            if j.kind != "main":
                out.append(None)
                continue
            out.append({**score_run(raw, j.setup, j.scheme, book, bottlenecks), "seed": j.seed})
            pb.advance(task)
    return out


def aggregate(
    spec: Spec,
    schemes: list[Scheme],
    jobs: list[Job],
    raws: list[dict[str, Any]],
    scores: list[dict[str, Any] | None],
    book: Any,
    not_run: dict[str, dict[str, str]],
    quick: bool,
) -> dict[str, Any]:
    """compare.json: per point, scheme and class the mean and 95 % CI over seeds of every score
    (``scores``: :func:`score_all`)."""
    cfg = spec.cfg
    scored: dict[tuple[str, str], list[dict[str, Any]]] = {}
    gaming: dict[tuple[str, str], dict[int, tuple[float, float]]] = {}
    for j, raw, sc in zip(jobs, raws, scores, strict=True):
        if sc is not None:
            scored.setdefault((j.point, j.scheme.name), []).append(sc)
        else:
            gaming.setdefault((j.point, j.scheme.name), {})[j.seed] = gaming_rates(raw, j.setup)
    results: dict[str, Any] = {}
    classes = list(dict.fromkeys(p.name for p in cfg.purchases))
    for pt in cfg.points:
        results[pt.name] = {}
        for s in schemes:
            runs = scored.get((pt.name, s.name))
            if runs:
                results[pt.name][s.name] = _combine(runs, classes)
    doc: dict[str, Any] = {
        "kind": "compare",
        "name": cfg.name,
        "title": cfg.title or cfg.name,
        "scenario_file": str(spec.path),
        "quick": quick,
        "schemes": [s.name for s in schemes],
        "points": [p.name for p in cfg.points],
        "seeds": cfg.seeds,
        "window_ms": cfg.window / 1e6,
        "bottlenecks": cfg.bottlenecks,
        "book": book.name,
        "currency": book.currency,
        "purchases": [p.model_dump() for p in cfg.purchases],
        "mapping": {s.name: {p.name: s.params(p) for p in cfg.purchases} for s in schemes},
        "not_run": not_run,
        "results": results,
    }
    if cfg.gaming is not None:
        g = cfg.gaming
        out: dict[str, Any] = {}
        for s in schemes:
            ref = gaming.get(("k=1", s.name), {})
            rows = {}
            for k in g.k:
                cur = gaming.get((f"k={k}", s.name), {})
                gains = gaming_gains(ref, cur)
                rows[str(k)] = {
                    "gain": mean_ci(gains),
                    "rate_bps": mean_ci([v[0] for v in cur.values()]),
                    "fair_share_bps": g.rate / g.vms,
                }
            if ref:
                out[s.name] = rows
        doc["gaming"] = {
            "where": g.where,
            "vms": g.vms,
            "rate_bps": g.rate,
            "guarantee_bps": g.guarantee,
            "weight": g.weight,
            "k": g.k,
            "duration_ms": g.duration / 1e6,
            "results": out,
        }
    if cfg.bars is not None:
        doc["bars"] = cfg.bars.model_dump()
    doc["checks"] = checks(doc)
    return doc


def _combine(runs: list[dict[str, Any]], classes: list[str]) -> dict[str, Any]:
    def mc(vals: list[Any]) -> dict[str, Any]:
        return mean_ci([v for v in vals if v is not None])

    out: dict[str, Any] = {
        "fail_share": mc([r["fail_share"] for r in runs]),
        "utilisation": mc([r["utilisation"]["mean"] for r in runs]),
        "utilisation_max": mc([r["utilisation"]["max"] for r in runs]),
        "reference_class": runs[0]["reference_class"],
        "shuffle": _shuffle(runs),
        "distance_within": mc([r["distance"]["within"] for r in runs]),
        "distance_median_err": mc([r["distance"]["median_err"] for r in runs]),
        "distance_vms": max((r["distance"].get("vms", 0) for r in runs), default=0),
        "distance_vms_below": mc([r["distance"].get("vms_below") for r in runs]),
        "classes": {},
        "per_vm": {},
    }
    for c in classes:
        rows = [r["classes"][c] for r in runs if c in r["classes"]]
        if not rows:
            continue
        cls: dict[str, Any] = {
            key: mc([r[key] for r in rows])
            for key in (
                "fail_share",
                "fail_share_feasible",
                "fail_share_fabric",
                "rate_bps",
                "got_bps",
                "spare_bps",
                "spare_vs_target",
                "paid_per_hour",
                "got_vs_ref",
                "paid_vs_ref",
                "consistency",
            )
        }
        dist = [r["distance"]["classes"].get(c, {}) for r in runs]
        cls["distance_within"] = mc([d.get("within") for d in dist])
        cls["distance_median_err"] = mc([d.get("median_err") for d in dist])
        cls["vms"] = rows[0]["vms"]
        cls["demand_windows"] = sum(r["demand_windows"] for r in rows)
        cls["feasible_windows"] = sum(r["feasible_windows"] for r in rows)
        cls["fabric_windows"] = sum(r.get("fabric_windows", 0) for r in rows)
        cls["fct"] = {
            g: {
                "mean_ms": mc([r["fct"][g]["mean_ms"] for r in rows]),
                "p99_ms": mc([r["fct"][g]["p99_ms"] for r in rows]),
                "flows": sum(r["fct"][g]["flows"] for r in rows),
                "unfinished": sum(r["fct"][g]["unfinished"] for r in rows),
            }
            for g in ("small", "medium", "big", "all")
        }
        out["classes"][c] = cls
    for vm in runs[0]["per_vm"]:
        vals = [r["per_vm"][vm] for r in runs]
        out["per_vm"][vm] = {
            "class": vals[0]["class"],
            "host": vals[0]["host"],
            "fail_share": mc([v["fail_share"] for v in vals]),
            "fail_share_feasible": mc([v["fail_share_feasible"] for v in vals]),
            "fail_share_fabric": mc([v.get("fail_share_fabric") for v in vals]),
            "rate_bps": mc([v["rate_bps"] for v in vals]),
            "got_bps": mc([v["busy_rate_bps"] for v in vals]),
            "spare_bps": mc([v["spare_bps"] for v in vals]),
            "paid_per_hour": mc([v["paid_per_hour"] for v in vals]),
        }
    return out


def _shuffle(runs: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Mean shuffle time per job class over seeds (None outside MapReduce points)."""
    if runs[0].get("shuffle") is None:
        return None
    out: dict[str, Any] = {"jobs_unfinished": sum(r["shuffle"]["jobs_unfinished"] for r in runs)}
    out["all"] = mean_ci([r["shuffle"]["all"]["mean_s"] for r in runs])
    for c in ("small", "medium", "large"):
        out[c] = mean_ci([r["shuffle"]["by_class"][c]["mean_s"] for r in runs])
        out[f"{c}_jobs"] = runs[0]["shuffle"]["by_class"][c]["n"]
    return out


def checks(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The comparison's statements (``{statement, paper, ours, holds}``), from the issue's expectations,
    then the file's bars (:func:`paccp.compare.bars.bar_checks`)."""
    out: list[dict[str, Any]] = []
    gm = doc.get("gaming", {}).get("results", {})
    kmax = str(max(doc["gaming"]["k"])) if "gaming" in doc else None
    if kmax is not None and "tcp" in gm:
        gain = gm["tcp"][kmax]["gain"]["mean"]
        out.append(
            {
                "statement": f"plain TCP rewards flow count: {kmax} flows get more than 1.5x one flow's rate",
                "paper": "per-flow fairness (all three papers' motivation)",
                "ours": f"{gain:.2f}x" if gain is not None else "n/a",
                "holds": bool(gain is not None and gain > 1.5),
            }
        )
    for name in ("softbw", "paccp-vbp", "mptcp-bgwc", "ratelimit"):
        if kmax is not None and name in gm:
            gain = gm[name][kmax]["gain"]["mean"]
            out.append(
                {
                    "statement": f"{name} is VM-level: {kmax} flows get at most 1.25x one flow's rate",
                    "paper": "a VM's share does not depend on its number of flows",
                    "ours": f"{gain:.2f}x" if gain is not None else "n/a",
                    "holds": bool(gain is not None and gain <= 1.25),
                }
            )
    guaranteed = [p["name"] for p in doc["purchases"] if p["guarantee"] > 0]
    for point, res in doc["results"].items():
        base = res.get("tcp")
        if base is None:
            continue
        for name in ("paccp-vbp", "softbw", "mptcp-bgwc", "ratelimit"):
            r = res.get(name)
            if r is None:
                continue
            for c in guaranteed:
                ours = r["classes"][c]["fail_share_feasible"]["mean"]
                tcp = base["classes"][c]["fail_share_feasible"]["mean"]
                if ours is None or tcp is None:
                    continue
                out.append(
                    {
                        "statement": f"{point}: {name} fails class {c}'s guarantee less often than plain TCP "
                        "(feasible windows)",
                        "paper": "the scheme sells guarantees; TCP does not",
                        "ours": f"{100 * ours:.1f} % vs {100 * tcp:.1f} %",
                        "holds": bool(ours < tcp),
                    }
                )
    return out + bar_checks(doc)


# ------------------------------------------------------------------------------------------------ outputs


def write_outputs(
    doc: dict[str, Any],
    jobs: list[Job],
    raws: list[dict[str, Any]],
    scores: list[dict[str, Any] | None],
    out: Path,
) -> None:
    """compare.json, summary.json, table.md, runs.csv and the plots."""
    from paccp.common.outdir import write_text_atomic
    from paccp.compare.plots import plot_all
    from paccp.report.tables import markdown

    text = json.dumps(doc, indent=1, sort_keys=True) + "\n"
    write_text_atomic(out / "compare.json", text)
    write_text_atomic(out / "summary.json", text)
    write_text_atomic(out / "table.md", markdown(doc))
    rows = []
    for j, raw, sc in zip(jobs, raws, scores, strict=True):
        if sc is None:
            continue
        for cname, c in sc["classes"].items():
            rows.append(
                {
                    "point": j.point,
                    "scheme": j.scheme.name,
                    "seed": j.seed,
                    "class": cname,
                    "fail_share": c["fail_share"],
                    "rate_bps": c["rate_bps"],
                    "got_bps": c["got_bps"],
                    "spare_vs_target": c["spare_vs_target"],
                    "paid_per_hour": c["paid_per_hour"],
                    "consistency": c["consistency"],
                    "fct_small_p99_ms": c["fct"]["small"]["p99_ms"],
                    "fct_all_mean_ms": c["fct"]["all"]["mean_ms"],
                    "utilisation": sc["utilisation"]["mean"],
                    "wall_s": raw.get("wall_s"),
                }
            )
    if rows:
        tmp = out / "runs.csv.tmp"
        with tmp.open("w", newline="", encoding="utf-8") as fh:
            w = csv.DictWriter(fh, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
        tmp.replace(out / "runs.csv")
    plot_all(doc, out)


def parse_scheme_list(text: str) -> list[Scheme]:
    """The ``--schemes`` option (:func:`paccp.compare.schemes.parse_schemes`)."""
    from paccp.compare.schemes import parse_schemes

    return parse_schemes(text)


def load(path: Path) -> dict[str, Any]:
    """Read a compare.json (for reports)."""
    try:
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UserError(f"{path}: cannot read ({exc})") from None
    return data
