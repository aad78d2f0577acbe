"""Sweeps: run a grid of scenario points locally (process pool) or on Ray, with a result cache.

A **point** is one scenario (a dict in the TOML schema of :mod:`paccp.scenario`, seed included), an optional
deadline rule and the grid values that produced it. Evaluating a point runs the engine, builds the flows
table (:func:`paccp.sim.rundir.flow_table`), gives flows their deadlines and computes the workload metrics
(:mod:`paccp.sim.metrics`).

**Cache.** A point's key is the SHA-256 of the canonical JSON of its fully resolved engine input (which
contains the seed) plus its deadline rule and warm-up. Its result is stored as ``DIR/cache/<key>.json``
(written atomically as soon as the point finishes). A sweep skips every point whose file exists, so an
interrupted sweep resumes without recomputing finished points and a repeated sweep costs nothing.

**Sweep file** (``paccp sweep SWEEP.toml``)::

    [sweep]
    name = "vbp-load"
    scenario = "../scenarios/workload/fig8.toml"   # base scenario, relative to the sweep file
    seeds = [1, 2, 3]
    deadline = {kind = "active_share", rate = "5Gbit", split = true}   # optional (or kind = "size_class")

    [grid]                                # every combination is a point (times every seed)
    load = [0.3, 0.5, 0.7]                # shortcut: the load of every [[arrivals]]
    workload = ["websearch", "datamining"]  # shortcut: the workload of every [[arrivals]]
    "cc.rcos" = [2.0, 3.0]                # any scenario field by dotted path (list items by index)
    scenario = ["a.toml", "b.toml"]       # optional: several base scenarios (e.g. VBP and FBP)
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from paccp.common.cos import from_label
from paccp.errors import UserError
from paccp.limits import INT64_MAX, MAX_RATE_BPS, MAX_SWEEP_POINTS
from paccp.sim.metrics import fct_norm_to_be, flow_stats, headline, meet_rates, with_deadlines
from paccp.traffic.workload import ActiveShareDeadline, DeadlineRule, SizeClassDeadline
from paccp.units import parse_rate_bps

if TYPE_CHECKING:
    from paccp.scenario import Scenario


@dataclass(frozen=True)
class Resolved:
    """A point's validated scenario and its fully resolved engine input, computed once (:func:`resolve`)."""

    scenario: Scenario
    engine: dict[str, Any]


@dataclass(frozen=True)
class Point:
    """One scenario to evaluate: ``scenario`` (TOML-schema dict), ``deadline`` rule spec, grid ``params``."""

    scenario: dict[str, Any]
    params: dict[str, Any] = field(default_factory=dict)
    deadline: dict[str, Any] | None = None
    flows_dir: str | None = None  # when set, flows.parquet (with deadlines) is written there
    resolved: Resolved | None = field(default=None, compare=False, repr=False)


def resolve(point: Point, where: str = "sweep point") -> Point:
    """The point with its scenario validated and its engine input resolved (once; kept on the point)."""
    if point.resolved is not None:
        return point
    from paccp.scenario import parse_scenario, to_engine

    sc = parse_scenario(copy.deepcopy(point.scenario), where=where)
    return replace(point, resolved=Resolved(sc, to_engine(sc)))


# --------------------------------------------------------------------------------------------------
# deadline rule specs (plain dicts, so they hash and travel to worker processes)


def deadline_rule(spec: Mapping[str, Any] | None) -> DeadlineRule | None:
    """Build a deadline rule from its spec: ``{"kind": "size_class"}`` or ``{"kind": "active_share", ...}``.

    ``active_share`` fields: ``rate`` (rate string or bit/s), ``split`` (bool, default true), ``floor_ms``
    (default 1), ``link`` (host link rate, default 10Gbit). ``size_class`` fields: ``small_ms``,
    ``medium_ms``, ``big_rate`` (defaults: the rcos study's 0.7 ms, 2 ms, 3 Gb/s).
    """
    if spec is None:
        return None
    if not isinstance(spec, Mapping):
        raise UserError(f"deadline: expected a table, got {type(spec).__name__}")
    kind = spec.get("kind")
    # only the keys given are passed: the defaults live once, in the rule classes (paccp.traffic.workload)
    known = {
        "size_class": {"kind", "small_ms", "medium_ms", "big_rate"},
        "active_share": {"kind", "rate", "floor_ms", "split", "link"},
    }
    if kind not in known:
        raise UserError(f"deadline: kind must be 'size_class' or 'active_share', got {str(kind)[:40]!r}")
    unknown = set(spec) - known[kind]
    if unknown:
        raise UserError(f"deadline: unknown key {sorted(map(str, unknown))[0]!r} for kind {kind!r}")
    args: dict[str, Any] = {}
    try:
        for key, name, conv in (
            ("small_ms", "small_ns", _ms_to_ns),
            ("medium_ms", "medium_ns", _ms_to_ns),
            ("floor_ms", "floor_ns", _ms_to_ns),
            ("big_rate", "big_rate_bps", _rate),
            ("rate", "rate_bps", _rate),
            ("link", "link_bps", _rate),
        ):
            if key in spec:
                args[name] = conv(spec[key])
        if "split" in spec:
            if not isinstance(spec["split"], bool):
                raise ValueError(f"split must be true or false, got {spec['split']!r}")
            args["split"] = spec["split"]
    except UserError as exc:
        raise UserError(f"deadline: {exc.message}") from None
    except (TypeError, ValueError, ArithmeticError) as exc:
        raise UserError(f"deadline: {str(exc)[:120]}") from None
    if kind == "size_class":
        return SizeClassDeadline(**args)
    if "rate_bps" not in args:
        raise UserError("deadline: active_share needs 'rate'")
    return ActiveShareDeadline(**args)


def _ms_to_ns(v: Any) -> int:
    ms = float(v)
    if isinstance(v, bool) or not (math.isfinite(ms) and 0 < ms <= 1e9):
        raise ValueError(f"a time in ms must be a positive finite number, got {str(v)[:40]!r}")
    return int(ms * 1e6)


def _rate(v: Any) -> float:
    bps = float(parse_rate_bps(v))
    if not 0 < bps <= MAX_RATE_BPS:
        raise ValueError(f"a rate must be above 0 and at most {MAX_RATE_BPS} bit/s, got {str(v)[:40]!r}")
    return bps


# --------------------------------------------------------------------------------------------------
# evaluation of one point


def engine_input(point: Point) -> dict[str, Any]:
    """The resolved engine JSON of a point (validates the scenario when not yet resolved)."""
    resolved = resolve(point).resolved
    assert resolved is not None
    return resolved.engine


def point_key(point: Point) -> str:
    """Cache key: hash of the canonical engine input, the deadline rule, the warm-up and the engine build
    (:func:`paccp.sim.engine.source_hash`, so results of older engine code are never reused)."""
    from paccp.sim.engine import source_hash

    doc = {
        "engine": engine_input(point),
        "engine_build": source_hash(),
        "deadline": point.deadline,
        "warmup": point.scenario.get("run", {}).get("warmup"),
        "v": 1,
    }
    blob = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()[:20]


def evaluate(point: Point) -> dict[str, Any]:
    """Run one point and return its metrics (JSON-serialisable)."""
    import time

    from paccp.sim import engine
    from paccp.sim.rundir import flow_table, write_flows

    resolved = resolve(point).resolved
    assert resolved is not None
    sc = resolved.scenario
    t0 = time.perf_counter()
    result = engine.run(resolved.engine)
    wall = time.perf_counter() - t0
    rows = flow_table(sc, result)
    # the class of a workload flow is its label when that is BE/DS/MRG (docs/howto/workloads.md)
    for r in rows:
        named = from_label(r["label"])
        if named is not None:
            r["cos"] = named
    rule = deadline_rule(point.deadline)
    finite = with_deadlines(rows, rule, sc.run.duration) if rule is not None else rows
    if point.flows_dir is not None:
        out = Path(point.flows_dir)
        out.mkdir(parents=True, exist_ok=True)
        if rule is not None:
            by_id = {r["id"]: r for r in finite}
            rows = [by_id.get(r["id"], r) for r in rows]
        write_flows(rows, out)
    stats = flow_stats(finite, warmup_ns=sc.run.warmup)
    return {
        "params": point.params,
        "seed": sc.run.seed,
        "stats": stats,
        "fct_norm_to_be": fct_norm_to_be(stats),
        "deadline_meet_rate": meet_rates(stats) if rule is not None else None,
        "engine": dict(result.stats),
        "wall_s": round(wall, 3),
    }


# --------------------------------------------------------------------------------------------------
# the executor with its cache


def _write_atomic(path: Path, data: dict[str, Any]) -> None:
    from paccp.common.outdir import write_text_atomic

    write_text_atomic(path, json.dumps(data, sort_keys=True) + "\n")


_RESULT_KEYS = ("params", "seed", "stats", "engine")  # what every cached result has (evaluate)


def read_cached(path: Path, result_keys: Sequence[str] = _RESULT_KEYS) -> dict[str, Any] | None:
    """A point's cached result, or None when there is none. A cache file that cannot be a result
    (truncated, not UTF-8, not JSON, not an object with the result's keys: e.g. a disk that filled up, an
    edit) is a cache miss: a warning names the file and the point is computed again and its file
    rewritten, so a damaged cache never stops a sweep nor feeds it a wrong result."""
    from paccp.common.console import warn

    if not path.is_file():
        return None
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        why = None if isinstance(doc, dict) else f"a JSON {type(doc).__name__}, not an object"
        if why is None:
            missing = [k for k in result_keys if k not in doc]
            why = f"no {missing[0]!r}" if missing else None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        why = " ".join(str(exc).split())[:120]
    if why is not None:
        warn(f"sweep cache {path}: unreadable ({why}); computing the point again")
        return None
    return dict(doc)


EvalFn = Callable[[Point], dict[str, Any]]


def run_points(
    points: Sequence[Point],
    out_dir: Path,
    *,
    executor: str = "local",
    workers: int = 2,
    address: str | None = None,
    progress: bool = True,
    evaluate_fn: EvalFn = evaluate,
    result_keys: Sequence[str] = _RESULT_KEYS,
) -> list[dict[str, Any]]:
    """Evaluate ``points`` (cached in ``out_dir/cache``) and return their results in order.

    ``result_keys``: the keys every result of ``evaluate_fn`` has; a cache file without one of them is
    damaged (:func:`read_cached`).

    ``executor``: ``local`` (process pool of ``workers``; ``workers=1`` runs in this process) or ``ray``
    (``ray.init(address=address)``, or a local Ray with ``workers`` CPUs when no address is given).
    Each result has ``key`` and ``cached`` (True when it came from the cache) added.
    """
    if executor not in ("local", "ray"):
        raise UserError(f"executor must be 'local' or 'ray', got {executor!r}")
    if workers < 1:
        raise UserError("workers must be >= 1")
    from paccp.common.outdir import remove_stale

    cache = out_dir / "cache"
    cache.mkdir(parents=True, exist_ok=True)
    remove_stale(cache)  # temporary files of a killed earlier sweep
    points = [resolve(p) for p in points]
    keys = [point_key(p) for p in points]
    results: dict[str, dict[str, Any]] = {}
    todo: list[tuple[str, Point]] = []
    queued: set[str] = set()
    for k, p in zip(keys, points, strict=True):
        if k in results or k in queued:
            continue  # the same point twice
        cached = read_cached(cache / f"{k}.json", result_keys)
        if cached is not None:
            results[k] = {**cached, "cached": True}
        else:
            todo.append((k, p))
            queued.add(k)

    def done(k: str, res: dict[str, Any]) -> None:
        _write_atomic(cache / f"{k}.json", res)
        results[k] = {**res, "cached": False}

    with _Bar(progress, len(todo)) as advance:
        if not todo:
            pass
        elif executor == "ray":
            _run_ray(todo, done, advance, workers, address, evaluate_fn)
        elif workers == 1:
            for k, p in todo:
                done(k, evaluate_fn(p))
                advance()
        else:
            _run_pool(todo, done, advance, workers, evaluate_fn)
    return [{**results[k], "key": k} for k in keys]


class _Bar:
    """A rich progress bar over points (or a no-op)."""

    def __init__(self, enabled: bool, total: int) -> None:
        self.enabled = enabled and total > 0
        self.total = total

    def __enter__(self) -> Callable[[], None]:
        if not self.enabled:
            return lambda: None
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn

        from paccp.common.console import progress

        self.bar = progress(TextColumn("sweep"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        self.bar.__enter__()
        task = self.bar.add_task("points", total=self.total)
        return lambda: self.bar.advance(task)

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            self.bar.__exit__(None, None, None)


def _run_pool(
    todo: list[tuple[str, Point]],
    done: Callable[[str, dict[str, Any]], None],
    advance: Callable[[], None],
    workers: int,
    fn: EvalFn,
) -> None:
    with ProcessPoolExecutor(max_workers=min(workers, len(todo))) as pool:
        futs: dict[Future[dict[str, Any]], str] = {pool.submit(fn, p): k for k, p in todo}
        pending = set(futs)
        while pending:
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for f in finished:
                done(futs[f], f.result())  # an exception propagates after earlier points were cached
                advance()


def _run_ray(
    todo: list[tuple[str, Point]],
    done: Callable[[str, dict[str, Any]], None],
    advance: Callable[[], None],
    workers: int,
    address: str | None,
    fn: EvalFn,
) -> None:
    try:
        import ray
    except ImportError:
        raise UserError("the ray executor needs the 'ray' package (pip install ray)") from None
    started = False
    if not ray.is_initialized():
        try:
            if address:
                ray.init(address=address, include_dashboard=False, log_to_driver=False)
            else:
                ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
        except Exception as exc:  # ray raises many types (ConnectionError, RuntimeError, ...)
            raise UserError(f"ray: cannot start or join a cluster: {str(exc).splitlines()[0]}") from None
        started = True
    try:
        remote = ray.remote(num_cpus=1)(fn)
        refs = {remote.remote(p): k for k, p in todo}
        pending = list(refs)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for r in ready:
                done(refs[r], ray.get(r))
                advance()
    finally:
        if started:
            ray.shutdown()


# --------------------------------------------------------------------------------------------------
# sweep files


def set_path(obj: dict[str, Any], dotted: str, value: Any, where: str = "grid") -> None:
    """Set ``obj[a][b][0][c] = value`` for ``dotted = "a.b.0.c"`` (list items by index); errors start with
    ``where`` (the table the path came from)."""
    parts = dotted.split(".")
    cur: Any = obj
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if isinstance(cur, list):
            try:
                idx = int(part)
                if last:
                    cur[idx] = value
                    return
                cur = cur[idx]
            except (ValueError, IndexError):
                raise UserError(
                    f"{where}: {dotted!r}: {part!r} is not an index of a list of {len(cur)}"
                ) from None
        elif isinstance(cur, dict):
            if last:
                cur[part] = value
                return
            cur = cur.setdefault(part, {})
        else:
            raise UserError(f"{where}: {dotted!r}: cannot descend into a {type(cur).__name__}")


def apply_param(scenario: dict[str, Any], name: str, value: Any) -> None:
    """Apply one grid value: ``load``/``workload`` shortcuts, ``seed``, or a dotted scenario path."""
    if name in ("load", "workload"):
        arr = scenario.get("arrivals")
        if not arr or not isinstance(arr, list) or not all(isinstance(a, dict) for a in arr):
            raise UserError(f"grid: {name!r} needs a scenario with [[arrivals]]")
        for a in arr:
            a[name] = value
            if name == "load":
                a.pop("rate_per_s", None)
    elif name == "seed":
        run = scenario.setdefault("run", {})
        if not isinstance(run, dict):
            raise UserError("grid: the scenario's [run] is not a table")
        run["seed"] = value
    else:
        set_path(scenario, name, value)


def _read_toml(path: Path) -> dict[str, Any]:
    from paccp.scenario import read_toml_file

    return read_toml_file(path)


def expand_grid(grid: Mapping[str, Sequence[Any]], times: int = 1) -> list[dict[str, Any]]:
    """Every combination of the grid values, as ``{name: value}`` dicts (first name varies slowest).

    The points (combinations x ``times``: seeds x base scenarios) are counted before anything is expanded
    and refused beyond ``limits.MAX_SWEEP_POINTS`` with the count (10^8 points used to end in a
    MemoryError while expanding)."""
    names = list(grid)
    for n in names:
        if not isinstance(grid[n], list) or not grid[n]:
            raise UserError(f"grid: {n!r} must be a non-empty list")
    count = math.prod(len(grid[n]) for n in names) * times
    if count > MAX_SWEEP_POINTS:
        sizes = " x ".join(str(len(grid[n])) for n in names) + (f" x {times}" if times > 1 else "")
        raise UserError(
            f"grid: {sizes} = {count:,} points; at most {MAX_SWEEP_POINTS:,} per sweep (each point is a"
            " run): give fewer values or split the sweep"
        )
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*(grid[n] for n in names))]


def load_sweep(path: Path) -> tuple[str, list[Point]]:
    """Read a sweep file and return its name and points (validated and resolved)."""
    return sweep_points(_read_toml(path), path)


def sweep_points(doc: dict[str, Any], path: Path) -> tuple[str, list[Point]]:
    """The name and points of a sweep file's tables ``doc`` (base scenarios relative to ``path``)."""
    unknown = set(doc) - {"sweep", "grid"}
    if unknown:
        raise UserError(f"{path}: unknown table(s) {sorted(unknown)} (expected [sweep] and [grid])")
    sw = doc.get("sweep")
    if not isinstance(sw, dict):
        raise UserError(f"{path}: missing [sweep] table")
    bad = set(sw) - {"name", "scenario", "seeds", "deadline"}
    if bad:
        raise UserError(f"{path}: unknown [sweep] key(s) {sorted(bad)}")
    grid_doc = doc.get("grid", {})
    if not isinstance(grid_doc, dict):
        raise UserError(f"{path}: [grid] must be a table")
    grid = dict(grid_doc)
    bases = grid.pop("scenario", None) or [sw.get("scenario")]
    if bases == [None]:
        raise UserError(f"{path}: give [sweep] scenario = 'FILE' (or a 'scenario' list in [grid])")
    seeds = sw.get("seeds", [1])
    if (
        not isinstance(seeds, list)
        or not seeds
        or not all(isinstance(s, int) and not isinstance(s, bool) and 0 <= s <= INT64_MAX for s in seeds)
    ):
        raise UserError(f"{path}: seeds must be a non-empty list of integers 0..{INT64_MAX}")
    if not isinstance(bases, list) or not all(isinstance(b, str) for b in bases):
        raise UserError(f"{path}: scenario must be a file name (or a list of them in [grid])")
    deadline = sw.get("deadline")
    deadline_rule(deadline)  # validate early
    combos = expand_grid(grid, times=len(seeds) * len(bases))  # [{}] without a grid
    points: list[Point] = []
    for base in bases:
        base_path = path.parent / base
        base_doc = _read_toml(base_path)
        for combo in combos:
            for seed in seeds:
                sc = copy.deepcopy(base_doc)
                for name, value in combo.items():
                    apply_param(sc, name, value)
                apply_param(sc, "seed", seed)
                params = {**({"scenario": str(base)} if len(bases) > 1 else {}), **combo, "seed": seed}
                # full resolution up front (once; carried by the point): also loads the workload CDF files
                point = Point(scenario=sc, params=params, deadline=deadline)
                points.append(resolve(point, where=f"{path} point {params}"))
    return str(sw.get("name", path.stem)), points


def write_sweep_outputs(name: str, results: Iterable[Mapping[str, Any]], out_dir: Path) -> dict[str, Any]:
    """Write ``summary.json`` (every point's result) and ``sweep.csv`` (one row per point)."""
    import csv
    import io

    from paccp.common.outdir import write_text_atomic

    res = list(results)
    summary = {
        "kind": "sweep",
        "name": name,
        "points": [{k: v for k, v in r.items() if k != "cached"} for r in res],
    }
    write_text_atomic(out_dir / "summary.json", json.dumps(summary, indent=2, sort_keys=True) + "\n")
    rows = [headline(r) for r in res]
    cols: list[str] = []
    for r in rows:
        for c in r:
            if c not in cols:
                cols.append(c)
    buf = io.StringIO(newline="")
    w = csv.DictWriter(buf, fieldnames=cols)
    w.writeheader()
    for r in rows:
        w.writerow({c: ("" if r.get(c) is None else r.get(c)) for c in cols})
    write_text_atomic(out_dir / "sweep.csv", buf.getvalue())
    return summary
