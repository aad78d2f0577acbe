"""MPTCP BG/WC on the kernel's MPTCP, at a small scale (100 Mbit/s, a few seconds per run).

The assertions check the mechanisms (strict priority, BG held near its guarantee, WC following A_l, the
policy removing the many-connections advantage) with margins for a loaded 2-core machine; the paper's
done-when thresholds are judged by the full-size runs (``paccp testbed mptcp-*``, docs/howto/datapath.md).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from paccp.datapath.core import env, sim_predict
from paccp.datapath.mptcp import control as mptcp
from paccp.datapath.mptcp import experiments as mx
from paccp.datapath.mptcp import testbed as mt

SIM = sim_predict.QUICK_S
RATE = 100_000_000
PACCP = str(Path(sys.executable).with_name("paccp"))


@pytest.fixture(autouse=True)
def short_warmup(monkeypatch: pytest.MonkeyPatch) -> None:
    """Small scale: 1 s of warm-up before each measured window."""
    from paccp.datapath.softbw import short as softbw_short
    from paccp.datapath.softbw import testbed as softbw_testbed

    monkeypatch.setattr(mt, "WARMUP_S", 1.0)
    monkeypatch.setattr(softbw_testbed, "WARMUP_S", 1.0)
    monkeypatch.setattr(softbw_short, "WARMUP_S", 1.0)


@pytest.fixture(scope="module")
def bgwc(loaded: None) -> Iterator[None]:
    if mptcp.is_loaded() is False and Path(mptcp.PIN_DIR).exists():
        mptcp.unload()  # an older layout
    fresh = mptcp.load()
    yield
    if fresh:
        mptcp.unload()


def test_htb_priority_is_strict(bgwc: None, tmp_path: Path) -> None:
    s = mx.exp_prio(RATE, 2, tmp_path)
    assert s["link"]["utilisation"] > 0.85, s
    assert s["link_wc_mbps"] < 0.05 * s["link_bg_mbps"], s
    assert s["subflows"] == {"s1": 4, "s2": 4, "s3": 2}, s  # BG-only senders; s3 has its WC subflow


def test_bg_near_guarantee_wc_takes_spare(bgwc: None, tmp_path: Path) -> None:
    s = mx.exp_bg(RATE, 4, tmp_path, references=False, sim_s=SIM)
    rows = {r["server"]: r for r in s["servers"]}
    # goodput: at most 1448/1514 = 0.956 of the wire guarantee; with the large send buffers BG is at
    # 0.93-0.94 (docs/howto/datapath.md); 0.85 leaves room for a loaded machine
    assert all(r["bg_over_guarantee"] > 0.85 for r in rows.values()), rows
    assert all(r["bg_over_guarantee"] < 1.05 for r in rows.values()), rows  # the htb limit holds
    assert sum(r["wc_mbps"] for r in rows.values()) > 5, rows  # 10 Mb/s are spare
    assert s["link"]["utilisation"] > 0.85, s
    assert all(set(c) == {"statement", "paper", "ours", "holds"} for c in s["checks"])
    # the simulator column: the same four servers, BG near the scaled guarantees
    assert all(r["simulator"] != "-" for r in s["compare"]), s["compare"]
    sim = s["simulator_mbps"]
    assert all(abs(sim[r["server"]]["bg"] / r["guarantee_mbps"] - 0.95) < 0.1 for r in s["servers"]), sim
    assert all(set(v) == set(mt.COUNTERS) for v in s["kernel_counters"].values()), s["kernel_counters"]
    # usage records in PACCP's schema: BG (mrg at the guarantee) and WC (be) per server
    from paccp.common.usage import read_usage

    recs = list(read_usage(tmp_path / "usage.jsonl"))
    assert len(recs) == 8 == s["usage_records"], recs
    bg = {r.vm: r for r in recs if r.flow_id and r.flow_id.endswith("/bg")}
    assert all(bg[r["server"]].theta_bps == round(r["guarantee_mbps"] * 1e6) for r in s["servers"]), bg
    assert all(b.bytes * 8 / ((b.end_ns - b.start_ns) / 1e9) > 0.8 * b.theta_bps for b in bg.values()), bg


def test_wc_follows_competition_level(bgwc: None, tmp_path: Path) -> None:
    """Table 3 row 3: guarantees 40/20/10, A_l 5:2:1 applied per VM (K = 1 each), WC carried by all."""
    s = mx.exp_table3(RATE, 4, tmp_path, rows=(2,), sim_s=SIM)
    row = s["rows"][0]
    assert row["wc_policy"] == {f"s{i}": {"a_l": a, "k_live": 1} for i, a in ((1, 5), (2, 2), (3, 1))}, row
    # every VM's WC subflow carried data and A_l 5 takes more than A_l 1 (the 20 % proportionality of
    # the done-when is judged by the full-size mptcp-table3 run, docs/howto/datapath.md)
    assert all(w > 0 for w in row["wc_mbps"]), s["rows"]
    assert row["wc_mbps"][0] > row["wc_mbps"][2], s["rows"]
    assert row["simulator_mbps"] is not None and set(row["simulator_mbps"]) == {"s1", "s2", "s3"}, row
    assert len(s["checks"]) == 1 and "proportional to A_l 5:2:1" in s["checks"][0]["statement"], s["checks"]


def test_fair_policy_counts_wc_subflows(bgwc: None, tmp_path: Path) -> None:
    """S1 with 3 connections: the CC counts K = 3 live WC subflows for S1's VM (alpha_w = (1/3)^2), 1 for
    S3 and S4; without the policy the same VMs run alpha_w = 1. (The resulting WC shares are reported by
    `paccp testbed mptcp-fair`; at this scale they are dominated by WC timeouts, see
    docs/howto/datapath.md.)"""
    s = mx.exp_fair(RATE, 3, tmp_path, conns=(3,), sim_s=None)
    by = {r["policy"]: r for r in s["runs"]}
    assert by[True]["subflows"]["s1"] == 6, by  # 3 connections x (BG + WC)
    on = by[True]["wc_policy"]
    assert {k: (v["k_live"], v["policy"]) for k, v in on.items()} == {
        "s1": (3, True), "s3": (1, True), "s4": (1, True)
    }, on  # fmt: skip
    assert all(not v["policy"] for v in by[False]["wc_policy"].values()), by[False]
    assert all(w > 0 for r in s["runs"] for w in r["wc_mbps"].values()), s["runs"]


def _start_and_term(cmd: list[str], marker: str) -> str:
    """Start ``paccp testbed ...``, wait for a namespace ending in ``marker``, SIGTERM it; its run id."""
    before = set(subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split())
    p = subprocess.Popen([PACCP, "testbed", *cmd], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    mine: set[str] = set()
    for _ in range(150):
        time.sleep(0.1)
        mine = set(subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split())
        mine -= before
        if any(n.endswith(marker) for n in mine):
            break
    time.sleep(1.5)
    ours = [n for n in mine if n.endswith(marker)]  # not another session's testbed started meanwhile
    assert ours, "the testbed did not start"
    run_id = ours[0].split("-")[0]
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=30) != 0
    assert run_id not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not (env.cgroup2_root() / f"paccp-{run_id}").exists()
    return run_id


def test_sigterm_leaves_nothing(bgwc: None, tmp_path: Path) -> None:
    run_id = _start_and_term(["mptcp-prio", "--duration", "20s", "--out", str(tmp_path)], "-r2")
    st = mptcp.status()
    assert st["addresses"] == [] and st["vms"] == [], st
    assert not any(run_id in cg for cg in st["sockops_cgroups"]), st


@pytest.fixture(scope="module")
def softbw_loaded(loaded: None) -> Iterator[None]:
    from paccp.datapath.softbw import control as softbw

    fresh = softbw.load()
    yield
    if fresh:
        softbw.unload()


def test_softbw_over_committed_share(softbw_loaded: None, tmp_path: Path) -> None:
    """3 VMs x 0.45 of the port with 1, 4 and 8 flows: SoftBW shares evenly, one FIFO does not.

    6 s windows: the enqueue-side marking has lossy episodes (docs/howto/datapath.md) in which one VM's
    connections back off; over 3 s windows on a busy machine max/min reached 1.20-1.33 (CI failed at 1.329),
    over 6 s it stayed at or below 1.06 in 8 runs."""
    from paccp.datapath.softbw import control as softbw
    from paccp.datapath.softbw import testbed as softbw_testbed

    s = softbw_testbed.exp_share(RATE, 6, tmp_path, cases=((1, 4, 8),))
    by = {r["scheduler"]: r for r in s["runs"]}
    sb, be = by["softbw"], by["best effort (one FIFO)"]
    assert sb["link"]["utilisation"] > 0.85, sb
    assert sb["max_over_min_fulfilment"] < 1.25, sb
    assert be["max_over_min_fulfilment"] > 2 * sb["max_over_min_fulfilment"] - 1, (be, sb)
    assert softbw.status()["vms"] == []  # the run removed its VMs from the map
    from paccp.common.usage import read_usage

    assert [r.cos for r in read_usage(tmp_path / "usage.jsonl")] == ["mrg"] * 3 + ["be"] * 3
    assert not list(Path("/tmp").glob("*-softbw-counts.json*"))  # nor left the receiver's counts file


def test_softbw_short_flows(softbw_loaded: None, tmp_path: Path) -> None:
    """VM 1's short flows next to two bulk VMs: SoftBW serves them first; the 50 ms rate limiter holds
    an idle VM at its floor until the next update, so its short flows take longer."""
    from paccp.datapath.softbw import control as softbw
    from paccp.datapath.softbw import short as softbw_short

    s = softbw_short.exp_short(RATE, 2, tmp_path, size=50_000, sim_s=None)
    fct = s["fct"]
    # FIFO's short flows wait seconds behind the bulk VMs, so only one or two may finish in the window.
    assert fct["softbw"]["n"] >= 3 and fct["ratelimit"]["n"] >= 3 and fct["fifo"]["n"] >= 1, fct
    assert fct["fifo"]["mean_ms"] > fct["softbw"]["mean_ms"], fct
    assert fct["softbw"]["mean_ms"] * 1.5 < fct["ratelimit"]["mean_ms"], fct
    assert 0 < s["runs"]["ratelimit"]["limiter_interval_ms"] < 200, s["runs"]["ratelimit"]  # it did update
    assert all(s["runs"][k]["link"]["utilisation"] > 0.85 for k in ("softbw", "fifo")), s["runs"]
    assert softbw.status()["vms"] == []
    assert not list(Path("/tmp").glob("*-softbw-counts.json*"))


def test_softbw_overhead_measured(softbw_loaded: None, tmp_path: Path) -> None:
    """The program's run time per packet comes from the kernel's BPF statistics, which are restored."""
    from paccp.datapath.softbw import short as softbw_short

    before = Path("/proc/sys/kernel/bpf_stats_enabled").read_text()
    s = softbw_short.exp_overhead(tmp_path, bulk_s=1.5, rounds=1, pings=300)
    assert Path("/proc/sys/kernel/bpf_stats_enabled").read_text() == before
    assert s["bulk"]["packets"] > 1000, s
    assert 10 < s["program_ns_per_packet"] < 100_000, s
    assert 10 < s["program_ns_per_packet_idle_pingpong"] < 100_000, s
    assert len(s["idle_rtt_us"]["with"]) == 1 and len(s["idle_rtt_us"]["without"]) == 1, s


def test_softbw_short_sigterm_leaves_nothing(softbw_loaded: None, tmp_path: Path) -> None:
    from paccp.datapath.softbw import control as softbw

    _start_and_term(["softbw-short", "--duration", "20s", "--no-simulate", "--out", str(tmp_path)], "-v3")
    assert softbw.status()["vms"] == []
    assert not list(Path("/tmp").glob("*-softbw-counts.json*"))
