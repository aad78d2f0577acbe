"""A real guest kernel (QEMU) behind a host tap: it boots, runs its own congestion control, moves traffic.

Scaled down (about 30 s under TCG): one guest, 2-3 s of iperf3 each way through the tap. Skipped only
without root, QEMU or (for ``PACCP_GUEST_ACCEL=kvm``) /dev/kvm.
"""

from __future__ import annotations

import json
import os
import platform
import secrets
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from paccp.datapath.guest import experiment, vm

TAP = "tgt0"


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root (a tap in a network namespace)"
    if shutil.which("qemu-system-x86_64") is None:
        return "qemu-system-x86_64 is not installed (tools/install-system-deps.sh)"
    if os.environ.get(vm.ACCEL_ENV) == "kvm" and not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return "PACCP_GUEST_ACCEL=kvm but /dev/kvm is absent"
    if shutil.which("iperf3") is None:
        return "iperf3 is not installed (tools/install-system-deps.sh)"
    return None


@pytest.fixture
def guest_ok() -> None:
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)


@pytest.fixture
def netns(guest_ok: None) -> Iterator[str]:
    name = f"pg{secrets.token_hex(3)}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    subprocess.run(["ip", "-n", name, "link", "set", "lo", "up"], check=True)
    yield name
    subprocess.run(["ip", "netns", "pids", name], capture_output=True)
    subprocess.run(["ip", "netns", "del", name], check=False)


def _tap_bytes(ns: str) -> tuple[int, int]:
    """(rx, tx) bytes of the tap on the host side: rx is what the guest sent."""
    res = subprocess.run(["ip", "-n", ns, "-s", "-j", "link", "show", TAP], capture_output=True, text=True)
    st = json.loads(res.stdout)[0]["stats64"]
    return int(st["rx"]["bytes"]), int(st["tx"]["bytes"])


def test_guest_boots_its_own_kernel_and_moves_traffic_through_the_tap(netns: str, tmp_path: Path) -> None:
    with vm.Guest(TAP, addr="10.79.0.2/24", host_addr="10.79.0.1/24", cc="reno", netns=netns) as g:
        # its own kernel (Debian's cloud kernel, not the host's) and its own congestion control
        release = g.run("uname -r").strip()
        assert release.endswith("-cloud-amd64") and release != platform.release(), release
        assert g.run("cat /proc/sys/net/ipv4/tcp_congestion_control").strip() == "reno"
        rc, out = g.run_rc("exit 3")
        assert rc == 3 and out == ""
        with pytest.raises(vm.GuestError, match="exit 1"):
            g.run("false")

        # guest -> host: the guest's iperf3 client, 2 connections, to a server in the host's namespace
        server = subprocess.Popen(
            ["ip", "netns", "exec", netns, "iperf3", "-s", "-1", "-J", "-B", "10.79.0.1"],
            stdout=subprocess.PIPE,
            text=True,
        )
        rx0, _ = _tap_bytes(netns)
        g.run("sleep 0.5; iperf3 -c 10.79.0.1 -P 2 -t 3", timeout=60)
        rx1, _ = _tap_bytes(netns)
        doc = json.loads(server.communicate(timeout=30)[0])
        got = doc["end"]["sum_received"]["bits_per_second"]
        assert got > 1e6, got  # TCG moves tens of Mbit/s; 1 Mbit/s only rules out a stalled path
        assert rx1 - rx0 >= doc["end"]["sum_received"]["bytes"], (rx1 - rx0, doc["end"]["sum_received"])

        # host -> guest: a server inside the guest, started in its background
        job = g.spawn("iperf3 -s -1")
        g.wait_listening(5201)
        client = subprocess.run(
            [
                "ip",
                "netns",
                "exec",
                netns,
                "iperf3",
                "-c",
                "10.79.0.2",
                "-t",
                "2",
                "-J",
                "--connect-timeout",
                "20000",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert client.returncode == 0, client.stdout[-300:] + client.stderr[-300:]
        end = json.loads(client.stdout)["end"]
        assert end.get("sum_received", {}).get("bits_per_second", 0) > 1e6, client.stdout[-600:]
        rc, text = g.wait(job, timeout=30)
        assert rc == 0 and "receiver" in text, text[-300:]
    # torn down: the tap made for the guest is gone, QEMU has exited
    assert subprocess.run(["ip", "-n", netns, "link", "show", TAP], capture_output=True).returncode != 0


def test_a_background_job_ending_mid_request_costs_no_bytes(netns: str) -> None:
    """A background job that ends while the guest reads a request must not eat the request's first bytes.

    The job outlives its command and is re-parented to PID 1. When the command loop was PID 1, the job's
    SIGCHLD interrupted the loop's ``read``, which ash restarts from scratch: the guest answered the request's
    tail as a request of its own, and the caller waited out its timeout (CI failed so, once in about 90
    requests). Here the request is sent in two pieces with the job's end between them, every time.
    """
    with vm.Guest(TAP, addr="10.79.0.2/24", netns=netns) as g:
        for i in range(3):
            g.run("(usleep 300000 &)")  # an orphan that ends 0.3 s from now
            n, line = g._request(f"echo {i}")
            assert g._sock is not None
            g._sock.sendall(line[:3])  # the loop's read has these and waits for the rest
            time.sleep(0.6)
            g._sock.sendall(line[3:])
            assert g._answer(n, time.monotonic() + 10) == (0, f"{i}\n")


def test_window_rates_and_share_within_tolerance() -> None:
    samples = [(0.0, {"a": 0}), (0.1, {"a": 125_000}), (0.2, {"a": 250_000}), (0.3, {"a": 300_000})]
    rates = experiment.window_rates(samples, 0.0, 0.3)["a"]
    assert [round(r / 1e6, 3) for r in rates] == [10.0, 10.0, 4.0]
    assert experiment.within_share(rates, 10e6) == pytest.approx(2 / 3)
    assert experiment.within_share([], 10e6) == 0.0


def test_auto_rate_is_at_most_half_what_the_guest_alone_pushes_and_measurable() -> None:
    from paccp.datapath.paccp.testbed import FlowSpec

    flows = [FlowSpec("guest", 0, 1.0), FlowSpec("ns", 0, 2.0)]  # shares 1/3 and 2/3
    # 10 windows: the 10th percentile is the second lowest (50 Mbit/s): half is 25 -> 20 Mbit/s
    windows = [e * 1e6 for e in (3, 50, 60, 70, 80, 90, 100, 110, 120, 130)]
    assert experiment.auto_rate(windows, flows) == 20_000_000
    # a slow guest: the lowest rate at which 1/3 of the port is still 20 frames per 100 ms (10 Mbit/s)
    assert experiment.auto_rate([1e5] * 10, flows) == 10_000_000
    assert not experiment.measurable(5_000_000, flows) and experiment.measurable(10_000_000, flows)
    assert experiment.auto_rate([500e6] * 10, flows) == experiment.AUTO_RATES_BPS[0]


def test_host_enforcer_holds_the_guest_kernel_to_its_share(guest_ok: None, tmp_path: Path) -> None:
    """The experiment scaled down (only the enforced phase, 3 s at 10 Mbit/s): under the host enforcer,
    the guest with 8 cubic connections and the namespace guest with 1 reno connection get their optimum."""
    gvm = experiment.Vm("guest", 0, 1.0, 8, "cubic")
    nvm = experiment.Vm("ns", 0, 2.0, 1, "reno")
    s = experiment.run(10_000_000, 3.0, tmp_path, gvm, nvm, phases_run=("enforced",))
    assert {c["statement"].split(":")[0] for c in s["checks"]} >= {"enforced"}
    assert set(s["phases"]) == {"boot_s", "enforced"}
    enf = s["phases"]["enforced"]
    # means over 3 s, not the 90 % of windows (the full run checks that): within 15 %
    for name in ("guest", "ns"):
        assert enf[name]["mean_mbps"] == pytest.approx(enf[name]["optimum_mbps"], rel=0.15), enf[name]
    assert (tmp_path / "summary.json").is_file() and (tmp_path / "console.log").is_file()
