"""End to end on the namespace testbed (root, BPF): a controller and 3 agents, each owning one VM (a cgroup
with an iperf3 sender behind a shared 100 Mbit/s bottleneck). A tenant buys MRG for one VM through the API;
within 1 s that VM's measured rate rises (the datapath's own byte counter), its usage reaches the ledger, and
the invoice the API shows equals the one computed from the ledger's rows.

Skipped with a reason where the machine lacks root, BTF, bpftool/clang or iperf3. Holds
``/tmp/paccp-datapath.lock`` (as the other datapath users on a shared machine do) while it runs.
"""

from __future__ import annotations

import contextlib
import fcntl
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from svc_procs import AgentProc, Controller, wait_for

RATE = 100_000_000
LOCK = Path("/tmp/paccp-datapath.lock")


def _missing() -> str | None:
    import os

    if os.geteuid() != 0:
        return "needs root (BPF struct_ops, network namespaces, cgroups)"
    if not Path("/sys/kernel/btf/vmlinux").exists():
        return "kernel without BTF: no BPF struct_ops"
    for tool in ("bpftool", "clang", "make", "iperf3", "ip", "tc"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (tools/install-system-deps.sh)"
    return None


@contextlib.contextmanager
def _datapath_lock() -> Iterator[None]:
    with LOCK.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _vm_bytes(cgids: dict[str, int]) -> dict[str, int]:
    from paccp.datapath.paccp import metering

    by_id = {v.cgid: v.bytes_acked for v in metering.status_vms()}
    return {name: by_id.get(cg, 0) for name, cg in cgids.items()}


def _rates(cgids: dict[str, int], window_s: float) -> dict[str, float]:
    a, t = _vm_bytes(cgids), time.monotonic()
    time.sleep(window_s)
    b, dt = _vm_bytes(cgids), time.monotonic() - t
    return {k: (b[k] - a[k]) * 8 / dt for k in cgids}


@pytest.mark.root
def test_purchase_changes_the_measured_rate_within_1s(tmp_path: Path) -> None:
    reason = _missing()
    if reason:
        pytest.skip(reason)
    from paccp.datapath.paccp import lifecycle, testbed
    from paccp.errors import EnvironmentUnsupported

    try:
        _run(testbed, tmp_path)
    except EnvironmentUnsupported as exc:
        if not lifecycle.is_loaded():  # another process's datapath tests unloaded it under us
            pytest.skip(f"the paccp datapath was unloaded by another process during this test ({exc})")
        raise


def _run(testbed: Any, tmp_path: Path) -> None:
    from paccp.datapath.core import cgroups, env
    from paccp.datapath.paccp import metering

    with _datapath_lock(), testbed.testbed() as net:
        ctl = Controller(tmp_path).start()
        agents: list[AgentProc] = []
        try:
            tok = ctl.admin("POST", "/v1/admin/tenants", json={"name": "acme", "model": "vbp"})["token"]
            net.add_node("L", router=True)
            net.add_node("R", router=True)
            lif, _ = net.link("L", "10.200.0.1/30", "R", "10.200.0.2/30")
            net.shape("L", lif, RATE, 64_000)
            net.add_node("d")
            net.link("d", "10.202.0.2/24", "R", "10.202.0.1/24")
            net.ip("d", "route", "add", "default", "via", "10.202.0.1")
            net.ip("L", "route", "add", "10.202.0.0/16", "via", "10.200.0.2")
            net.ip("R", "route", "add", "10.201.0.0/16", "via", "10.200.0.1")
            root = env.cgroup2_root()
            cgids: dict[str, int] = {}
            cgs: dict[str, Path] = {}
            for i in range(3):  # host h<i> owns VM vm<i>: its own agent, its own cgroup and sender namespace
                net.add_node(f"s{i}")
                net.link(f"s{i}", f"10.201.{i}.2/24", "L", f"10.201.{i}.1/24")
                net.ip(f"s{i}", "route", "add", "default", "via", f"10.201.{i}.1")
                cg = net.cgroup(f"vm{i}")
                cgs[f"vm{i}"], cgids[f"vm{i}"] = cg, cgroups.resolve_cgroup(str(cg)).cgid
                ctl.admin(
                    "POST", "/v1/admin/vms",
                    json={"name": f"vm{i}", "tenant": "acme", "host": f"h{i}",
                          "cgroup": "/" + str(cg.relative_to(root))},
                )  # fmt: skip
                agents.append(
                    AgentProc(ctl, f"h{i}", tmp_path / f"state-h{i}", "1s", applier="datapath").start()
                )
            # every agent applied its VM (BE) before the VM's connections start: they get paccp
            wait_for(
                lambda: {v.cgid for v in metering.status_vms()} >= set(cgids.values()),
                timeout=30,
                what="the agents to apply their VMs",
            )
            for i in range(3):
                net.spawn("d", ["iperf3", "-s", "-p", str(5401 + i)])
            time.sleep(0.5)
            for i in range(3):
                net.spawn(
                    f"s{i}",
                    ["iperf3", "-c", "10.202.0.2", "-p", str(5401 + i), "-t", "25"],
                    cgroup=cgs[f"vm{i}"],
                )
            time.sleep(4)
            before = _rates(cgids, 2.0)
            share0 = before["vm1"] / sum(before.values())
            ctl.buy(tok, "vm1", "mrg", "60Mbit", "2")
            t = time.monotonic()
            wait_for(
                lambda: any(
                    v.cgid == cgids["vm1"] and v.theta_bps == 60_000_000 for v in metering.status_vms()
                ),
                timeout=5,
                what="the purchase in the datapath",
            )
            applied_s = time.monotonic() - t
            after = _rates(cgids, max(0.2, 1.0 - (time.monotonic() - t)))
            measured_s = time.monotonic() - t
            # once (a suite run of 2026-11-29) no VM's counter moved in this window; say what the
            # datapath held then instead of dividing by zero
            assert sum(after.values()) > 0, (
                f"no VM's bytes moved in {measured_s - applied_s:.2f} s after the purchase (applied in "
                f"{applied_s:.3f} s); before {before}; datapath VMs {metering.status_vms()}"
            )
            share1 = after["vm1"] / sum(after.values())
            print(
                f"applied in {applied_s:.3f} s; vm1 share {share0:.2f} -> {share1:.2f} in {measured_s:.2f} s;"
                f" rates before {before}, after {after}"
            )
            assert applied_s < 1.0
            assert share1 > share0 * 1.3, (share0, share1, before, after)
            time.sleep(1.5)
            for ag in agents:
                ag.stop()
            from paccp.pricing.charging import build_invoice
            from paccp.pricing.ledger import Ledger

            period = time.strftime("%Y-%m", time.gmtime())
            led = Ledger(str(ctl.db), create=False)
            t_ = led.tenant("acme")
            recs = led.usage("acme", 0, 2**62)
            assert {r.vm for r in recs} == {"vm0", "vm1", "vm2"}
            assert any(r.vm == "vm1" and r.cos == "mrg" and r.bytes > 0 for r in recs)
            from paccp.pricing.charging import parse_period

            s, e = parse_period(period)
            want = build_invoice("acme", t_.model, t_.book, led.usage("acme", s, e), period).to_json()
            got = ctl.http.get(f"/v1/invoices/{period}", headers=ctl.h(tok)).json()
            got.pop("issued")
            assert got == want
        finally:
            for ag in agents:
                ag.stop()
            ctl.stop()
