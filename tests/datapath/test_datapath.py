"""The kernel datapath end to end: load/unload, parameters, VBP, run-time changes, metering, permissions.

Dumbbell runs are short (a few seconds at 100 Mbit/s) and the assertions leave room for that: they check
the ordering the law must produce (DS > BE, MRG near theta), not paper numbers.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from paccp.datapath.core import env
from paccp.datapath.paccp import fig7, lifecycle, maps, metering, rules, sockets, testbed
from paccp.datapath.paccp.testbed import FlowSpec
from paccp.datapath.paccp.vms import vm_set

PACCP = str(Path(sys.executable).with_name("paccp"))
RATE = 100_000_000


def _cli(*args: str, user: str | None = None) -> subprocess.CompletedProcess[str]:
    cmd = [PACCP, *args]
    if user:
        cmd = ["setpriv", f"--reuid={user}", "--regid=nogroup", "--clear-groups", *cmd]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def test_load_unload_cycle(loaded: None) -> None:
    assert lifecycle.is_loaded()
    assert lifecycle.unload()
    avail = Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split()
    assert "paccp" not in avail and not Path(maps.PIN_DIR).exists()
    assert lifecycle.load()
    assert lifecycle.is_loaded()
    st = lifecycle.status()
    assert st["loaded"] and st["rcos"] == 3.0
    assert oct(Path(maps.PIN_DIR, "paccp_vm_cfg").stat().st_mode & 0o777) == "0o600"


def test_ds_gets_more_than_be(loaded: None, tmp_path: Path) -> None:
    # 8 s with the first 2 s left out (as the MRG test below): over 6 s with 1 s omitted DS/BE measured 1.286
    # once in a quiet full run (it passed alone twice right after); a longer window, the bound unchanged.
    res = testbed.run_dumbbell([FlowSpec("BE", 0, 1.0), FlowSpec("DS", 0, 2.0)], RATE, 8, tmp_path, omit_s=2)
    be, ds = (f["measured_bps"] for f in res["flows"])
    assert ds / be > 1.3, res
    assert res["utilisation"] > 0.85, res


def test_mrg_holds_theta_against_three_be(loaded: None, tmp_path: Path) -> None:
    specs = [FlowSpec("BE", 0, 1.0)] * 3 + [FlowSpec("MRG", 40_000_000, 1.0)]
    # 8 s with the first 2 s left out: over a 3 s window (4 s run, 1 s omitted) MRG measured 35.8-54.5 Mbit/s
    # in 20 quiet runs, and 35.2 once in CI, whenever one BE flow caught a burst of the others' losses and ran
    # at 30 Mbit/s for a while; 10 runs measured over 6 s gave 37.3-44.4. The bound below is unchanged.
    res = testbed.run_dumbbell(specs, RATE, 8, tmp_path, omit_s=2)
    mrg = res["flows"][3]["measured_bps"]
    be = [f["measured_bps"] for f in res["flows"][:3]]
    # fair share without theta would be 25 Mbit/s; the guarantee is 40
    assert mrg >= 0.9 * 40_000_000, res
    assert mrg > sum(be) / len(be), res


def _flows_by_cgroup(rows: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for r in rows:
        if r["cgroup"] and r["rate_bps"] > 1_000_000:
            out.setdefault(r["cgroup"].rsplit("/", 1)[-1], []).append(r)
    return out


def test_vbp_split_and_runtime_upgrade(loaded: None, tmp_path: Path) -> None:
    """VM0 (0, 2) with two flows vs VM1 BE with one; then VM1 is upgraded to omega 4 while running."""
    with testbed.testbed() as net:
        net.add_node("L", router=True)
        net.add_node("R", router=True)
        lif, _ = net.link("L", "10.200.0.1/30", "R", "10.200.0.2/30")
        net.shape("L", lif, RATE, 64_000)
        net.add_node("d")
        net.link("d", "10.202.0.2/24", "R", "10.202.0.1/24")
        net.ip("d", "route", "add", "default", "via", "10.202.0.1")
        net.ip("L", "route", "add", "10.202.0.0/16", "via", "10.200.0.2")
        cgs = []
        for i in (0, 1):
            net.add_node(f"s{i}")
            net.link(f"s{i}", f"10.201.{i}.2/24", "L", f"10.201.{i}.1/24")
            net.ip(f"s{i}", "route", "add", "default", "via", f"10.201.{i}.1")
            cgs.append(net.cgroup(f"vm{i}"))
        net.ip("R", "route", "add", "10.201.0.0/16", "via", "10.200.0.1")
        vm_set(str(cgs[0]), 0, 2.0)
        vm_set(str(cgs[1]), 0, 1.0)
        for port in (5301, 5302):
            net.spawn("d", ["iperf3", "-s", "-p", str(port)])
        time.sleep(0.5)
        net.spawn("s0", ["iperf3", "-c", "10.202.0.2", "-p", "5301", "-t", "18", "-P", "2"], cgroup=cgs[0])
        net.spawn("s1", ["iperf3", "-c", "10.202.0.2", "-p", "5302", "-t", "18"], cgroup=cgs[1])
        time.sleep(3)
        before = _flows_by_cgroup(metering.flows_table(sample_s=2.0))
        # VBP: the VM's omega 2 is split over its two data flows (iperf3's control connection is idle)
        assert len(before["vm0"]) == 2 and len(before["vm1"]) == 1, before
        assert all(r["omega"] == 1.0 and r["source"] == "vm" for r in before["vm0"]), before
        vms = {v.cgroup.rsplit("/", 1)[-1]: v for v in metering.status_vms()}
        assert vms["vm0"].active_flows == 2 and vms["vm1"].active_flows == 1
        vm0 = sum(r["rate_bps"] for r in before["vm0"])
        vm1 = before["vm1"][0]["rate_bps"]
        assert vm0 / vm1 > 1.3, (vm0, vm1)
        vm_set(str(cgs[1]), 0, 4.0)  # run-time upgrade of a live flow
        time.sleep(3)
        # 6 s, not 2: a 2 s window now and then catches a transient in which VM0's flows take VM1's share
        # (probe: 2 of 24 windows at 0.52 and 1.08, the others 2.0-2.9). Most such windows came with a
        # kernel ssthresh of 0x822034e5 (a stale stack word) and cwnd 10^8 (docs/howto/datapath.md;
        # bpf/paccp.bpf.c repairs it on the next ACK); one 4 s window at 1.00 had no such cwnd
        after = _flows_by_cgroup(metering.flows_table(sample_s=6.0))
        assert after["vm1"][0]["omega"] == 4.0, after
        vm0a = sum(r["rate_bps"] for r in after["vm0"])
        vm1a = after["vm1"][0]["rate_bps"]
        assert vm1a / vm0a > 1.3, (vm0a, vm1a)
        assert vm1a > 1.5 * vm1, (vm1, vm1a)


CHILD = textwrap.dedent(
    """
    import socket, sys, threading, time
    from paccp.datapath.core import netns
    from paccp.datapath.paccp import rules, sockets
    netns.setns_net(sys.argv[1])
    srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(1)
    port = srv.getsockname()[1]
    rules.rule_set(port, "10Mbit", 1.5, host_wide=True)   # this process is in no VM cgroup
    def sink():
        c, _ = srv.accept()
        while c.recv(1 << 16):
            pass
    threading.Thread(target=sink, daemon=True).start()
    s = socket.socket()
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, b"paccp")
    s.connect(("127.0.0.1", port))
    s.sendall(b"x" * 2_000_000)
    print(port, s.fileno(), flush=True)
    sys.stdin.readline()              # parent checks the rule, then sets fd via pidfd_getfd
    s.sendall(b"x" * 2_000_000)
    print("sent", flush=True)
    sys.stdin.readline()
    sockets.set_flow(s, theta_bps="0", omega=2.5)   # the Python API on an own socket
    s.sendall(b"x" * 2_000_000)
    print("sent", flush=True)
    sys.stdin.readline()
    rules.rule_clear(port, host_wide=True)
    """
)


def _flow_on_port(port: int) -> dict:
    rows = [r for r in metering.flows_table(sample_s=0) if r["dst"].endswith(f":{port}")]
    assert len(rows) == 1, rows
    return rows[0]


def test_per_socket_rule_pidfd_and_api(loaded: None) -> None:
    with testbed.testbed() as net:
        net.add_node("h")
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, net.ns("h")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert child.stdout is not None and child.stdin is not None
            port_s, fd_s = child.stdout.readline().split()
            port, fd = int(port_s), int(fd_s)
            r = _flow_on_port(port)
            assert (r["source"], r["theta_bps"], r["omega"]) == ("rule", 10_000_000, 1.5)
            sockets.set_flow_pid(child.pid, fd, "20Mbit", 3.0)
            child.stdin.write("\n")
            child.stdin.flush()
            assert child.stdout.readline().strip() == "sent"
            r = _flow_on_port(port)
            assert (r["source"], r["theta_bps"], r["omega"]) == ("socket", 20_000_000, 3.0)
            child.stdin.write("\n")
            child.stdin.flush()
            assert child.stdout.readline().strip() == "sent"
            r = _flow_on_port(port)
            assert (r["source"], r["theta_bps"], r["omega"]) == ("socket", 0, 2.5)
            child.stdin.write("\n")
            child.stdin.flush()
            assert child.wait(timeout=10) == 0
        finally:
            if child.poll() is None:
                child.kill()


def test_usage_records_from_metering(loaded: None, tmp_path: Path) -> None:
    from paccp.common.usage import read_usage

    testbed.run_dumbbell([FlowSpec("MRG", 30_000_000, 2.0)], RATE, 2, tmp_path)
    out = tmp_path / "usage.jsonl"
    res = _cli("datapath", "usage", "--tenant", "acme", "--out", str(out))
    assert res.returncode == 0, res.stderr
    recs = list(read_usage(out))
    mine = [r for r in recs if r.cos == "mrg" and r.theta_bps == 30_000_000 and r.flow_id is not None]
    assert mine and sum(r.bytes for r in mine) > 10_000_000, recs[-5:]
    # this run's VM (the maps also hold earlier runs): its VM-level slice, closed when the testbed cleared
    # the VM's pair, carries the bytes of its flows
    vm = max(mine, key=lambda r: r.start_ns).vm
    mine = [r for r in mine if r.vm == vm]
    vm_recs = [r for r in recs if r.flow_id is None and r.vm == vm and r.cos == "mrg"]
    assert len(vm_recs) == 1 and vm_recs[0].bytes >= 0.95 * sum(r.bytes for r in mine), (vm_recs, mine)
    assert all(r.source == "datapath" for r in recs)
    # the run's VMs were registered without a tenant: --tenant names it; flows in no VM are "(host)"
    assert all(r.tenant == "acme" for r in recs if r.vm == vm)
    assert all(r.tenant == metering.HOST_TENANT for r in recs if r.vm.startswith("outside-vm"))
    assert len({r.record_id for r in recs}) == len(recs)
    again = {r.record_id: r for r in metering.usage_records("acme")}
    assert all(again[r.record_id] == r for r in recs)  # stable ids and content across exports


@pytest.mark.parametrize(
    "args",
    [
        ["datapath", "vm", "set", "--cgroup", "/", "--omega", "0"],
        ["datapath", "vm", "set", "--cgroup", "/", "--omega", "-1"],
        ["datapath", "vm", "set", "--cgroup", "/", "--theta", "-5Mbit", "--omega", "2"],
        ["datapath", "vm", "set", "--cgroup", "/", "--theta", "fast", "--omega", "2"],
        ["datapath", "vm", "set", "--cgroup", "/no-such-paccp-cgroup", "--omega", "2"],
        ["datapath", "vm", "set", "--omega", "2"],
        ["datapath", "flow", "set", "--omega", "2"],
        ["datapath", "flow", "set", "--port", "70000", "--omega", "2"],
        ["testbed", "dumbbell", "--flows", "xx", "--out", "/tmp/never"],
    ],
)
def test_invalid_input_exits_2(loaded: None, args: list[str]) -> None:
    res = _cli(*args)
    assert res.returncode == 2, (res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("paccp: error:"), res.stderr


def test_non_root_cannot_change_parameters(loaded: None) -> None:
    res = _cli("datapath", "flow", "set", "--port", "5999", "--omega", "2", "--host-wide", user="nobody")
    assert res.returncode == 2 and "root" in res.stderr, res.stderr
    # and not by going around the CLI: the pinned maps are root-only
    path = f"{maps.PIN_DIR}/paccp_rules"
    code = (
        "from paccp.datapath.core import bpfsys\n"
        f"try:\n    bpfsys.obj_get({path!r})\nexcept OSError:\n    print('denied')\n"
    )
    res2 = subprocess.run(
        ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", sys.executable, "-c", code],
        capture_output=True,
        text=True,
    )
    assert res2.stdout.startswith("denied"), (res2.stdout, res2.stderr)
    with maps.Maps() as m:
        assert all(r["port"] != 5999 for r in rules.list_rules(m))


def test_status_json_cli(loaded: None) -> None:
    res = _cli("datapath", "status", "--json")
    assert res.returncode == 0
    assert json.loads(res.stdout)["loaded"] is True


def test_prometheus_exporter_once(loaded: None) -> None:
    """The exporter's text output carries the per-CoS families (values come from the live maps)."""
    res = _cli("datapath", "export", "--once", "--interval", "0.2")
    assert res.returncode == 0, res.stderr
    for fam in ("paccp_cos_bytes_acked_total", "paccp_cos_rate_bps", "paccp_flows_active"):
        assert fam in res.stdout, res.stdout
    assert 'paccp_cos_bytes_acked_total{cos="mrg"}' in res.stdout


def test_sigterm_removes_everything(loaded: None, tmp_path: Path) -> None:
    """A testbed interrupted mid-run (SIGTERM) removes its namespaces, cgroups and iperf3 processes."""
    import signal

    before = set(subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split())
    cmd = [PACCP, "testbed", "dumbbell", "--flows", "be,ds", "--rate", "50Mbit", "--duration", "30s"]
    p = subprocess.Popen([*cmd, "--out", str(tmp_path)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    mine: set[str] = set()
    for _ in range(100):  # wait until the run has built its namespaces
        time.sleep(0.1)
        mine = (
            set(subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split())
            - before
        )
        if len([n for n in mine if n.endswith("-d1")]) == 1:
            break
    time.sleep(2)
    assert mine, "the testbed did not start"
    run_id = next(iter(mine)).split("-")[0]
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=30) != 0
    now = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert run_id not in now
    assert not (env.cgroup2_root() / f"paccp-{run_id}").exists()
    assert run_id not in subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout


def test_fig7_small(loaded: None, tmp_path: Path) -> None:
    """The Fig. 7 topology at a small scale: 13 namespaces, 9 flows, three shaped leaf uplinks."""
    s = fig7.run_fig7(100_000_000, 4, tmp_path, omit_s=1, simulate=False)
    assert json.loads((tmp_path / "summary.json").read_text())["classes"] == s["classes"]
    assert len(s["per_vm"]) == 9 and all(v["measured_mbps"] > 1 for v in s["per_vm"].values()), s["per_vm"]
    assert len(s["bottleneck_utilisation"]) == 3 and s["driven"], s
    assert all(set(c) == {"statement", "paper", "ours", "holds"} for c in s["checks"]), s["checks"]
    c = s["classes"]
    assert (c["BE"]["optimum_mbps"], c["DS"]["optimum_mbps"], c["MRG"]["optimum_mbps"]) == (20.0, 40.0, 40.0)
    assert c["MRG"]["measured_mbps"] > c["BE"]["measured_mbps"], c
    assert c["DS"]["measured_mbps"] > c["BE"]["measured_mbps"], c
    # every VM's data flow ran with its VM's pair (no VBP split: one bulk flow per VM)
    bulk = [r for r in s["datapath_flows_midrun"] if r["bytes_acked"] > 1_000_000]
    assert len(bulk) == 9 and {r["omega"] for r in bulk} == {1.0, 2.0}, bulk
    # the diagnostics of the cross-check: per-VM TCP counters, uplink drops, ss samples, client starts
    d = s["diag"]
    assert set(d["nstat"]) == {f"vm{i}" for i in range(1, 10)}
    assert all(n["TcpExtTCPOrigDataSent"] > 1000 for n in d["nstat"].values()), d["nstat"]
    assert set(d["uplink_drops"]) == {"leaf1", "leaf2", "leaf3"}
    assert all(v >= 0 for v in d["uplink_drops"].values())
    assert all(v > 1000 for v in d["uplink_pkts"].values()), d["uplink_pkts"]
    ss = d["ss_medians"]
    assert len(ss) == 9 and all(r["cwnd"] >= 1 for r in ss.values()), ss
    assert len(s["client_start_offsets_ms"]) == 9
