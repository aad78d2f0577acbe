"""MPTCP BG/WC on the kernel's MPTCP, at a small scale (100 Mbit/s, a few seconds per run).

The assertions check the mechanisms (strict priority, BG held near its guarantee, WC following A_l, the
policy removing the many-connections advantage) with margins for a loaded 2-core machine; the paper's
done-when thresholds are judged by the full-size runs (``paccp testbed mptcp-*``, README).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from paccp.datapath import core, mptcp
from paccp.datapath import mptcp_testbed as mt

RATE = 100_000_000
PACCP = str(Path(sys.executable).with_name("paccp"))


@pytest.fixture(scope="module")
def bgwc(loaded: None) -> Iterator[None]:
    if mptcp.is_loaded() is False and Path(mptcp.PIN_DIR).exists():
        mptcp.unload()  # an older layout
    fresh = mptcp.load()
    yield
    if fresh:
        mptcp.unload()


def test_htb_priority_is_strict(bgwc: None, tmp_path: Path) -> None:
    s = mt.exp_prio(RATE, 3, tmp_path)
    assert s["link"]["utilisation"] > 0.85, s
    assert s["link_wc_mbps"] < 0.05 * s["link_bg_mbps"], s
    assert s["subflows"] == {"s1": 2, "s2": 2}, s  # each connection has its BG and its WC subflow


def test_bg_near_guarantee_wc_takes_spare(bgwc: None, tmp_path: Path) -> None:
    s = mt.exp_bg(RATE, 5, tmp_path, references=False)
    rows = {r["server"]: r for r in s["servers"]}
    assert all(r["bg_over_guarantee"] > 0.75 for r in rows.values()), rows
    assert all(r["bg_over_guarantee"] < 1.05 for r in rows.values()), rows  # the htb limit holds
    assert sum(r["wc_mbps"] for r in rows.values()) > 5, rows  # 10 Mb/s are spare
    assert s["link"]["utilisation"] > 0.85, s
    assert all(set(c) == {"statement", "paper", "ours", "holds"} for c in s["checks"])


def test_wc_follows_competition_level(bgwc: None, tmp_path: Path) -> None:
    """Table 3 row 3: guarantees 40/20/10, A_l 5:2:1: S1's WC well above S3's."""
    s = mt.exp_table3(RATE, 5, tmp_path, rows=(2,))
    wc = s["rows"][0]["wc_mbps"]
    assert wc[0] > 1.5 * wc[2], s["rows"]


def test_policy_removes_connection_advantage(bgwc: None, tmp_path: Path) -> None:
    """S1 with 3 connections: without the policy its WC share is larger relative to S3 than with it."""
    s = mt.exp_fair(RATE, 5, tmp_path, conns=(3,))
    by = {r["policy"]: r for r in s["runs"]}
    assert by[True]["subflows"]["s1"] == 6, by  # 3 connections x (BG + WC)
    assert by[False]["s1_wc_over_s3"] > by[True]["s1_wc_over_s3"], by


def test_sigterm_leaves_nothing(bgwc: None, tmp_path: Path) -> None:
    before = set(subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split())
    p = subprocess.Popen(
        [PACCP, "testbed", "mptcp-prio", "--duration", "20s", "--out", str(tmp_path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    mine: set[str] = set()
    for _ in range(150):
        time.sleep(0.1)
        mine = set(subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split())
        mine -= before
        if any(n.endswith("-r2") for n in mine):
            break
    time.sleep(1.5)
    assert mine, "the testbed did not start"
    run_id = next(iter(mine)).split("-")[0]
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=30) != 0
    assert run_id not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not (core.cgroup2_root() / f"paccp-{run_id}").exists()
    st = mptcp.status()
    assert st["addresses"] == [] and st["vms"] == [], st
    assert not any(run_id in cg for cg in st["sockops_cgroups"]), st
