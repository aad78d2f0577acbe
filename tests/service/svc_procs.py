"""A controller and agents as real processes on 127.0.0.1 (for kill -9 and controller-down tests)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

ADMIN = "admin-secret-for-process-tests-0123"
AGENT = "agent-enrol-secret-for-process-0123"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(cond: Callable[[], Any], timeout: float = 15.0, what: str = "condition") -> Any:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            v = cond()
        except (httpx.HTTPError, OSError, ValueError, KeyError):
            v = None
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


class Controller:
    """``paccp serve`` on 127.0.0.1:<free port> over an SQLite ledger in ``tmp``."""

    def __init__(self, tmp: Path, port: int | None = None, workers: int = 1) -> None:
        self.tmp = tmp
        self.workers = workers
        self.db = tmp / "ledger.sqlite"
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        (tmp / "admin.token").write_text(ADMIN + "\n")
        (tmp / "agent.token").write_text(AGENT + "\n")
        self.log = tmp / "controller.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.http = httpx.Client(base_url=self.url, timeout=10)

    def start(self) -> Controller:
        cmd = [sys.executable, "-m", "paccp.cli", "serve", "--db", str(self.db), "--bind", "127.0.0.1",
               "--port", str(self.port), "--admin-token-file", str(self.tmp / "admin.token"),
               "--agent-token-file", str(self.tmp / "agent.token"), "--log-level", "debug",
               "--workers", str(self.workers)]  # fmt: skip
        with self.log.open("ab") as fh:
            self.proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT)
        wait_for(lambda: self.http.get("/healthz").status_code == 200, what="the controller")
        return self

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(10)
        self.proc = None

    def h(self, token: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {token}"}

    def admin(self, method: str, path: str, **kw: Any) -> Any:
        r = self.http.request(method, path, headers=self.h(ADMIN), **kw)
        assert r.status_code < 300, r.text
        return r.json()

    def buy(self, token: str, vm: str, cos: str, theta: str, omega: str) -> dict[str, Any]:
        q = self.http.get(
            "/v1/quote", params={"cos": cos, "theta": theta, "omega": omega}, headers=self.h(token)
        )
        body = {"vm": vm, "cos": cos, "theta": theta, "omega": omega, "max_per_hour": q.json()["per_hour"]}
        r = self.http.post("/v1/purchases", json=body, headers=self.h(token))
        assert r.status_code == 201, r.text
        return dict(r.json())


class AgentProc:
    """``paccp agent`` (default ``--applier fake``) for one host, with short periods."""

    def __init__(
        self,
        ctl: Controller,
        host: str,
        state_dir: Path,
        usage_period: str = "300ms",
        applier: str = "fake",
        extra: tuple[str, ...] = (),
        relay: str | None = None,
    ) -> None:
        self.ctl, self.host, self.dir, self.applier, self.extra = ctl, host, state_dir, applier, extra
        self.relay = relay
        self.metrics_port = free_port()
        self.usage_period = usage_period
        self.log = state_dir.parent / f"agent-{host}-{state_dir.name}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> AgentProc:
        cmd = [sys.executable, "-m", "paccp.cli", "agent", "--controller", self.ctl.url, "--host", self.host,
               "--token-file", str(self.ctl.tmp / "agent.token"), "--state-dir", str(self.dir),
               "--applier", self.applier, "--metrics-port", str(self.metrics_port), "--usage-period",
               self.usage_period, "--rate-period", "200ms", "--wait", "2s",
               "--log-level", "debug", *self.extra,
               *(["--relay", self.relay] if self.relay else [])]  # fmt: skip
        with self.log.open("ab") as fh:
            self.proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env={**os.environ})
        return self

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        self.proc = None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(20)
        self.proc = None

    def fake(self) -> dict[str, Any]:
        try:
            return dict(json.loads((self.dir / "fake-datapath.json").read_text()))
        except FileNotFoundError:
            return {}

    def state(self) -> dict[str, Any]:
        return dict(json.loads((self.dir / "agent.json").read_text()))

    def metrics(self) -> str:
        return httpx.get(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5).text
