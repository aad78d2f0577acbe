"""``paccp bench service``: the controller under load on loopback, over a throwaway PostgreSQL (JSON figures).

1. A throwaway PostgreSQL server (:mod:`paccp.pricing.pgtemp`, default durability) and a ledger in it.
2. A tenant, ``--hosts`` hosts with ``--vms`` VMs each and the hosts' agent sessions, enrolled in bulk in
   the database (registering 100,000 hosts one request at a time would take longer than the load itself).
3. ``paccp serve`` as a child process, on a free loopback port.
4. Tenant reads at ``--rps`` requests/s for ``--api-seconds`` (:func:`paccp.service.loadgen.api_load`) by a
   tenant with 4 VMs: latency percentiles.
5. Usage: every host reports one record per VM every ``--period`` for ``--seconds``; afterwards the ledger
   must hold every acknowledged record exactly once (counted by the database). ``--via`` says how it
   travels: ``controller``, one report per host to the controller as an agent sends it
   (:func:`paccp.service.loadgen.usage_load`); ``relay``, the same reports to a real ``paccp relay`` in
   front of the controller (its CPU per report gives how many hosts one relay takes); ``batches``, the
   relays' side: ``--hosts-per-batch`` hosts' reports per ``POST /v1/relay/report``
   (:func:`paccp.service.loadgen.relay_batches_load`), the path of a cloud with one relay per rack.

The generator is bounded (at most ``--workers`` requests in flight, nothing started after the time is up);
reports it could not start on time are counted as ``missed_reports``. Each phase gives the controller's CPU
seconds (from ``/proc``) and the load average, since on a shared machine wall-clock rates vary with it.
Nothing here asserts a time: the figures are for the operator guide (``docs/service.md``).
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from paccp.errors import UserError


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cpu_s(pid: int) -> float:
    """CPU seconds of ``pid`` and its live descendants (``paccp serve --workers N``: its worker processes)."""
    stats: dict[int, list[str]] = {}
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                stats[int(p.name)] = (p / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
    tree, todo = set(), [pid]
    while todo:
        cur = todo.pop()
        tree.add(cur)
        todo += [k for k, f in stats.items() if int(f[1]) == cur and k not in tree]
    return sum(int(stats[k][11]) + int(stats[k][12]) for k in tree if k in stats) / os.sysconf("SC_CLK_TCK")


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


#: How the usage reaches the controller: each host itself, through a real relay process, or as the
#: batches rack relays send (the generator plays the relays).
VIAS = ("controller", "relay", "batches")


class Children:
    """The processes the bench starts (``paccp serve``, ``paccp relay``), each in its own process group,
    stopped with every process of their group (``--serve-workers``: uvicorn's workers too) however the bench
    ends: a child that does not start in time, an error, Ctrl-C or SIGTERM (``with Children() as kids``)."""

    def __init__(self, grace_s: float = 15.0) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []
        self.grace_s = grace_s

    def __enter__(self) -> Children:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_all()

    def start(
        self, cmd: list[str], log_path: Path, url: str, what: str, timeout_s: float = 120.0
    ) -> subprocess.Popen[bytes]:
        """Start a child (its output into ``log_path``) and wait until ``url``/healthz answers; a child
        that exits or does not answer within ``timeout_s`` is stopped (its whole group) and reported."""
        import httpx

        with log_path.open("wb") as log:
            # its own group and session: Ctrl-C reaches only the bench, which stops its children itself
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append(proc)
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    return proc
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                self.stop(proc, grace_s=0)
                tail = log_path.read_text(errors="replace")[-400:]
                raise UserError(f"bench service: the {what} did not start: {tail.strip()}")
            time.sleep(0.2)

    def stop(self, proc: subprocess.Popen[bytes], grace_s: float | None = None) -> None:
        """SIGTERM to the child's group (uvicorn drains in-flight requests first), then after the grace
        time SIGKILL to whatever of the group is left, the child reaped."""
        grace = self.grace_s if grace_s is None else grace_s
        if proc.poll() is None and grace > 0:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=grace)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # the group outlives its leader: workers left behind
        proc.wait()
        if proc in self.procs:
            self.procs.remove(proc)

    def stop_all(self) -> None:
        """Stop every child still running, the last started first."""
        for p in reversed(list(self.procs)):
            self.stop(p)


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM (and SIGHUP) end the bench like Ctrl-C, so its children are stopped (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _raise(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    old = {s: signal.signal(s, _raise) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def _stored(db: str, tenant: str) -> tuple[int, int]:
    """(usage rows, distinct record ids) of ``tenant`` in the ledger, counted by the database."""
    from sqlalchemy import func, select

    from paccp.pricing.ledger import Ledger
    from paccp.pricing.schema import usage

    led = Ledger(db, create=False)
    try:
        with led.engine.connect() as conn:
            q = select(func.count(), func.count(usage.c.record_id.distinct())).where(usage.c.tenant == tenant)
            n, d = conn.execute(q).one()
    finally:
        led.close()
    return int(n), int(d)


def enrol_bulk(db: str, hosts: int, vms: int) -> tuple[str, str, dict[str, str]]:
    """Tenant ``load`` with ``hosts`` hosts held by sessions and ``vms`` VMs on each (in one transaction),
    and tenant ``reader`` with 4 VMs for the API load: (``load``, reader's token, {host: session})."""
    from paccp.pricing.book import load_book
    from paccp.pricing.ledger import Ledger
    from paccp.pricing.schema import svc_host, svc_vm
    from paccp.service._store import Store, digest, new_token, now_iso

    led = Ledger(db)
    led.add_tenant("load", "vbp", load_book(None)[1])
    led.add_tenant("reader", "vbp", load_book(None)[1])  # the API load's tenant: 4 VMs, as a tenant has
    store = Store(led)
    tok = store.add_token("reader")
    for j in range(4):
        store.add_vm(f"reader-v{j}", "reader", "load-h0", f"/reader/v{j}")
    now, at = time.time_ns(), now_iso()
    sessions = {f"load-h{i}": new_token("ps") for i in range(hosts)}
    with store.write() as conn:
        conn.execute(
            svc_host.insert(),
            [{"name": h, "instance_id": "bench-agent", "session_sha256": digest(s), "registered_at": at,
              "last_seen_ns": now} for h, s in sessions.items()],
        )  # fmt: skip
        conn.execute(
            svc_vm.insert(),
            [{"name": f"{h}-v{j}", "tenant": "load", "host": h, "cgroup": f"/{h}/v{j}", "created_at": at}
             for h in sessions for j in range(vms)],
        )  # fmt: skip
        store.bump(conn)
    led.close()
    return "load", tok, sessions


def run_cli(
    hosts: int,
    vms: int,
    period_s: float,
    seconds: float,
    rps: float,
    api_seconds: float,
    workers: int,
    out: str,
    serve_workers: int = 1,
    via: str = "controller",
    hosts_per_batch: int = 1000,
) -> None:
    """Run the bench; print the JSON (and write it to ``out``)."""
    from paccp.pricing.pgtemp import temp_postgres
    from paccp.service.loadgen import api_load, relay_batches_load, usage_load

    if not (1 <= hosts <= 1_000_000 and 1 <= vms <= 64 and 0 < period_s <= 3600 and 0 < seconds <= 3600):
        raise UserError("--hosts 1..1,000,000, --vms 1..64, --period and --seconds in (0, 1 h]")
    if not (
        0 < rps <= 100_000 and 0 <= api_seconds <= 3600 and 1 <= workers <= 512 and 1 <= serve_workers <= 64
    ):
        raise UserError(
            "--rps in (0, 100,000], --api-seconds 0..3600, --workers 1..512, --serve-workers 1..64"
        )
    if via not in VIAS or not 1 <= hosts_per_batch <= 5000:
        raise UserError(f"--via is one of {', '.join(VIAS)}; --hosts-per-batch 1..5000")
    doc: dict[str, Any] = {"machine": {"python": platform.python_version(), "platform": platform.platform(),
                                       "cpu_count": os.cpu_count()}}  # fmt: skip
    with (
        _sigterm_as_interrupt(),
        temp_postgres(durable=True) as pg,
        tempfile.TemporaryDirectory(prefix="paccp-svcbench-") as tmp,
    ):
        db = pg.create_database("svc")
        print(f"bench service: enrolling {hosts} hosts x {vms} VMs ...", file=sys.stderr, flush=True)
        t = time.perf_counter()
        tenant, tok, sessions = enrol_bulk(db, hosts, vms)
        doc["enrol_s"] = round(time.perf_counter() - t, 1)
        admin, agent = Path(tmp) / "admin.token", Path(tmp) / "agent.token"
        port = _free_port()
        url = f"http://127.0.0.1:{port}"
        cmd = [sys.executable, "-c", "from paccp.cli import main; main()", "serve", "--db", db,
               "--port", str(port), "--admin-token-file", str(admin), "--agent-token-file", str(agent),
               "--log-level", "warning", "--workers", str(serve_workers)]  # fmt: skip
        with Children() as kids:
            proc = kids.start(cmd, Path(tmp) / "serve.log", url, "controller")
            if api_seconds > 0:
                print(f"bench service: {rps} requests/s for {api_seconds} s ...", file=sys.stderr, flush=True)
                before, cpu = _load(), _cpu_s(proc.pid)
                res = api_load(url, tok, rps, api_seconds, workers=64)
                res["controller_cpu_s"] = round(_cpu_s(proc.pid) - cpu, 2)
                per_req = res["controller_cpu_s"] * 1e3 / max(res["requests"], 1)
                res.update(controller_cpu_ms_per_request=round(per_req, 2), serve_workers=serve_workers)
                doc["api"] = {**res, "load_average_before": before, "load_average_after": _load()}
            print(f"bench service: usage for {seconds} s ({via}) ...", file=sys.stderr, flush=True)
            target, relay_pid = url, None
            if via == "relay":  # a real relay in front of the controller; the simulated agents report to it
                rport = _free_port()
                rcmd = [sys.executable, "-c", "from paccp.cli import main; main()", "relay",
                        "--controller", url, "--token-file", str(agent), "--port", str(rport),
                        "--log-level", "warning"]  # fmt: skip
                target = f"http://127.0.0.1:{rport}"
                relay_pid = kids.start(rcmd, Path(tmp) / "relay.log", target, "relay").pid
            before, cpu = _load(), _cpu_s(proc.pid)
            rcpu = _cpu_s(relay_pid) if relay_pid else 0.0
            scpu = pg.server_cpu_s()
            if via == "batches":
                enrol = agent.read_text(encoding="utf-8").strip()
                res = relay_batches_load(url, enrol, tenant, sessions, vms, period_s, seconds,
                                         hosts_per_batch, workers=workers)  # fmt: skip
            else:
                res = usage_load(target, tenant, sessions, vms, period_s, seconds, None, workers=workers)
            ctl_cpu, pg_cpu = _cpu_s(proc.pid) - cpu, pg.server_cpu_s() - scpu
            res.update(via=via, controller_cpu_s=round(ctl_cpu, 2), postgres_cpu_s=round(pg_cpu, 2),
                       records_per_controller_cpu_s=round(res["acknowledged"] / max(ctl_cpu, 1e-9)),
                       load_average_before=before, load_average_after=_load())  # fmt: skip
            if relay_pid:
                relay_cpu = _cpu_s(relay_pid) - rcpu
                per_report = relay_cpu / max(res["acknowledged"] / vms, 1)
                res.update(relay_cpu_s=round(relay_cpu, 2),
                           relay_cpu_ms_per_report=round(per_report * 1e3, 3),
                           hosts_per_relay_core=round(period_s / max(per_report, 1e-9)))  # fmt: skip
            kids.stop_all()  # before counting: uvicorn drains in-flight requests first
        res["in_ledger"], res["distinct_ids"] = _stored(db, tenant)
        res["nothing_lost_or_doubled"] = res["in_ledger"] == res["distinct_ids"] == res["acknowledged"]
        doc["usage"] = res
    doc["targets"] = {"usage_records_per_s": 40_000, "api_p99_ms_at_200_rps": 100}
    text = json.dumps(doc, indent=2, sort_keys=True)
    print(text)
    if out:
        Path(out).write_text(text + "\n", encoding="utf-8")
