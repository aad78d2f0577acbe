"""The MapReduce shuffle workload of the MPTCP bandwidth-guarantee paper's Clos simulation (its Figs. 18-20).

Source: the Facebook 2010 Hadoop trace as published by SWIM (``data/traces/``, provenance and licence
there). One job per trace line: submit time, map input bytes, shuffle bytes.

The paper's rule: a job of input size S MB runs S/64 mappers and S/64 reducers (one per 64 MB HDFS block;
we round up, at least one each), each server holds two mappers and two reducers, and the shuffle moves the
job's map output from every mapper to every reducer. We turn that into flows:

- the job's mappers occupy ``ceil(mappers / 2)`` distinct servers drawn uniformly without replacement
  (seeded), mapper ``i`` on the ``i // 2``-th of them; reducers likewise, drawn independently (a server may
  hold mappers and reducers of the same job);
- one flow per (mapper, reducer) pair on different servers, all starting at the job's (scaled) submit time
  (the map phase's computing time is not modelled: the shuffle starts at submission); the job's shuffle
  bytes are split evenly over all ``mappers * reducers`` pairs (remainder bytes to the first pairs), and the
  bytes of pairs on the same server are *local*: counted, never sent;
- a job's **shuffle completion time** is the finish of its last flow minus its start. Jobs without network
  shuffle (no shuffle bytes, or all pairs local) have none and are counted apart.

Scaling (:class:`Scaling`), because replaying the trace at full size is days of simulated packets (the
first 1,000 jobs alone move 12.8 TB in an hour): keep the first ``jobs`` jobs (the paper plots the first
1,000); multiply every job's shuffle bytes by ``size_scale`` and every submit time by ``time_scale`` (equal
factors keep the offered load); cap mappers and reducers per job at ``max_tasks`` (default: the cluster's
slots, two per server). Task counts come from the *unscaled* input size, so a job keeps its parallelism
(up to the cap) while its bytes shrink. Job size classes use the unscaled shuffle bytes: small < 1 MB,
medium < 1 GB, large >= 1 GB.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from paccp.errors import UserError
from paccp.limits import MAX_TRACE_SCALE

TRACE_FILE = "FB-2010_samples_24_times_1hr_0.tsv"
BLOCK_BYTES = 64 * 2**20  # one mapper (and one reducer) per 64 MB of input
SLOTS_PER_SERVER = 2  # mappers per server, and reducers per server
SMALL_JOB_BYTES = 1_000_000  # shuffle bytes below this: "small" job
LARGE_JOB_BYTES = 1_000_000_000  # at or above this: "large" job
_RNG_STREAM = 0x4D52  # "MR": the placement stream, independent of the engine's streams


def trace_path() -> Path:
    """The shipped Facebook 2010 trace (``data/traces/`` in the repository)."""
    return Path(__file__).resolve().parents[3] / "data" / "traces" / TRACE_FILE


@dataclass(frozen=True)
class Job:
    """One trace line."""

    id: str
    submit_s: float
    input_bytes: int
    shuffle_bytes: int
    output_bytes: int

    @property
    def size_class(self) -> str:
        """small (< 1 MB shuffle), medium (< 1 GB) or large, from the unscaled shuffle bytes."""
        if self.shuffle_bytes < SMALL_JOB_BYTES:
            return "small"
        if self.shuffle_bytes < LARGE_JOB_BYTES:
            return "medium"
        return "large"


def load_trace(path: str | Path | None = None, max_jobs: int | None = None) -> list[Job]:
    """Read the first ``max_jobs`` jobs (all when None); raise UserError naming a malformed line."""
    p = Path(path) if path is not None else trace_path()
    if not p.is_file():
        raise UserError(f"trace {p}: no such file")
    if max_jobs is not None and max_jobs < 1:
        raise UserError(f"trace: the number of jobs must be >= 1, got {max_jobs}")
    jobs: list[Job] = []
    with p.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if max_jobs is not None and len(jobs) >= max_jobs:
                break
            if not line.strip():
                continue
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 6:
                raise UserError(f"trace {p.name} line {lineno}: expected 6 tab-separated columns")
            try:
                submit = float(parts[1])
                inp, shuf, outp = int(parts[3]), int(parts[4]), int(parts[5])
            except ValueError:
                raise UserError(f"trace {p.name} line {lineno}: not numbers: {line.strip()!r}") from None
            if submit < 0 or min(inp, shuf, outp) < 0:
                raise UserError(f"trace {p.name} line {lineno}: negative value")
            if jobs and submit < jobs[-1].submit_s:
                raise UserError(f"trace {p.name} line {lineno}: submit times go backwards")
            jobs.append(Job(parts[0], submit, inp, shuf, outp))
    if not jobs:
        raise UserError(f"trace {p}: no jobs")
    return jobs


def task_count(input_bytes: int) -> int:
    """Mappers (= reducers) of a job: input / 64 MB rounded up, at least one."""
    return max(1, math.ceil(input_bytes / BLOCK_BYTES))


@dataclass(frozen=True)
class Scaling:
    """How the trace is shrunk to fit a packet-level run (module docstring)."""

    jobs: int = 1000
    size_scale: float = 1.0
    time_scale: float = 1.0
    max_tasks: int | None = None

    def __post_init__(self) -> None:
        if self.jobs < 1:
            raise UserError(f"mapreduce: jobs must be >= 1, got {self.jobs}")
        for name, x in (("size_scale", self.size_scale), ("time_scale", self.time_scale)):
            if not 0 < x <= MAX_TRACE_SCALE:  # also refuses nan
                raise UserError(f"mapreduce: {name} must be > 0 and at most {MAX_TRACE_SCALE:g}, got {x}")
        if self.max_tasks is not None and self.max_tasks < 1:
            raise UserError(f"mapreduce: max_tasks must be >= 1, got {self.max_tasks}")

    def describe(self) -> str:
        """One line for reports."""
        cap = "cluster slots" if self.max_tasks is None else str(self.max_tasks)
        return (
            f"first {self.jobs} jobs, shuffle bytes x {self.size_scale:g}, submit times x "
            f"{self.time_scale:g}, at most {cap} mappers/reducers per job"
        )


@dataclass(frozen=True)
class ShuffleFlow:
    """One mapper -> reducer transfer."""

    id: str
    job: str
    src: str
    dst: str
    size_bytes: int
    start_ns: int


@dataclass(frozen=True)
class JobPlan:
    """A job after placement: its tasks, servers and flows."""

    job: Job
    start_ns: int
    mappers: int
    reducers: int
    mapper_hosts: tuple[str, ...]
    reducer_hosts: tuple[str, ...]
    flow_ids: tuple[str, ...] = field(default=())
    network_bytes: int = 0
    local_bytes: int = 0


def _servers(rng: np.random.Generator, hosts: Sequence[str], tasks: int) -> tuple[str, ...]:
    n = -(-tasks // SLOTS_PER_SERVER)
    idx = rng.choice(len(hosts), size=n, replace=False)
    return tuple(hosts[int(i)] for i in idx)


def plan_shuffle(
    jobs: Sequence[Job], hosts: Sequence[str], scaling: Scaling, seed: int
) -> tuple[list[JobPlan], list[ShuffleFlow]]:
    """Place every job's tasks on ``hosts`` and list its shuffle flows (module docstring).

    Deterministic for a given seed. Raises UserError when the cluster is too small for one task.
    """
    if len(hosts) < 1 or len(set(hosts)) != len(hosts):
        raise UserError("mapreduce: hosts must be a non-empty list of distinct names")
    slots = SLOTS_PER_SERVER * len(hosts)
    cap = slots if scaling.max_tasks is None else min(scaling.max_tasks, slots)
    rng = np.random.default_rng(np.random.SeedSequence([seed, _RNG_STREAM]))
    plans: list[JobPlan] = []
    flows: list[ShuffleFlow] = []
    for j in jobs[: scaling.jobs]:
        m = r = min(task_count(j.input_bytes), cap)
        mh, rh = _servers(rng, hosts, m), _servers(rng, hosts, r)
        start = round(j.submit_s * scaling.time_scale * 1e9)
        total = round(j.shuffle_bytes * scaling.size_scale)
        pairs = m * r
        base, extra = divmod(total, pairs)
        ids: list[str] = []
        net = local = 0
        k = 0
        for mi in range(m):
            src = mh[mi // SLOTS_PER_SERVER]
            for ri in range(r):
                size = base + (1 if k < extra else 0)
                k += 1
                if size == 0:
                    continue
                dst = rh[ri // SLOTS_PER_SERVER]
                if src == dst:
                    local += size
                    continue
                fid = f"{j.id}-m{mi}-r{ri}"
                flows.append(ShuffleFlow(fid, j.id, src, dst, size, start))
                ids.append(fid)
                net += size
        plans.append(JobPlan(j, start, m, r, mh, rh, tuple(ids), net, local))
    return plans, flows


@dataclass(frozen=True)
class JobResult:
    """A job's shuffle outcome."""

    job: str
    size_class: str
    shuffle_bytes: int  # unscaled, from the trace
    network_flows: int
    finished: bool
    shuffle_time_s: float | None  # None: no network shuffle, or a flow did not finish


def shuffle_results(plans: Sequence[JobPlan], finish_ns: Mapping[str, int | None]) -> list[JobResult]:
    """Per job: completion = last flow's finish - job start (None when some flow never finished)."""
    out = []
    for p in plans:
        if not p.flow_ids:
            out.append(JobResult(p.job.id, p.job.size_class, p.job.shuffle_bytes, 0, True, None))
            continue
        fins = [finish_ns.get(f) for f in p.flow_ids]
        done = all(f is not None for f in fins)
        t = (max(f for f in fins if f is not None) - p.start_ns) / 1e9 if done else None
        out.append(JobResult(p.job.id, p.job.size_class, p.job.shuffle_bytes, len(p.flow_ids), done, t))
    return out


def summarize(results: Sequence[JobResult]) -> dict[str, object]:
    """Counts, mean / median / p90 shuffle time overall and per size class, and CDF points (seconds)."""
    with_net = [r for r in results if r.network_flows > 0]
    times = [r.shuffle_time_s for r in with_net if r.shuffle_time_s is not None]

    def stats(ts: Sequence[float]) -> dict[str, float | int | None]:
        if not ts:
            return {"n": 0, "mean_s": None, "median_s": None, "p90_s": None}
        a = np.asarray(ts, dtype=np.float64)
        return {
            "n": len(ts),
            "mean_s": float(a.mean()),
            "median_s": float(np.median(a)),
            "p90_s": float(np.quantile(a, 0.9)),
        }

    by_class = {
        c: stats([r.shuffle_time_s for r in with_net if r.size_class == c and r.shuffle_time_s is not None])
        for c in ("small", "medium", "large")
    }
    srt = sorted(times)
    return {
        "jobs": len(results),
        "jobs_without_network_shuffle": len(results) - len(with_net),
        "jobs_unfinished": sum(1 for r in with_net if not r.finished),
        "all": stats(times),
        "by_class": by_class,
        "cdf": [[t, (i + 1) / len(srt)] for i, t in enumerate(srt)],
    }
