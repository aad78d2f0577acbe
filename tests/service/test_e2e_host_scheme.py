"""End to end on the namespace testbed (root, BPF) for a scheme other than PACCP's own maps: PACCP enforced
at the host's port (``paccp_host``). A controller and one agent whose host ``L`` has a 100 Mbit/s port and
three VMs (namespaces s0..s2, one iperf3 sender each). The tenant buys the host-enforced pair for every VM
(BE), then upgrades vm1 to MRG (60 Mbit/s, 2) through the API: the agent rebuilds the host's enforcer and
vm1's measured share of the port rises from about a third to its guarantee.

Skipped with a reason where the machine lacks root, BTF or the tools; holds the datapath lock while it runs.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from svc_procs import AgentProc, Controller, wait_for
from test_e2e_datapath import _datapath_lock, _missing

RATE = 100_000_000


@pytest.mark.root
def test_host_enforced_purchase_changes_the_vms_share(tmp_path: Path) -> None:
    reason = _missing()
    if reason:
        pytest.skip(reason)
    from paccp.datapath.core import env
    from paccp.datapath.paccp import testbed

    with _datapath_lock(), testbed.testbed() as net:
        ctl = Controller(tmp_path).start()
        ag: AgentProc | None = None
        try:
            tok = ctl.admin("POST", "/v1/admin/tenants", json={"name": "acme", "model": "vbp"})["token"]
            net.add_node("L", router=True)
            net.add_node("d")
            port, _ = net.link("L", "10.210.0.1/30", "d", "10.210.0.2/30")
            net.ip("d", "route", "add", "10.211.0.0/16", "via", "10.210.0.1")
            root = env.cgroup2_root()
            vif: dict[str, str] = {}
            facts = [f'port = "{port}"', f'port_rate = "{RATE}"', f'netns = "{net.ns("L")}"']
            for i in range(3):
                net.add_node(f"s{i}")
                _, lif = net.link(f"s{i}", f"10.211.{i}.2/24", "L", f"10.211.{i}.1/24")
                net.ip(f"s{i}", "route", "add", "default", "via", f"10.211.{i}.1")
                vif[f"vm{i}"] = lif
                facts += [f"[vm.vm{i}]", f'ifname = "{lif}"']
                cg = net.cgroup(f"vm{i}")
                body = {"name": f"vm{i}", "tenant": "acme", "host": "L", "cgroup": f"/{cg.relative_to(root)}"}
                ctl.admin("POST", "/v1/admin/vms", json=body)
            (tmp_path / "host.toml").write_text("\n".join(facts) + "\n")
            ag = AgentProc(ctl, "L", tmp_path / "state-L", "1s", applier="datapath",
                           extra=("--host-config", str(tmp_path / "host.toml"))).start()  # fmt: skip
            be = {v: _buy(ctl, tok, v, "be", "0", "1") for v in vif}
            state = tmp_path / "state-L" / "agent.json"

            def enforced() -> bool:
                applied = json.loads(state.read_text())["applied"].values()
                leaves = net.exec("L", "tc", "class", "show", "dev", port).stdout
                return [v["scheme"] for v in applied] == ["paccp_host"] * 3 and "1:103" in leaves

            wait_for(enforced, timeout=30, what="the host's enforcer with the three VMs")
            net.spawn("d", ["iperf3", "-s", "-p", "5501"])
            net.spawn("d", ["iperf3", "-s", "-p", "5502"])
            net.spawn("d", ["iperf3", "-s", "-p", "5503"])
            time.sleep(0.5)
            for i in range(3):
                net.spawn(f"s{i}", ["iperf3", "-c", "10.210.0.2", "-p", str(5501 + i), "-t", "20"])
            time.sleep(4)
            before = _shares(net, vif, 2.0)
            terms = {"cos": "mrg", "theta": "60Mbit", "omega": "2", "scheme": "paccp_host"}
            q = ctl.http.get("/v1/quote", headers=ctl.h(tok), params=terms).json()
            t = time.monotonic()
            r = ctl.http.patch(f"/v1/purchases/{be['vm1']['id']}", headers=ctl.h(tok),
                               json={**terms, "max_per_hour": q["per_hour"]})  # fmt: skip
            assert r.status_code == 200, r.text
            after = wait_for(lambda: (lambda s: s["vm1"] > 0.5 and s)(_shares(net, vif, 1.0)), timeout=8,
                             what="vm1's share to rise")  # fmt: skip
            took = time.monotonic() - t
            print(f"vm1 share {before['vm1']:.2f} -> {after['vm1']:.2f} within {took:.1f} s (1 s windows);"
                  f" before {before}, after {after}")  # fmt: skip
            assert before["vm1"] < 0.45, before  # BE among equals: about a third
            assert ag.proc is not None and ag.proc.poll() is None
        finally:
            if ag is not None:
                ag.stop()
            ctl.stop()
            from paccp.datapath.host.enforcer import PIN_ROOT
            from paccp.service.schemes import reap_host_pins

            reap_host_pins(Path(PIN_ROOT))  # the stopped agent's enforcer programs (its namespaces are gone)


def _buy(ctl: Controller, tok: str, vm: str, cos: str, theta: str, omega: str) -> dict[str, object]:
    params = {"cos": cos, "theta": theta, "omega": omega, "scheme": "paccp_host"}
    q = ctl.http.get("/v1/quote", params=params, headers=ctl.h(tok)).json()
    r = ctl.http.post("/v1/purchases", headers=ctl.h(tok),
                      json={"vm": vm, **params, "max_per_hour": q["per_hour"]})  # fmt: skip
    assert r.status_code == 201, r.text
    return dict(r.json())


def _shares(net: object, vif: dict[str, str], window_s: float) -> dict[str, float]:
    """Each VM's share of what the three sent into the host over ``window_s`` (the host side's rx bytes)."""

    def rx() -> dict[str, int]:
        return {v: int(net.exec("L", "cat", f"/sys/class/net/{i}/statistics/rx_bytes").stdout)  # type: ignore[attr-defined]
                for v, i in vif.items()}  # fmt: skip

    a = rx()
    time.sleep(window_s)
    b = rx()
    tot = sum(b[v] - a[v] for v in vif) or 1
    return {v: (b[v] - a[v]) / tot for v in vif}
