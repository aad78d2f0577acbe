"""``paccp relay`` as a process between agents and the controller: usage exact through it, a controller
outage buffered by the agents and delivered once, retries inside a batch, a refused host split off, resent
batches idempotent, and the controller's batched endpoint refusing what is not a host's."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from svc_procs import AGENT, AgentProc, Controller, free_port, wait_for
from test_agent import OUTAGE_S, _check_exact, _setup, _usage

from paccp.pricing.ledger import Ledger


class RelayProc:
    """``paccp relay`` on 127.0.0.1 in front of ``ctl``."""

    def __init__(self, ctl: Controller, retry: str = "8s") -> None:
        self.ctl, self.port, self.retry = ctl, free_port(), retry
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = ctl.tmp / "relay.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> RelayProc:
        cmd = [sys.executable, "-m", "paccp.cli", "relay", "--controller", self.ctl.url, "--token-file",
               str(self.ctl.tmp / "agent.token"), "--port", str(self.port), "--flush", "100ms",
               "--retry", self.retry, "--log-level", "debug"]  # fmt: skip
        with self.log.open("ab") as fh:
            self.proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT)
        wait_for(lambda: httpx.get(f"{self.url}/healthz").status_code == 200, what="the relay")
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
        self.proc = None

    def metric(self, name: str) -> float:
        text = httpx.get(f"{self.url}/metrics", timeout=5).text
        m = re.search(rf"^{name}(?:_total)? ([0-9.e+]+)$", text, re.M)
        return float(m.group(1)) if m else 0.0


def _session(ctl: Controller, host: str) -> str:
    r = ctl.http.post("/v1/agent/register", json={"host": host, "instance_id": "instance-" + host},
                      headers=ctl.h(AGENT))  # fmt: skip
    assert r.status_code == 200, r.text
    return str(r.json()["session"])


def _rec(i: int, vm: str = "vm1", bytes_: int = 1000) -> dict[str, Any]:
    t0 = 1_793_491_200_000_000_000
    return {"record_id": f"r:{vm}:{i}", "source": "datapath", "tenant": "acme", "vm": vm, "cos": "be",
            "theta_bps": 0, "omega": "1", "start_ns": t0 + i * 10**10, "end_ns": t0 + (i + 1) * 10**10,
            "bytes": bytes_}  # fmt: skip


def test_agents_through_relay_exact_and_outage_delivered_once(tmp_path: Path) -> None:
    ctl, tok = _setup(tmp_path)
    ctl.admin("POST", "/v1/admin/vms", json={"name": "vm2", "tenant": "acme", "host": "h2", "cgroup": "/vm2"})
    relay = RelayProc(ctl, retry="1s").start()
    agents = [AgentProc(ctl, h, tmp_path / f"state-{h}", relay=relay.url).start() for h in ("h1", "h2")]
    try:
        ctl.buy(tok, "vm1", "ds", "0", "3")
        wait_for(lambda: agents[0].fake().get("/vm1", {}).get("omega") == "3", what="the purchase applied")
        wait_for(lambda: {r.vm for r in _usage(ctl.db)} == {"vm1", "vm2"}, what="both hosts' usage")
        assert relay.metric("paccp_relay_batches") >= 1
        ctl.stop()
        t = time.monotonic()
        while time.monotonic() - t < max(OUTAGE_S, 2.5):
            time.sleep(0.5)
            assert relay.proc is not None and relay.proc.poll() is None, "the relay died with the controller"
        assert all(len(a.state()["spool"]) >= 2 for a in agents), "the agents should buffer while it is down"
        assert relay.metric("paccp_relay_forward_failures") >= 1
        ctl.start()
        for a in agents:
            wait_for(lambda a=a: a.state()["spool"] == [], timeout=20, what="the buffers delivered")
            a.stop()
        recs = _usage(ctl.db)
        for a, vm in zip(agents, ("/vm1", "/vm2"), strict=True):
            _check_exact([r for r in recs if "/" + r.vm == vm], a.fake()[vm])  # no gap, no double
        assert relay.metric("paccp_relay_records_forwarded") >= len(recs)
        for p in (relay.log, ctl.log):
            assert AGENT not in p.read_text(errors="replace"), f"the enrolment token appears in {p.name}"
    finally:
        for a in agents:
            a.stop()
        relay.stop()
        ctl.stop()


def test_relay_retries_a_batch_until_the_controller_is_back(tmp_path: Path) -> None:
    ctl, _tok = _setup(tmp_path)
    s1 = _session(ctl, "h1")
    relay = RelayProc(ctl, retry="20s").start()
    try:
        ctl.stop()
        out: dict[str, Any] = {}

        def send() -> None:
            out["r"] = httpx.post(f"{relay.url}/v1/agent/report", json={"records": [_rec(0), _rec(1)]},
                                  headers=ctl.h(s1), timeout=60)  # fmt: skip

        th = threading.Thread(target=send)
        th.start()
        wait_for(lambda: relay.metric("paccp_relay_forward_failures") >= 2, what="the relay retrying")
        assert "r" not in out, "a report must not be acknowledged before it is in the ledger"
        ctl.start()
        th.join(30)
        assert out["r"].status_code == 200, out["r"].text
        assert out["r"].json()["records"] == 2
        assert len(_usage(ctl.db)) == 2
    finally:
        relay.stop()
        ctl.stop()


def test_refused_host_is_split_off_and_resends_are_idempotent(tmp_path: Path) -> None:
    ctl, _tok = _setup(tmp_path)
    ctl.admin("POST", "/v1/admin/vms", json={"name": "vm2", "tenant": "acme", "host": "h2", "cgroup": "/vm2"})
    s1, s2 = _session(ctl, "h1"), _session(ctl, "h2")
    relay = RelayProc(ctl).start()
    try:
        res: dict[str, httpx.Response] = {}

        def send(key: str, session: str, recs: list[dict[str, Any]]) -> None:
            res[key] = httpx.post(f"{relay.url}/v1/agent/report", json={"records": recs},
                                  headers=ctl.h(session), timeout=30)  # fmt: skip

        jobs = [("good", s1, [_rec(0), _rec(1)]), ("stolen", s2, [_rec(5, vm="vm1")]),
                ("bad", "nope", [_rec(7)]), ("h2", s2, [_rec(0, vm="vm2")])]  # fmt: skip
        threads = [threading.Thread(target=send, args=j) for j in jobs]
        for th in threads:
            th.start()
        for th in threads:
            th.join(30)
        assert res["good"].status_code == 200 and res["h2"].status_code == 200, (
            res["good"].text,
            res["h2"].text,
        )
        assert res["stolen"].status_code == 403 and "is not on h2" in res["stolen"].json()["error"]
        assert res["bad"].status_code == 401
        assert relay.metric("paccp_relay_reports_refused") == 2
        ids = sorted(r.record_id for r in _usage(ctl.db))
        assert ids == ["r:vm1:0", "r:vm1:1", "r:vm2:0"]
        # the same report again (an agent that missed the answer): nothing changes
        send("again", s1, [_rec(0), _rec(1)])
        assert res["again"].status_code == 200 and res["again"].json()["batch"]["new"] == 0
        # the same id with other content is refused whole, and nothing of that batch is written
        send("changed", s1, [_rec(2), _rec(1, bytes_=999)])
        assert res["changed"].status_code == 400 and "different content" in res["changed"].json()["error"]
        assert len(_usage(ctl.db)) == 3
        led = Ledger(str(ctl.db), create=False)
        assert led.count_usage() == 3
        led.close()
    finally:
        relay.stop()
        ctl.stop()


def test_batch_endpoint_refuses_without_the_enrolment_token_or_with_bad_bodies(tmp_path: Path) -> None:
    ctl, _tok = _setup(tmp_path)
    s1 = _session(ctl, "h1")
    try:
        body = {"hosts": [{"session": s1, "records": 1}], "records": json.dumps(_rec(0)) + "\n"}
        r = ctl.http.post("/v1/relay/report", json=body, headers=ctl.h(s1))
        assert r.status_code == 403
        for bad in ({"hosts": []}, {"hosts": [{"session": s1}], "records": 5}, {"hosts": [{"session": s1}],
                    "extra": 1}, {"hosts": [{"session": s1, "rates": {"vm1": -1}}]},
                    {"hosts": [{"session": s1, "records": True}], "records": json.dumps(_rec(0)) + "\n"},
                    {"hosts": [{"session": s1, "records": 2}], "records": json.dumps(_rec(0)) + "\n"},
                    {"hosts": [{"session": s1}], "records": json.dumps(_rec(0)) + "\n"},
                    {"hosts": [{"session": s1, "records": 1}]}):  # fmt: skip
            r = ctl.http.post("/v1/relay/report", json=bad, headers=ctl.h(AGENT))
            assert r.status_code == 422, (bad, r.text)
        r = ctl.http.post("/v1/relay/report", json={"hosts": [{"session": s1, "records": 1}],
                          "records": "{\"x\": 1}\n"}, headers=ctl.h(AGENT))  # fmt: skip
        assert r.status_code == 422 and r.json()["error"].startswith("records line 1")
        r = ctl.http.post("/v1/relay/report", json={"hosts": [{"session": s1, "rates": {"vm9": 5}}]},
                          headers=ctl.h(AGENT))  # fmt: skip
        assert r.status_code == 403
        r = ctl.http.post("/v1/relay/report", json=body, headers=ctl.h(AGENT))
        assert r.status_code == 200 and r.json() == {"hosts": 1, "new": 1, "unchanged": 0}
        r = ctl.http.post("/v1/relay/report", json=body, headers=ctl.h(AGENT))
        assert r.json() == {"hosts": 1, "new": 0, "unchanged": 1}
    finally:
        ctl.stop()


def test_a_record_counts_only_for_the_host_that_reported_it(tmp_path: Path) -> None:
    """Two hosts in one batch: h2's line for h1's VM is refused (403), whole, even though h1 is in the batch;
    the same lines attributed to their own hosts go in. (Checked against the batch's hosts only, a host
    could report another's VM whenever the relay put them in one batch: the relay test caught it.)"""
    ctl, _tok = _setup(tmp_path)
    ctl.admin("POST", "/v1/admin/vms", json={"name": "vm2", "tenant": "acme", "host": "h2", "cgroup": "/vm2"})
    s1, s2 = _session(ctl, "h1"), _session(ctl, "h2")
    try:
        lines = json.dumps(_rec(0)) + "\n" + json.dumps(_rec(5, vm="vm1")) + "\n"
        stolen = {"hosts": [{"session": s1, "records": 1}, {"session": s2, "records": 1}], "records": lines}
        r = ctl.http.post("/v1/relay/report", json=stolen, headers=ctl.h(AGENT))
        assert r.status_code == 403 and r.json()["error"] == "records line 2: VM 'vm1' of 'acme' is not on h2"
        assert _usage(ctl.db) == []
        own = {"hosts": [{"session": s1, "records": 2}, {"session": s2, "records": 0}], "records": lines}
        r = ctl.http.post("/v1/relay/report", json=own, headers=ctl.h(AGENT))
        assert r.status_code == 200 and r.json()["new"] == 2, r.text
    finally:
        ctl.stop()
