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
import json
import os
import secrets
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

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


def _paced(rate: float, seconds: float, fn: Any, workers: int) -> list[float]:
    """Call ``fn()`` ``rate`` times a second for ``seconds`` (open loop, bounded by ``workers``)."""
    lat: list[float] = []
    lock = threading.Lock()

    def one() -> None:
        t = time.perf_counter()
        fn()
        with lock:
            lat.append(time.perf_counter() - t)

    n = int(rate * seconds)
    start = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        for k in range(n):
            delay = start + k / rate - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            pool.submit(one)
    return lat


def api_load(url: str, admin: str, rps: float, seconds: float) -> dict[str, Any]:
    _name, tok, _hosts = _setup(url, admin, 1, 4)
    client = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {tok}"}, timeout=30,
                          limits=httpx.Limits(max_connections=64))  # fmt: skip
    errors = [0]
    flip = [0]

    def call() -> None:
        flip[0] += 1
        if flip[0] % 2:
            r = client.get("/v1/vms")
        else:
            r = client.get("/v1/quote", params={"cos": "mrg", "theta": "400Mbit", "omega": "2"})
        if r.status_code != 200:
            errors[0] += 1

    t = time.perf_counter()
    lat = sorted(_paced(rps, seconds, call, 64))
    wall = time.perf_counter() - t
    q = statistics.quantiles(lat, n=100)
    return {"offered_rps": rps, "achieved_rps": round(len(lat) / wall, 1), "requests": len(lat),
            "errors": errors[0], "p50_ms": round(q[49] * 1e3, 1), "p99_ms": round(q[98] * 1e3, 1),
            "max_ms": round(lat[-1] * 1e3, 1)}  # fmt: skip


def usage_load(
    url: str,
    agent_token: str,
    admin: str,
    hosts: int,
    vms: int,
    period: float,
    seconds: float,
    db: str | None,
) -> dict[str, Any]:
    name, _tok, host_names = _setup(url, admin, hosts, vms)
    sessions = {}
    with httpx.Client(base_url=url, timeout=30) as c:
        for hn in host_names:
            r = c.post(
                "/v1/agent/register",
                json={"host": hn, "instance_id": "load" + secrets.token_hex(6)},
                headers={"Authorization": f"Bearer {agent_token}"},
            )
            r.raise_for_status()
            sessions[hn] = r.json()["session"]
    client = httpx.Client(base_url=url, timeout=60, limits=httpx.Limits(max_connections=64))
    t0 = time.time_ns()
    tick = [0]
    acked = [0]
    failed = [0]
    lock = threading.Lock()
    counter = [0]

    def report() -> None:
        with lock:
            k = counter[0]
            counter[0] += 1
        hn = host_names[k % hosts]
        slot = k // hosts
        start = t0 + slot * int(period * 1e9)
        recs = [
            {"record_id": f"load:{hn}:{j}:{start}", "source": "datapath", "tenant": name, "vm": f"{hn}-v{j}",
             "cos": "be", "theta_bps": 0, "omega": "1", "start_ns": start,
             "end_ns": start + int(period * 1e9), "bytes": 1000}
            for j in range(vms)
        ]  # fmt: skip
        r = client.post("/v1/agent/report", json={"records": recs},
                        headers={"Authorization": f"Bearer {sessions[hn]}"})  # fmt: skip
        with lock:
            if r.status_code == 200:
                acked[0] += len(recs)
            else:
                failed[0] += 1
        tick[0] += 1

    rate = hosts / period  # reports per second
    t = time.perf_counter()
    lat = _paced(rate, seconds, report, 32)
    wall = time.perf_counter() - t
    out: dict[str, Any] = {
        "offered_records_per_s": round(hosts * vms / period, 1),
        "acknowledged_records_per_s": round(acked[0] / wall, 1),
        "acknowledged": acked[0],
        "failed_reports": failed[0],
        "report_p99_ms": round(statistics.quantiles(sorted(lat), n=100)[98] * 1e3, 1)
        if len(lat) > 2
        else None,
    }
    if db:
        from paccp.pricing.ledger import Ledger

        led = Ledger(db, create=False)
        recs = led.usage(name, 0, 2**62)
        out["in_ledger"] = len(recs)
        out["distinct_ids"] = len({r.record_id for r in recs})
    return out


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
        res = api_load(a.url, admin, a.rps, a.seconds)
    else:
        if not a.agent_token_file:
            ap.error("usage load needs --agent-token-file")
        agent = Path(a.agent_token_file).read_text().strip()
        res = usage_load(a.url, agent, admin, a.hosts, a.vms, a.period, a.seconds, a.db)
    res["load_average_1_5_15"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
