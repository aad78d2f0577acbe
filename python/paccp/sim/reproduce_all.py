"""``paccp reproduce all`` (and the groups ``paccp``, ``softbw``, ``mptcp``, ``compare``): every experiment
of the three papers and every scheme comparison at full size, in parallel, resumable, with one report.
The group ``ablation`` (not part of ``all``) runs paccp-host and each of its ablations on the shipped
comparison files.

Each job is one existing command (``paccp reproduce ID`` or ``paccp compare FILE``) run as a child process
with its output in ``DIR/logs/<job>.log``, so a crash or a memory peak of one job never takes the others
down and each keeps its own cache. A job whose output is already complete (``DIR/<id>/summary.json``, or
``compare.json`` for a comparison, both renamed into place at the very end of a run) is skipped, so an
interrupted reproduction is resumed by running the same command again; a resumable experiment picks up
its own per-point cache. At the end: ``DIR/report.html`` (``paccp report DIR``) and
``DIR/reproduce-all.json`` with the wall time, the CPU time, the load average, the commit and every job's
status; ``paccp docs results DIR`` turns that directory into the results pages of the documentation.

Adding an experiment to ``paccp.experiments`` means adding one line to :data:`JOBS` (a test keeps the two
equal).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from paccp.errors import UserError

GROUPS = ("paccp", "softbw", "mptcp", "compare", "ablation")
"""Groups of ``paccp reproduce``; ``all`` is every group but ``ablation``."""

IN_ALL = tuple(g for g in GROUPS if g != "ablation")
"""The groups ``all`` runs: the ablation group (13.5 more minutes on 2 cores, 19 CPU-minutes) is asked for by
name."""

COMPARE_GROUPS = ("compare", "ablation")
"""Groups whose jobs are ``paccp compare`` runs (``compare.json``)."""


@dataclass(frozen=True)
class Job:
    """One command of the reproduction."""

    id: str  # the experiment id, compare-<name> for scenarios/compare-<name>.toml, ablation-<name> for it
    group: str  # one of GROUPS
    minutes: float  # rough wall time on 2 quiet cores: the longest jobs start first

    @property
    def is_compare(self) -> bool:
        return self.group in COMPARE_GROUPS

    @property
    def scenario(self) -> str:
        """The comparison file's stem (``compare-<name>``) of a comparison job."""
        return "compare-" + self.id.split("-", 1)[1] if self.group == "ablation" else self.id

    def argv(self, out: Path, *, quick: bool, scenarios: Path) -> list[str]:
        """The ``paccp`` arguments that run this job into ``out``."""
        if self.is_compare:
            args = ["compare", str(scenarios / f"{self.scenario}.toml"), "--out", str(out / self.id)]
            args += ["--workers", "1"]  # the jobs are the parallelism
            if self.group == "ablation":
                args += ["--schemes", "ablations"]  # paccp.compare.schemes.SCHEME_SETS
        else:
            args = ["reproduce", self.id, "--out", str(out)]
        return args + (["--quick"] if quick else [])

    def done_file(self, out: Path) -> Path:
        """The file a complete output holds (written last, renamed into place)."""
        return out / self.id / ("compare.json" if self.is_compare else "summary.json")


# One line per experiment (paccp.experiments.REGISTRY) and per comparison file (scenarios/compare-*.toml).
JOBS: tuple[Job, ...] = (
    Job("fig4a", "paccp", 1),
    Job("fig4c", "paccp", 1),
    Job("fig5", "paccp", 1),
    Job("rcos", "paccp", 8),
    Job("fig8", "paccp", 6),
    Job("fig9", "paccp", 6),
    Job("fig10", "paccp", 6),
    Job("fig11", "paccp", 6),
    Job("softbw-oc", "softbw", 2),
    Job("softbw-price", "softbw", 1),
    Job("softbw-short", "softbw", 0.2),
    Job("softbw-converge", "softbw", 0.1),
    Job("softbw-share", "softbw", 0.1),
    Job("mptcp-bg", "mptcp", 0.5),
    Job("mptcp-table3", "mptcp", 1),
    Job("mptcp-fair", "mptcp", 1),
    Job("mptcp-sched", "mptcp", 0.5),
    Job("mptcp-rcvbuf", "mptcp", 0.5),
    Job("mptcp-cc", "mptcp", 0.5),
    Job("mptcp-wc", "mptcp", 0.5),
    Job("mptcp-clos", "mptcp", 6),
    Job("compare-leafspine-websearch", "compare", 5),
    Job("compare-clos-mapreduce", "compare", 6),
    Job("compare-overcommit", "compare", 0.2),
    Job("compare-overcommit-3class", "compare", 0.5),
    Job("compare-generalise-4class", "compare", 3),
    Job("ablation-leafspine-websearch", "ablation", 6),
    Job("ablation-clos-mapreduce", "ablation", 13.5),
    Job("ablation-overcommit", "ablation", 0.4),
    Job("ablation-overcommit-3class", "ablation", 0.6),
    Job("ablation-generalise-4class", "ablation", 1.6),
)

RECORD = "reproduce-all.json"
"""The file in DIR with the wall time, the load and every job's status."""


def is_group(name: str) -> bool:
    """True for ``all``, a group, or a comparison job (what :func:`expand` takes)."""
    return name == "all" or name in GROUPS or any(j.id == name and j.is_compare for j in JOBS)


def expand(names: list[str]) -> list[Job]:
    """Groups, ``all`` and job ids -> the jobs, each once, in the order of :data:`JOBS`."""
    by_id = {j.id: j for j in JOBS}
    wanted: set[str] = set()
    for name in names:
        if name == "all":
            wanted |= {j.id for j in JOBS if j.group in IN_ALL}
        elif name in GROUPS:
            wanted |= {j.id for j in JOBS if j.group == name}
        elif name in by_id:
            wanted.add(name)
        else:
            known = ", ".join(["all", *GROUPS, *by_id])
            raise UserError(f"unknown experiment or group {name!r} (known: {known})")
    return [j for j in JOBS if j.id in wanted]


def default_scenarios() -> Path:
    """``scenarios/`` of the source tree this package runs from (the comparison files live there)."""
    return Path(__file__).resolve().parents[3] / "scenarios"


def _commit(repo: Path) -> str:
    try:
        res = subprocess.run(
            ["git", "-C", str(repo), "describe", "--always", "--dirty", "--abbrev=12"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return res.stdout.strip() or "unknown"


@dataclass
class _Result:
    status: str  # "done", "skipped", "failed", "interrupted"
    wall_s: float = 0.0
    cpu_s: float = 0.0
    returncode: int = 0


def _run_child(cmd: list[str], log: Path, started: Callable[[subprocess.Popen[bytes]], None]) -> _Result:
    """Run ``cmd`` with stdout and stderr in ``log``; its own wall and CPU time (os.wait4's rusage).
    ``started`` gets the process (to stop it on SIGTERM)."""
    t0 = time.monotonic()
    with log.open("w", encoding="utf-8") as fh:
        fh.write("$ " + " ".join(cmd) + "\n")
        fh.flush()
        proc = subprocess.Popen(
            cmd, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )
        started(proc)
        _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - t0
    cpu = usage.ru_utime + usage.ru_stime
    return _Result("done" if proc.returncode == 0 else "failed", wall, cpu, proc.returncode)


def _fmt_s(s: float) -> str:
    m, sec = divmod(round(s), 60)
    return f"{m}:{sec:02d}"


def _progress(directory: Path) -> str:
    """``fig8 (14 points cached)``: how far a running job is, from the cache it resumes from."""
    entries = sum(1 for c in directory.glob("cache*/**/*") if c.is_file()) if directory.is_dir() else 0
    return f"{directory.name} ({entries} cached)" if entries else directory.name


def verdict_line(directory: Path) -> str:
    """One line on a job's outcome from its summary.json (the checks that hold, or the classes within
    the paper's tolerance), as on its results page."""
    from paccp.report.results_pages import job_page

    if not (directory / "summary.json").is_file():
        return "no output"
    try:
        _, verdict, line = job_page(directory.name, directory, ".")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return f"unreadable summary.json ({type(exc).__name__})"
    return {True: "holds: ", False: "differs: ", None: ""}[verdict] + line


def reproduce_all(
    names: list[str],
    out: Path,
    *,
    workers: int = 2,
    quick: bool = False,
    shortest_first: bool = False,
    heartbeat_s: float = 300.0,
    scenarios: Path | None = None,
    echo: Callable[[str], None] = print,
    runner: Callable[[list[str], Path, Callable[[subprocess.Popen[bytes]], None]], _Result] = _run_child,
) -> dict[str, Any]:
    """Run the jobs ``names`` expands to, ``workers`` at a time, longest (or shortest) first; skip the
    complete ones.

    Returns (and writes to ``DIR/reproduce-all.json``) the record of the run; raises UserError at the end
    when a job failed (after the others ran and the report was written).
    """
    from paccp.common.outdir import check_out_dir, write_text_atomic

    if workers < 1:
        raise UserError(f"--workers must be >= 1, got {workers}")
    jobs = expand(names)
    scen = scenarios or default_scenarios()
    for j in jobs:
        if j.is_compare and not (scen / f"{j.scenario}.toml").is_file():
            raise UserError(
                f"{j.id}: {scen / (j.scenario + '.toml')} not found (run from a PACCP source tree)"
            )
    check_out_dir(out)
    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    started = dt.datetime.now(dt.UTC)
    load_start = os.getloadavg()
    t0 = time.monotonic()
    results: dict[str, _Result] = {}
    todo = []
    for j in jobs:
        if j.done_file(out).is_file():
            results[j.id] = _Result("skipped")
        else:
            todo.append(j)
    skipped = len(jobs) - len(todo)
    echo(
        f"reproduce: {len(jobs)} jobs, {skipped} already complete in {out}, {len(todo)} to run"
        f" on {workers} workers (logs in {logs})"
    )
    # longest first: the short ones fill the gaps at the end (the shortest wall time); shortest first:
    # the most jobs complete early (a reproduction that has to stop at a given time)
    todo.sort(key=lambda j: j.minutes if shortest_first else -j.minutes)
    lock = threading.Lock()
    queue = list(todo)
    loads: list[float] = [load_start[0]]
    finished = [0]
    running: dict[str, subprocess.Popen[bytes]] = {}
    stopping = threading.Event()
    # a resumed run keeps the earlier attempts' records (also one killed half-way: the record is
    # rewritten after every job, so it holds that attempt's time up to its last finished job)
    previous = out / RECORD
    earlier: list[dict[str, Any]] = []
    if previous.is_file():
        with contextlib.suppress(OSError, ValueError):
            before = json.loads(previous.read_text())
            earlier = [*before.pop("earlier_attempts", []), before]

    def record(report: str | None = None, final: bool = False) -> dict[str, Any]:
        jobs_rec: dict[str, Any] = {}
        for j in jobs:
            r = results.get(j.id)
            status = r.status if r else ("running" if j.id in running else "pending")
            jobs_rec[j.id] = {"group": j.group, "status": status}
            if r is not None and r.status != "skipped":
                jobs_rec[j.id] |= {"wall_s": round(r.wall_s, 1), "cpu_s": round(r.cpu_s, 1)}
                jobs_rec[j.id]["log"] = f"logs/{j.id}.log"
        rec: dict[str, Any] = {
            "command": "paccp reproduce " + " ".join(names) + (" --quick" if quick else ""),
            "commit": commit,
            "started_utc": started.isoformat(timespec="seconds"),
            "finished_utc": dt.datetime.now(dt.UTC).isoformat(timespec="seconds") if final else None,
            "wall_s": round(time.monotonic() - t0, 1),
            "cpu_s": round(sum(r.cpu_s for r in results.values()), 1),
            "workers": workers,
            "order": "shortest first" if shortest_first else "longest first",
            "cpus": os.cpu_count(),
            "quick": quick,
            "load_avg_start": [round(x, 2) for x in load_start],
            "load_avg_end": [round(x, 2) for x in os.getloadavg()],
            "load_avg_1min_max": round(max(loads), 2),
            "interrupted": stopping.is_set(),
            "jobs": jobs_rec,
            "report": report,
        }
        if earlier:
            rec["earlier_attempts"] = earlier
        write_text_atomic(previous, json.dumps(rec, indent=2) + "\n")
        return rec

    def worker() -> None:
        while True:
            with lock:
                if not queue or stopping.is_set():
                    return
                j = queue.pop(0)
                echo(f"[{_fmt_s(time.monotonic() - t0)}] start {j.id}")
            cmd = [sys.executable, "-m", "paccp.cli", *j.argv(out, quick=quick, scenarios=scen)]

            def started_proc(proc: subprocess.Popen[bytes], job: str = j.id) -> None:
                with lock:
                    running[job] = proc

            res = runner(cmd, logs / f"{j.id}.log", started_proc)
            with lock:
                running.pop(j.id, None)
                if stopping.is_set() and res.status == "failed":
                    res.status = "interrupted"
                results[j.id] = res
                finished[0] += 1
                loads.append(os.getloadavg()[0])
                tail = "" if res.status == "done" else f" (exit {res.returncode}, see {logs / j.id}.log)"
                echo(
                    f"[{_fmt_s(time.monotonic() - t0)}] {res.status} {j.id} in {_fmt_s(res.wall_s)}"
                    f" (cpu {res.cpu_s:.0f} s) - {finished[0]}/{len(todo)}{tail}"
                )
                record()

    def stop(signum: int, frame: Any) -> None:  # SIGTERM / SIGINT: stop the jobs, keep what is done
        stopping.set()
        with lock:
            for proc in running.values():  # the job and its own workers (a process group each)
                with contextlib.suppress(OSError):
                    os.killpg(proc.pid, signal.SIGTERM)

    commit = _commit(Path(__file__).resolve().parents[3])
    last_beat = [time.monotonic()]
    old = {}
    if threading.current_thread() is threading.main_thread():
        old = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        record()
        threads = [threading.Thread(target=worker, daemon=True) for _ in range(min(workers, len(todo)) or 1)]
        for t in threads:
            t.start()
        while any(t.is_alive() for t in threads):  # a line on the running jobs every heartbeat_s
            next(t for t in threads if t.is_alive()).join(timeout=min(heartbeat_s, 5.0))
            with lock:
                if running and not stopping.is_set() and time.monotonic() - last_beat[0] >= heartbeat_s:
                    last_beat[0] = time.monotonic()
                    now = _fmt_s(time.monotonic() - t0)
                    echo(f"[{now}] running: " + ", ".join(_progress(out / job) for job in sorted(running)))
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
    wall = time.monotonic() - t0
    report = None
    if any((out / j.id).is_dir() for j in jobs):
        from paccp.report.html import write_report

        try:
            report = str(write_report(out)[0])
        except UserError as exc:  # nothing to render yet
            echo(f"reproduce: no report: {exc.message}")
    rec = record(report, final=True)
    failed = [j.id for j in jobs if j.id in results and results[j.id].status == "failed"]
    for j in jobs:
        echo(f"  {j.id}: {verdict_line(out / j.id)}")
    echo(
        f"reproduce: {len(jobs) - len(failed)}/{len(jobs)} complete in {_fmt_s(wall)} wall"
        f" (load average {rec['load_avg_start'][0]} at the start, {rec['load_avg_end'][0]} at the end)"
        + (f"; report {report}" if report else "")
    )
    if stopping.is_set():
        raise UserError(f"interrupted: rerun the same command to resume (record in {previous})")
    if failed:
        raise UserError(f"{len(failed)} job(s) failed: {', '.join(failed)} (logs in {logs})")
    return rec
