"""``paccp bench service`` stops every process it started on every exit path (:class:`Children`).

The child here plays ``paccp serve --workers N``: a parent that starts a worker process (as uvicorn's
supervisor does) and never answers ``/healthz``. Each test fails if the bench leaves the parent or its
worker running.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path

import pytest

from paccp.errors import UserError
from paccp.service import bench

#: A "controller" that starts one worker (printing both pids) and then just sleeps, never serving HTTP.
_SLOW_SERVE = (
    "import os, subprocess, sys, time\n"
    "w = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
    "print(os.getpid(), w.pid, flush=True)\n"
    "time.sleep(120)\n"
)


def _free_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _pids(log: Path) -> list[int]:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        text = log.read_text() if log.exists() else ""
        if text.endswith("\n"):
            return [int(x) for x in text.split()]
        time.sleep(0.05)
    raise AssertionError(f"the child never printed its pids: {log.read_text()!r}")


def _gone(pids: list[int]) -> bool:
    deadline = time.monotonic() + 10  # an orphan is reaped by init shortly after it dies
    while time.monotonic() < deadline:
        if not any(_alive(p) for p in pids):
            return True
        time.sleep(0.05)
    return False


def test_a_child_that_does_not_start_in_time_is_stopped_with_its_workers(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    cmd = [sys.executable, "-c", _SLOW_SERVE]
    with bench.Children() as kids, pytest.raises(UserError, match="did not start"):
        kids.start(cmd, log, _free_url(), "controller", timeout_s=3.0)
    pids = _pids(log)
    assert len(pids) == 2
    assert _gone(pids), f"left running: {[p for p in pids if _alive(p)]}"


def test_ctrl_c_while_waiting_for_a_child_stops_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "serve.log"
    real_sleep = time.sleep

    def interrupted_sleep(s: float) -> None:  # Ctrl-C once the child has started its worker
        if log.exists() and log.read_text().endswith("\n"):
            raise KeyboardInterrupt
        real_sleep(s)

    monkeypatch.setattr(bench.time, "sleep", interrupted_sleep)
    with pytest.raises(KeyboardInterrupt), bench.Children() as kids:
        kids.start([sys.executable, "-c", _SLOW_SERVE], log, _free_url(), "controller", timeout_s=60.0)
    monkeypatch.undo()
    pids = _pids(log)
    assert _gone(pids), f"left running: {[p for p in pids if _alive(p)]}"


def test_an_error_after_start_stops_every_child_and_its_group(tmp_path: Path) -> None:
    """A child that started fine (it answers /healthz) is stopped, workers included, when the bench fails."""
    url = _free_url()
    port = url.rsplit(":", 1)[1]
    serve = (
        "import http.server, os, subprocess, sys\n"
        "w = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
        "print(os.getpid(), w.pid, flush=True)\n"
        "class H(http.server.BaseHTTPRequestHandler):\n"
        "    def do_GET(self):\n"
        "        self.send_response(200); self.end_headers()\n"
        "    def log_message(self, *a): pass\n"
        f"http.server.HTTPServer(('127.0.0.1', {port}), H).serve_forever()\n"
    )
    log = tmp_path / "serve.log"
    with pytest.raises(RuntimeError, match="the load failed"), bench.Children(grace_s=2.0) as kids:
        kids.start([sys.executable, "-c", serve], log, url, "controller", timeout_s=30.0)
        raise RuntimeError("the load failed")
    pids = _pids(log)
    assert _gone(pids), f"left running: {[p for p in pids if _alive(p)]}"
    assert os.getpid() not in pids
