"""The comparison file: one scenario (topology, traffic) plus the tenants' purchases, stated once.

A comparison file is an ordinary scenario (``[run]``, ``[transport]``, ``[topology]``, ``[routing]``,
``[[arrivals]]``: :mod:`paccp.scenario`) with a ``[compare]`` table. It must not contain ``[[vms]]``,
``[[flows]]``, ``[cc]``, ``[scheme]`` or ``[softbw]``: those are what each scheme's mapping
(:mod:`paccp.compare.schemes`) writes from the purchases::

    [compare]
    name = "overcommit"
    title = "SoftBW's over-committed hosts"
    seeds = [1, 2, 3]
    window = "5ms"                 # guarantee check window (= the flow sample interval)
    bottlenecks = "host_nic"       # channels whose utilisation is scored: host_nic | host_in | fabric
    book = "pricebooks/default.toml"   # optional; relative to the repository root or this file

    [[compare.purchases]]          # classes of service a tenant VM can buy
    name = "gold"
    guarantee = "700Mbit"          # minimum rate (hose model, per VM); 0 = none
    weight = 2                     # share of spare bandwidth relative to weight 1
    share = 1                      # how many VMs of this class in the repeating pattern

    [compare.vms]
    per_host = 4                   # VMs per host; classes follow the pattern (gold, silver, ...) per host
    hosts = ["s0", "s1"]           # hosts that carry VMs (default: every host)

    [compare.traffic]
    kind = "longlived"             # arrivals (the [[arrivals]], flows of the source host's VM) |
                                   # longlived | mapreduce
    flows_per_vm = [1, 4, 2, 8]    # longlived: cycled over a host's VMs
    starts = [0, 0.33]             # longlived: start of each VM's flows as a fraction of the run, cycled
    receivers = ["r0", "r1"]       # longlived: destinations, round robin (default: hosts without VMs)

    [[compare.points]]             # the columns of the comparison (each run for every scheme and seed)
    name = "2x"
    vms_per_host = 4               # optional overrides: vms_per_host, load (of every [[arrivals]])

    [compare.gaming]               # k = 1, 4, 16 flows of one VM next to single-flow VMs
    where = "host"                 # host: all VMs on one host (its NIC is the bottleneck) | fabric
    vms = 4
    rate = "1Gbit"
    guarantee = "100Mbit"
    weight = 1
    k = [1, 4, 16]
    duration = "300ms"

    [compare.quick]                # what --quick changes (tests)
    seeds = [1]
    points = ["2x"]
    set = { "run.duration" = "60ms" }   # dotted paths into the scenario
    gaming_duration = "100ms"
    mapreduce_jobs = 50

    [compare.bars]                 # optional: what one scheme is held to here, one check each in the
    scheme = "paccp-host"          # summary (means over the seeds; paccp.compare.bars)
    points = ["2x"]                # default: every point
    fail = 0.01                    # guarantee failures over feasible windows (every link where scored)
    per_vm = true                  # every VM within 10 % of its optimum share in >= 95 % of its windows
    be_p99 = 1.1                   # best effort's small-flow FCT p99 at most this times plain TCP's
    util_points = 2                # utilisation at most this many points below plain TCP's
    shuffle = true                 # mean shuffle time no worse than plain TCP's
    gain = 1.10                    # gaming gain at every k at most this

Everything is validated before any simulation; a mistake is one line (exit code 2).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, model_validator

from paccp.errors import UserError, validation_error
from paccp.limits import INT64_MAX, MAX_TRACE_SCALE
from paccp.scenario import Duration, Name, Rate, read_toml_file
from paccp.scenario.fields import _M

SCHEME_FREE_SECTIONS = ("vms", "flows", "cc", "scheme", "softbw")


class Purchase(_M):
    """What a tenant VM buys: a guarantee (minimum rate) and a weight (share of the spare)."""

    name: Name
    guarantee: Rate = Field(default=0, ge=0)
    weight: float = Field(default=1.0, ge=1.0, le=1e3)
    share: int = Field(default=1, ge=1, le=1000)

    @property
    def cos(self) -> str:
        """The PACCP class of the purchase (:func:`paccp.common.cos.classify`)."""
        from paccp.common.cos import classify

        return classify(self.guarantee, self.weight)


class VmsCfg(_M):
    """Where the VMs are."""

    per_host: int = Field(default=1, ge=1, le=64)
    hosts: list[str] | None = None


class TrafficCfg(_M):
    """The traffic (module docstring)."""

    kind: Literal["arrivals", "longlived", "mapreduce"]
    flows_per_vm: list[int] = Field(default_factory=lambda: [1], min_length=1)
    starts: list[float] = Field(default_factory=lambda: [0.0], min_length=1)
    receivers: list[str] | None = None
    jobs: int = Field(default=100, ge=1, le=100_000)
    size_scale: float = Field(default=1e-3, gt=0, le=MAX_TRACE_SCALE)
    time_scale: float = Field(default=1e-3, gt=0, le=MAX_TRACE_SCALE)
    max_tasks: int | None = Field(default=None, ge=1)
    drain: Duration = Field(default=200_000_000, ge=0)

    @model_validator(mode="after")
    def _check(self) -> TrafficCfg:
        if any(n < 1 or n > 256 for n in self.flows_per_vm):
            raise ValueError("flows_per_vm: each must be 1..256")
        if any(not 0 <= x < 1 for x in self.starts):
            raise ValueError("starts: each is a fraction of the run, 0 <= x < 1")
        return self


class PointCfg(_M):
    """One column of the comparison."""

    name: Name
    load: float | None = Field(default=None, gt=0, le=2.0)
    vms_per_host: int | None = Field(default=None, ge=1, le=64)


class GamingCfg(_M):
    """The gaming test: one VM opens k flows, the others one each, all buying the same purchase."""

    where: Literal["host", "fabric"] = "host"
    vms: int = Field(default=4, ge=2, le=64)
    rate: Rate = Field(default=1_000_000_000, gt=0)
    guarantee: Rate = Field(default=100_000_000, ge=0)
    weight: float = Field(default=1.0, ge=1.0, le=1e3)
    k: list[int] = Field(default_factory=lambda: [1, 4, 16], min_length=1)
    duration: Duration = Field(default=300_000_000, gt=0)

    @model_validator(mode="after")
    def _check(self) -> GamingCfg:
        if any(k < 1 or k > 256 for k in self.k):
            raise ValueError("k: each must be 1..256")
        if 1 not in self.k:
            raise ValueError("k must include 1 (the reference)")
        if self.guarantee * self.vms > self.rate:
            raise ValueError("guarantee x vms must not exceed rate (the gaming VMs are not over-committed)")
        return self


class QuickCfg(_M):
    """What ``--quick`` changes."""

    seeds: list[int] | None = None
    points: list[str] | None = None
    set: dict[str, Any] = Field(default_factory=dict)
    gaming_duration: Duration | None = None
    gaming_k: list[int] | None = None
    mapreduce_jobs: int | None = Field(default=None, ge=1)


class BarsCfg(_M):
    """``[compare.bars]``: what one scheme is held to on this file (issue 25's bars for paccp-host), each
    a check in the comparison's summary (:mod:`paccp.compare.bars`); means over the seeds."""

    scheme: str = "paccp-host"
    points: list[str] | None = None
    fail: float = Field(default=0.01, ge=0, le=1)
    per_vm: bool = False
    be_p99: float | None = Field(default=None, gt=0)
    util_points: float | None = Field(default=None, ge=0)
    shuffle: bool = False
    gain: float | None = Field(default=1.10, gt=0)


MAX_SEEDS = 100
"""The most seeds one comparison runs."""


def check_seeds(seeds: Sequence[int]) -> None:
    """The rule for a comparison's seeds (ValueError): 1 to :data:`MAX_SEEDS` distinct integers 0..2^63-1."""
    if not 1 <= len(seeds) <= MAX_SEEDS:
        raise ValueError(f"seeds: 1 to {MAX_SEEDS} of them, got {len(seeds)}")
    if any(not 0 <= s <= INT64_MAX for s in seeds) or len(set(seeds)) != len(seeds):
        raise ValueError("seeds must be distinct integers 0..2^63-1")


class CompareCfg(_M):
    """The ``[compare]`` table."""

    name: Name
    title: str = ""
    seeds: list[int] = Field(default_factory=lambda: [1])
    window: Duration = Field(default=5_000_000, gt=0)
    bottlenecks: Literal["host_nic", "host_in", "fabric"] = "fabric"
    book: str | None = None
    purchases: list[Purchase] = Field(min_length=1, max_length=16)
    vms: VmsCfg = VmsCfg()
    traffic: TrafficCfg
    points: list[PointCfg] = Field(default_factory=lambda: [PointCfg(name="base")], min_length=1)
    gaming: GamingCfg | None = None
    quick: QuickCfg = QuickCfg()
    bars: BarsCfg | None = None

    @model_validator(mode="after")
    def _check(self) -> CompareCfg:
        check_seeds(self.seeds)
        names = [p.name for p in self.purchases]
        if len(set(names)) != len(names):
            raise ValueError("purchases: names must be distinct")
        pts = [p.name for p in self.points]
        if len(set(pts)) != len(pts):
            raise ValueError("points: names must be distinct")
        for q in self.quick.points or []:
            if q not in pts:
                raise ValueError(f"quick.points: unknown point {q!r}")
        for q in (self.bars.points or []) if self.bars else []:
            if q not in pts:
                raise ValueError(f"bars.points: unknown point {q!r}")
        return self


class Spec:
    """A loaded comparison: its ``[compare]`` table, the base scenario dict and where it came from."""

    def __init__(self, cfg: CompareCfg, base: dict[str, Any], path: Path) -> None:
        self.cfg = cfg
        self.base = base
        self.path = path

    def quick(self) -> Spec:
        """The ``--quick`` version (``[compare.quick]`` applied)."""
        from paccp.sim.sweep import set_path

        q = self.cfg.quick
        upd: dict[str, Any] = {}
        if q.seeds is not None:
            upd["seeds"] = q.seeds
        if q.points is not None:
            upd["points"] = [p for p in self.cfg.points if p.name in q.points]
        if self.cfg.gaming is not None and (q.gaming_duration is not None or q.gaming_k is not None):
            g = self.cfg.gaming.model_copy(
                update={
                    "duration": q.gaming_duration or self.cfg.gaming.duration,
                    "k": q.gaming_k or self.cfg.gaming.k,
                }
            )
            upd["gaming"] = g
        if q.mapreduce_jobs is not None:
            upd["traffic"] = self.cfg.traffic.model_copy(update={"jobs": q.mapreduce_jobs})
        base = copy.deepcopy(self.base)
        where = f"{self.path}: compare.quick.set"
        for dotted, value in q.set.items():
            if not isinstance(dotted, str) or not dotted or any(not p for p in dotted.split(".")):
                raise UserError(f"{where}: {str(dotted)[:60]!r} is not a dotted path such as 'run.duration'")
            set_path(base, dotted, value, where)
        cfg = self.cfg.model_copy(update=upd)
        check_doc(cfg, base, self.path, after="after compare.quick.set")  # the same bans and bounds
        return Spec(cfg, base, self.path)

    def with_seeds(self, first: int | None, count: int | None) -> Spec:
        """This comparison on other seeds (``--seed FIRST --seeds N``: FIRST .. FIRST + N - 1; either
        alone keeps the other from the file: its first seed, or its number of seeds); UserError naming the
        options."""
        if first is None and count is None:
            return self
        first = self.cfg.seeds[0] if first is None else first
        count = len(self.cfg.seeds) if count is None else count
        seeds = range(first, first + max(0, count))  # lazy: its length is checked before its members
        try:
            check_seeds(seeds)
        except ValueError as exc:
            raise UserError(f"--seed {first} --seeds {count}: {exc}") from None
        return Spec(self.cfg.model_copy(update={"seeds": list(seeds)}), self.base, self.path)


def _fmt(exc: ValidationError, where: str) -> str:
    loc, msg = validation_error(exc)
    return f"{where}: compare.{loc}: {msg}" if loc else f"{where}: compare: {msg}"


def load_spec(path: str | Path) -> Spec:
    """Read and validate a comparison file (UserError, one line, on any mistake)."""
    p = Path(path)
    return parse_spec(read_toml_file(p, "comparison file"), p)


def parse_spec(doc: dict[str, Any], p: Path) -> Spec:
    """Validate a comparison file's tables (``doc``, read from ``p``; pure: the property suite calls it)."""
    doc = dict(doc)
    if "compare" not in doc or not isinstance(doc["compare"], dict):
        raise UserError(f"{p}: missing [compare] table (see paccp.compare.spec)")
    check_banned(doc, p)
    try:
        cfg = CompareCfg.model_validate(doc.pop("compare"))
    except ValidationError as exc:
        raise UserError(_fmt(exc, str(p))) from None
    check_doc(cfg, doc, p)
    return Spec(cfg, doc, p)


def check_banned(doc: dict[str, Any], p: Path, after: str = "") -> None:
    """The sections a comparison file must not hold (each scheme's mapping writes them)."""
    for sec in SCHEME_FREE_SECTIONS:
        if sec in doc:
            how = f" ({after})" if after else ""
            raise UserError(
                f"{p}: [{sec}] is not allowed in a comparison file{how}: each scheme's mapping writes it"
                " from [[compare.purchases]]"
            )


def check_doc(cfg: CompareCfg, doc: dict[str, Any], p: Path, after: str = "") -> None:
    """Checks of a comparison's scenario part against its [compare] table: made on the file, and again
    on the --quick version once ``compare.quick.set`` is applied (the same bans and bounds)."""
    from paccp.units import parse_duration_ns

    check_banned(doc, p, after)
    how = f" ({after})" if after else ""
    if "compare" in doc:
        raise UserError(f"{p}: compare.quick.set must not change [compare] itself{how}")
    run = doc.get("run")
    if isinstance(run, dict) and "duration" in run:
        try:
            dur = parse_duration_ns(run["duration"])
            warm = parse_duration_ns(run["warmup"]) if "warmup" in run else 0
        except UserError as exc:
            raise UserError(f"{p}: run{how}: {exc.message}") from None
        if cfg.window > dur - warm:
            raise UserError(
                f"{p}: compare.window ({cfg.window / 1e6:g} ms) must fit in the measured part of the run"
                f" (run.duration - run.warmup = {(dur - warm) / 1e6:g} ms){how}: no window would fit and"
                " every score would be empty"
            )
    if cfg.traffic.kind == "arrivals" and not doc.get("arrivals"):
        raise UserError(f"{p}: compare.traffic.kind = 'arrivals' needs [[arrivals]]")
    if cfg.traffic.kind != "arrivals" and doc.get("arrivals"):
        raise UserError(f"{p}: [[arrivals]] are only used with compare.traffic.kind = 'arrivals'")
    if any(pt.load is not None for pt in cfg.points) and cfg.traffic.kind != "arrivals":
        raise UserError(f"{p}: compare.points[].load needs compare.traffic.kind = 'arrivals'")


def book_path(spec: Spec) -> Path | None:
    """The price book named by ``compare.book`` (relative to this file, else to the repository root)."""
    if spec.cfg.book is None:
        return None
    cand = spec.path.parent / spec.cfg.book
    if cand.is_file():
        return cand
    from paccp.pricing.book import default_book_path

    root = default_book_path().parents[1]
    return root / spec.cfg.book
