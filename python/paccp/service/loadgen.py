"""A bounded load generator for a running controller (``python -m paccp.service.loadgen --help``).

Two loads, each at a fixed offered rate for a fixed time, on loopback or any controller you own:

- ``api``: tenants' reads (``GET /v1/vms`` and ``GET /v1/quote``, alternating) at ``--rps`` requests/s;
  prints latency percentiles (ms) and the achieved rate;
- ``usage``: simulated hosts (``--hosts`` x ``--vms`` VMs each) reporting one record per VM every
  ``--period`` seconds, batched per host as an agent does; prints records/s offered and acknowledged, and
  checks in the ledger afterwards that every acknowledged record is there exactly once.

It creates its own tenant (``load-<random>``), VMs and hosts through the admin API.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import statistics
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import httpx


def _setup(url: str, admin: str, hosts: int, vms: int) -> tuple[str, str, list[str]]:
    h = {"Authorization": f"Bearer {admin}"}
    name = f"load-{secrets.token_hex(3)}"
    with httpx.Client(base_url=url, headers=h, timeout=30) as c:
        r = c.post("/v1/admin/tenants", json={"name": name, "model": "vbp"})
        r.raise_for_status()
        tok = str(r.json()["token"])
        for i in range(hosts):
            for j in range(vms):
                c.post(
                    "/v1/admin/vms",
                    json={"name": f"{name}-h{i}-v{j}", "tenant": name, "host": f"{name}-h{i}",
                          "cgroup": f"/{name}/h{i}/v{j}"},
                ).raise_for_status()  # fmt: skip
    return name, tok, [f"{name}-h{i}" for i in range(hosts)]


QUOTE = {"cos": "mrg", "theta": "400Mbit", "omega": "2"}
Call = Callable[["aiohttp.ClientSession", int], Awaitable[None]]


def _paced(
    rate: float, seconds: float, fn: Call, workers: int, url: str, **client: Any
) -> tuple[list[float], int]:
    """Await ``fn(http, k)`` ``rate`` times a second for ``seconds`` (open loop, at most ``workers``
    in flight).

    Bounded: nothing is queued beyond the workers, and nothing is started after ``seconds``; a call the
    generator could not start on time (all workers busy, or the generator itself a period late) is not
    made, and counted. One asyncio loop and one HTTP keep-alive client (aiohttp's ``ClientSession(url,
    **client)``), so that the generator's own cost per call stays small next to the controller's.
    Returns the latencies of the calls made (from their start) and the number of calls missed.
    """

    async def run() -> tuple[list[float], int]:
        http = aiohttp.ClientSession(url, connector=aiohttp.TCPConnector(limit=workers), **client)
        lat: list[float] = []
        busy = [0]
        tasks: set[asyncio.Task[None]] = set()

        async def one(k: int) -> None:
            try:
                t = time.perf_counter()
                await fn(http, k)
                lat.append(time.perf_counter() - t)
            finally:
                busy[0] -= 1

        missed = 0
        start = time.perf_counter()
        for k in range(int(rate * seconds)):
            due = start + k / rate
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            if busy[0] >= workers or time.perf_counter() > due + 1.0 / rate:
                missed += 1  # every worker still busy (or the generator late) when the call is due
                continue
            busy[0] += 1
            task = asyncio.create_task(one(k))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        await asyncio.gather(*tasks)
        await http.close()
        return lat, missed

    return asyncio.run(run())


def _pct(lat: list[float], q: int) -> float | None:
    return round(statistics.quantiles(sorted(lat), n=100)[q - 1] * 1e3, 1) if len(lat) > 2 else None


def api_load(url: str, tok: str, rps: float, seconds: float, workers: int = 64) -> dict[str, Any]:
    """Tenant reads (``GET /v1/vms`` and ``GET /v1/quote``, alternating) at ``rps`` for ``seconds``."""
    errors = [0]

    async def call(http: aiohttp.ClientSession, k: int) -> None:
        path, params = ("/v1/vms", None) if k % 2 else ("/v1/quote", QUOTE)
        try:
            async with http.get(path, params=params) as r:
                await r.read()
                ok = r.status == 200
        except (aiohttp.ClientError, TimeoutError):
            ok = False
        if not ok:
            errors[0] += 1

    t, cpu = time.perf_counter(), time.process_time()
    lat, missed = _paced(rps, seconds, call, workers, url, timeout=aiohttp.ClientTimeout(30),
                         headers={"Authorization": f"Bearer {tok}"})  # fmt: skip
    wall, cpu = time.perf_counter() - t, time.process_time() - cpu
    return {"offered_rps": rps, "achieved_rps": round(len(lat) / wall, 1), "requests": len(lat),
            "missed": missed, "errors": errors[0], "p50_ms": _pct(lat, 50), "p99_ms": _pct(lat, 99),
            "max_ms": round(max(lat) * 1e3, 1) if lat else None, "generator_cpu_s": round(cpu, 2),
            "generator_cpu_ms_per_request": round(cpu * 1e3 / max(len(lat), 1), 2)}  # fmt: skip


def usage_load(
    url: str,
    tenant: str,
    sessions: dict[str, str],
    vms: int,
    period: float,
    seconds: float,
    db: str | None,
    workers: int = 32,
) -> dict[str, Any]:
    """Each host of ``sessions`` reports one record per VM (``<host>-v<j>``) every ``period`` seconds, one
    report per host as an agent sends it; afterwards the ledger must hold every acknowledged record once."""
    host_names = sorted(sessions)
    hosts = len(host_names)
    t0 = time.time_ns()
    acked = [0]
    failed = [0]
    period_ns = int(period * 1e9)

    async def report(http: aiohttp.ClientSession, k: int) -> None:
        hn = host_names[k % hosts]
        start = t0 + (k // hosts) * period_ns
        recs = [
            {"record_id": f"load:{hn}:{j}:{start}", "source": "datapath", "tenant": tenant,
             "vm": f"{hn}-v{j}", "cos": "be", "theta_bps": 0, "omega": "1", "start_ns": start,
             "end_ns": start + period_ns, "bytes": 1000}
            for j in range(vms)
        ]  # fmt: skip
        try:
            async with http.post("/v1/agent/report", json={"records": recs},
                                 headers={"Authorization": f"Bearer {sessions[hn]}"}) as r:  # fmt: skip
                doc = (await r.json()) if r.status == 200 else {}
            # the controller answers how many were new; a relay how many of the report are in the ledger
            ok = doc.get("new", doc.get("records")) == len(recs)
        except (aiohttp.ClientError, TimeoutError, ValueError):
            ok = False
        if ok:
            acked[0] += len(recs)
        else:
            failed[0] += 1

    t = time.perf_counter()
    lat, missed = _paced(hosts / period, seconds, report, workers, url, timeout=aiohttp.ClientTimeout(60))
    wall = time.perf_counter() - t
    out: dict[str, Any] = {
        "hosts": hosts,
        "vms_per_host": vms,
        "period_s": period,
        "seconds": seconds,
        "offered_records_per_s": round(hosts * vms / period, 1),
        "acknowledged_records_per_s": round(acked[0] / wall, 1),
        "acknowledged": acked[0],
        "failed_reports": failed[0],
        "missed_reports": missed,
        "report_p50_ms": _pct(lat, 50),
        "report_p99_ms": _pct(lat, 99),
    }
    if db:
        from paccp.pricing.ledger import Ledger

        led = Ledger(db, create=False)
        recs = led.usage(tenant, 0, 2**62)
        led.close()
        out["in_ledger"] = len(recs)
        out["distinct_ids"] = len({r.record_id for r in recs})
        out["nothing_lost_or_doubled"] = out["in_ledger"] == out["distinct_ids"] == acked[0]
    return out


def relay_batches_load(
    url: str,
    enrol_token: str,
    tenant: str,
    sessions: dict[str, str],
    vms: int,
    period: float,
    seconds: float,
    hosts_per_batch: int,
    workers: int = 16,
) -> dict[str, Any]:
    """The relays' side of the usage path: every ``period`` each host reports one record per VM, and the
    hosts' reports reach the controller in batches of ``hosts_per_batch`` hosts (``POST
    /v1/relay/report``), as rack relays send them; offered, acknowledged and missed are counted as in
    :func:`usage_load`."""
    host_names = sorted(sessions)
    hosts = len(host_names)
    per_period = -(-hosts // hosts_per_batch)  # batches per period
    t0 = time.time_ns()
    period_ns = int(period * 1e9)
    acked = [0]
    failed: list[str] = []
    line = (
        '{{"record_id":"load:{h}:{j}:{s}","source":"datapath","tenant":"TENANT","vm":"{h}-v{j}","cos":"be",'
        '"theta_bps":0,"omega":"1","start_ns":{s},"end_ns":{e},"bytes":1000}}\n'
    ).replace("TENANT", tenant)

    async def batch(http: aiohttp.ClientSession, k: int) -> None:
        lo = (k % per_period) * hosts_per_batch
        mine = host_names[lo : lo + hosts_per_batch]
        start = t0 + (k // per_period) * period_ns
        recs = "".join(line.format(h=h, j=j, s=start, e=start + period_ns) for h in mine for j in range(vms))
        body = {"hosts": [{"session": sessions[h], "records": vms} for h in mine], "records": recs}
        try:
            async with http.post("/v1/relay/report", json=body) as r:
                doc = (await r.json()) if r.status == 200 else {"error": (await r.text())[:200]}
            ok = doc.get("new") == len(mine) * vms
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            ok, doc = False, {"error": str(exc)}
        if ok:
            acked[0] += len(mine) * vms
        else:
            failed.append(str(doc.get("error", doc))[:200])

    t = time.perf_counter()
    auth = {"Authorization": f"Bearer {enrol_token}"}
    lat, missed = _paced(per_period / period, seconds, batch, workers, url,
                         timeout=aiohttp.ClientTimeout(120), headers=auth)  # fmt: skip
    wall = time.perf_counter() - t
    return {
        "hosts": hosts,
        "vms_per_host": vms,
        "period_s": period,
        "seconds": seconds,
        "hosts_per_batch": hosts_per_batch,
        "offered_records_per_s": round(hosts * vms / period, 1),
        "offered_batches": int(per_period / period * seconds),
        "acknowledged_records_per_s": round(acked[0] / wall, 1),
        "acknowledged": acked[0],
        "failed_batches": len(failed),
        "first_failure": failed[0] if failed else None,
        "missed_batches": missed,
        "batch_p50_ms": _pct(lat, 50),
        "batch_p99_ms": _pct(lat, 99),
    }


def setup_api(url: str, admin: str, hosts: int, vms: int, agent_token: str | None) -> tuple[str, str, dict]:
    """A tenant, ``hosts`` x ``vms`` VMs and (with ``agent_token``) the hosts' sessions, through the API."""
    name, tok, host_names = _setup(url, admin, hosts, vms)
    sessions: dict[str, str] = {}
    if agent_token:
        with httpx.Client(base_url=url, timeout=30) as c:
            for hn in host_names:
                r = c.post(
                    "/v1/agent/register",
                    json={"host": hn, "instance_id": "load" + secrets.token_hex(6)},
                    headers={"Authorization": f"Bearer {agent_token}"},
                )
                r.raise_for_status()
                sessions[hn] = r.json()["session"]
    return name, tok, sessions


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("load", choices=["api", "usage"])
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--admin-token-file", required=True)
    ap.add_argument("--agent-token-file")
    ap.add_argument("--rps", type=float, default=200)
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--hosts", type=int, default=100)
    ap.add_argument("--vms", type=int, default=4)
    ap.add_argument("--period", type=float, default=10)
    ap.add_argument("--db", help="the controller's ledger, to check what was acknowledged is there once")
    a = ap.parse_args(argv)
    admin = Path(a.admin_token_file).read_text().strip()
    if a.load == "api":
        _name, tok, _s = setup_api(a.url, admin, 1, 4, None)
        res = api_load(a.url, tok, a.rps, a.seconds)
    else:
        if not a.agent_token_file:
            ap.error("usage load needs --agent-token-file")
        agent = Path(a.agent_token_file).read_text().strip()
        name, _tok, sessions = setup_api(a.url, admin, a.hosts, a.vms, agent)
        res = usage_load(a.url, name, sessions, a.vms, a.period, a.seconds, a.db)
    res["load_average_1_5_15"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
