"""The agent reconciles each VM into the datapath of the scheme it bought: the datapath libraries are faked
at their boundary (the modules :mod:`paccp.service.schemes` calls), the agent and its drivers are real.

For each scheme: the calls a purchase, a change and a cancellation make, the state persisted in the
agent's state file, and a restart over the same datapath that changes nothing (or, for the host enforcer,
which dies with the agent's process, rebuilds it once)."""

from __future__ import annotations

import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from paccp.errors import UserError
from paccp.service.agent import Agent
from paccp.service.app import Terms
from paccp.service.schemes import DRIVERS, NO_GUARANTEE_BPS, DatapathApplier, HostFacts

FACTS = HostFacts.model_validate(
    {"port": "eth0", "port_rate": "1Gbit",
     "vm": {"v1": {"ifname": "tap1", "addr": "10.0.0.1", "wc_addr": "10.0.1.1", "index": 1},
            "v2": {"ifname": "tap2", "addr": "10.0.0.2", "wc_addr": "10.0.1.2", "index": 2}}}
)  # fmt: skip


@dataclass
class FakeDatapaths:
    """Every datapath module the drivers call, recording calls and keeping the state they set."""

    calls: list[tuple[Any, ...]] = field(default_factory=list)
    paccp: dict[str, tuple[int, float]] = field(default_factory=dict)  # cgroup -> (theta, omega)
    softbw: dict[str, tuple[int, int]] = field(default_factory=dict)  # addr -> (B, index)
    bgwc_vm: dict[str, int] = field(default_factory=dict)  # cgroup -> A_l
    bgwc_addr: dict[str, str] = field(default_factory=dict)
    bgwc_bytes: dict[str, int] = field(default_factory=dict)  # cgroup -> bytes its subflows delivered
    enforcers: list[FakeEnforcer] = field(default_factory=list)

    def modules(self) -> dict[str, Any]:
        dp = self

        class Ns:
            def __init__(self, **fns: Any) -> None:
                self.__dict__.update(fns)

        def rec(name: str, fn: Any = None) -> Any:
            def call(*a: Any, **k: Any) -> Any:
                dp.calls.append((name, *a, *sorted(k.items())))
                return fn(*a, **k) if fn else None

            return call

        loaded = {"paccp": False, "softbw": False, "mptcp": False}

        def loader(key: str) -> Ns:
            return Ns(
                is_loaded=lambda: loaded[key], load=rec(f"{key}.load", lambda: loaded.__setitem__(key, True))
            )

        unsat = "1:{:x}".format
        return {
            "paccp.datapath.paccp.lifecycle": loader("paccp"),
            "paccp.datapath.paccp.vms": Ns(
                vm_set=rec("paccp.vm_set", lambda cg, th, om, **_: dp.paccp.__setitem__(cg, (th, om))),
                vm_clear=rec("paccp.vm_clear", lambda cg: dp.paccp.pop(cg, None)),
            ),
            "paccp.datapath.paccp.rules": Ns(
                rule_set=rec("paccp.rule_set"), rule_clear=rec("paccp.rule_clear")
            ),
            "paccp.datapath.core.cgroups": Ns(resolve_cgroup=lambda cg: Ns(cgid=hash(cg) & 0xFFFF, path=cg)),
            "paccp.datapath.paccp.metering": Ns(
                status_vms=lambda: [
                    Ns(cgid=hash(cg) & 0xFFFF, theta_bps=th, omega=om, bytes_acked=0)
                    for cg, (th, om) in dp.paccp.items()
                ]
            ),
            "paccp.datapath.softbw.control": Ns(
                **vars(loader("softbw")),
                unsat_class=lambda i: unsat(0x100 + i),
                vm_set=rec("softbw.vm_set", lambda a, i, b: dp.softbw.__setitem__(a, (b, i))),
                vm_clear=rec("softbw.vm_clear", lambda a: dp.softbw.pop(a, None) is not None),
                status=lambda: {
                    "vms": [
                        {
                            "addr": a,
                            "guarantee_bps": b,
                            "unsat_class": unsat(0x100 + i),
                            "unsat_bytes": 10,
                            "sat_bytes": 5,
                        }
                        for a, (b, i) in dp.softbw.items()
                    ]
                },
            ),
            "paccp.datapath.mptcp.control": Ns(
                **vars(loader("mptcp")),
                addr_set=rec("mptcp.addr_set", lambda a, c: dp.bgwc_addr.__setitem__(a, c)),
                addr_clear=rec("mptcp.addr_clear", lambda a: dp.bgwc_addr.pop(a, None) is not None),
                vm_set=rec("mptcp.vm_set", lambda cg, a_l: dp.bgwc_vm.__setitem__(cg, a_l)),
                vm_clear=rec("mptcp.vm_clear", lambda cg: dp.bgwc_vm.pop(cg, None) is not None),
                status=lambda: {"vms": [{"cgroup": cg, "a_l": a} for cg, a in dp.bgwc_vm.items()]},
                vm_bytes=lambda cg: dp.bgwc_bytes.get(cg, 0) if cg in dp.bgwc_vm else None,
            ),
            "paccp.datapath.host.enforcer": Ns(
                HostEnforcer=lambda *a: dp._enforcer(*a), PIN_ROOT="/nonexistent"
            ),
        }

    def _enforcer(self, *args: Any) -> FakeEnforcer:
        self.enforcers.append(FakeEnforcer(args))
        return self.enforcers[-1]

    def of(self, prefix: str) -> list[tuple[Any, ...]]:
        return [c for c in self.calls if c[0].startswith(prefix)]


@dataclass
class FakeEnforcer:
    args: tuple[Any, ...]
    vms: dict[str, tuple[str, int, float]] = field(default_factory=dict)
    applied: bool = False
    closed: bool = False
    sent: int = 1000

    def add_vm(self, name: str, ifname: str, theta: int, omega: float) -> None:
        self.vms[name] = (ifname, theta, omega)

    def apply(self) -> None:
        self.applied = True

    def close(self) -> None:
        self.closed = True

    def usage(self) -> dict[str, Any]:
        return {n: type("U", (), {"sent_bytes": self.sent})() for n in self.vms}


def _vm(name: str, scheme: str = "paccp", theta: int = 0, omega: str = "1", **kw: Any) -> dict[str, Any]:
    return {"name": name, "tenant": "acme", "model": "vbp", "cgroup": f"/{name}", "scheme": scheme,
            "theta_bps": theta, "omega": omega, "rules": [], **kw}  # fmt: skip


def _agent(tmp: Path, dp: FakeDatapaths, facts: HostFacts = FACTS) -> Agent:
    return Agent("http://127.0.0.1:9", "h1", "enrol", tmp / "state", DatapathApplier(facts, dp.modules()))


def test_every_scheme_sold_has_exactly_one_driver() -> None:
    sold = set(typing.get_args(typing.get_args(Terms.model_fields["scheme"].annotation)[0]))
    assert sold == set(DRIVERS)


def test_softbw_guarantees_reach_the_softbw_map_and_a_restart_changes_nothing(tmp_path: Path) -> None:
    dp = FakeDatapaths()
    ag = _agent(tmp_path, dp)
    ag.reconcile({"generation": 1, "vms": [_vm("v1", "softbw", 300_000_000, guarantee="strict")]})
    assert dp.of("softbw") == [("softbw.load",), ("softbw.vm_set", "10.0.0.1", 1, 300_000_000)]
    assert dp.of("paccp") == [] and dp.of("mptcp") == []  # nothing in the other datapaths
    saved = ag.state["applied"]["v1"]
    assert (saved["scheme"], saved["guarantee"], saved["theta_bps"]) == ("softbw", "strict", 300_000_000)
    # dynamic: B = the quoted rate S/T; fair: no guarantee (the satisfied class only)
    ag.reconcile({"generation": 2, "vms": [_vm("v1", "softbw", 0, guarantee="dynamic", rate_bps=80_000_000)]})
    ag.reconcile({"generation": 3, "vms": [_vm("v1", "softbw", 0, guarantee="fair", rate_bps=50_000_000)]})
    assert [c[-1] for c in dp.of("softbw.vm_set")] == [300_000_000, 80_000_000, NO_GUARANTEE_BPS]
    # a restart over the same datapath: nothing re-applied
    n = len(dp.calls)
    again = _agent(tmp_path, dp)
    assert again.repair_drift() == 0 and dp.calls[n:] == []
    # the datapath lost it (softbw reloaded): put back
    dp.softbw.clear()
    assert again.repair_drift() == 1 and dp.calls[-1] == ("softbw.vm_set", "10.0.0.1", 1, NO_GUARANTEE_BPS)
    # cancelled: back to BE, out of SoftBW and into PACCP's maps as (0, 1)
    again.reconcile({"generation": 4, "vms": [_vm("v1")]})
    assert dp.of("softbw.vm_clear") == [("softbw.vm_clear", "10.0.0.1")] and dp.softbw == {}
    assert dp.paccp == {"/v1": (0, 1.0)}


def test_mptcp_bgwc_sets_the_level_and_address_classes(tmp_path: Path) -> None:
    dp = FakeDatapaths()
    ag = _agent(tmp_path, dp)
    ag.reconcile({"generation": 1, "vms": [_vm("v1", "mptcp_bgwc", 200_000_000, "3"), _vm("v2")]})
    assert dp.of("mptcp") == [("mptcp.load",), ("mptcp.addr_set", "10.0.0.1", "bg"),
                              ("mptcp.addr_set", "10.0.1.1", "wc"), ("mptcp.vm_set", "/v1", 3)]  # fmt: skip
    assert dp.paccp == {"/v2": (0, 1.0)}  # v2 bought nothing: BE in PACCP's maps
    n = len(dp.calls)
    assert _agent(tmp_path, dp).repair_drift() == 0 and dp.calls[n:] == []
    ag.reconcile({"generation": 2, "vms": [_vm("v1", "mptcp_bgwc", 200_000_000, "5"), _vm("v2")]})
    assert dp.bgwc_vm == {"/v1": 5}
    # a level the datapath cannot take is an apply error, counted; nothing half-set
    ag.reconcile({"generation": 3, "vms": [_vm("v1", "mptcp_bgwc", 200_000_000, "1.5"), _vm("v2")]})
    assert dp.bgwc_vm == {"/v1": 5} and ag.metrics.apply_errors._value.get() == 1
    ag.reconcile({"generation": 4, "vms": [_vm("v2")]})
    assert dp.bgwc_vm == {} and dp.bgwc_addr == {}


def test_an_mptcp_vm_is_billed_the_bytes_its_subflows_delivered(tmp_path: Path) -> None:
    """The usage record of an MPTCP VM carries the bgwc datapath's byte counter (it was always 0)."""
    dp = FakeDatapaths()
    ag = _agent(tmp_path, dp)
    ag.reconcile({"generation": 1, "vms": [_vm("v1", "mptcp_bgwc", 200_000_000, "3")]})
    dp.bgwc_bytes["/v1"] = 7_500_000  # the VM sent (the counter starts at 0 when the VM is set)
    ag.cut_usage()
    recs = [r for r in ag.state["spool"] if r["vm"] == "v1"]
    assert [r["bytes"] for r in recs] == [7_500_000]
    dp.bgwc_bytes["/v1"] += 2_500
    ag.cut_usage()
    assert [r["bytes"] for r in ag.state["spool"] if r["vm"] == "v1"] == [7_500_000, 2_500]


def test_host_enforced_vms_share_one_enforcer_rebuilt_once_per_change(tmp_path: Path) -> None:
    dp = FakeDatapaths()
    ag = _agent(tmp_path, dp)
    ag.reconcile({"generation": 1, "vms": [_vm("v1", "paccp_host", 100_000_000, "2"),
                                           _vm("v2", "paccp_host", 0, "3")]})  # fmt: skip
    assert len(dp.enforcers) == 1
    e = dp.enforcers[0]
    assert e.args == ("eth0", 1_000_000_000, None) and e.applied and not e.closed
    assert e.vms == {"v1": ("tap1", 100_000_000, 2.0), "v2": ("tap2", 0, 3.0)}
    assert ag.repair_drift() == 0 and len(dp.enforcers) == 1  # running as applied: nothing to do
    c0 = ag.applier.counter(ag.applied()["v1"])
    ag.reconcile({"generation": 2, "vms": [_vm("v1", "paccp_host", 200_000_000, "2"),
                                           _vm("v2", "paccp_host", 0, "3")]})  # fmt: skip
    assert e.closed and len(dp.enforcers) == 2 and dp.enforcers[1].vms["v1"] == ("tap1", 200_000_000, 2.0)
    c1 = ag.applier.counter(ag.applied()["v1"])
    assert c0 is not None and c1 is not None and c1[0] == c0[0] + 1000  # carried over the rebuild
    # the enforcer dies with the agent's process: a restart rebuilds it once, with every VM
    again = _agent(tmp_path, dp)
    assert again.repair_drift() == 2 and len(dp.enforcers) == 3
    assert dp.enforcers[2].vms == dp.enforcers[1].vms
    again.reconcile({"generation": 3, "vms": [_vm("v2", "paccp_host", 0, "3")]})
    assert list(dp.enforcers[3].vms) == ["v2"] and dp.enforcers[2].closed
    again.reconcile({"generation": 4, "vms": []})
    assert dp.enforcers[3].closed and len(dp.enforcers) == 4


def test_missing_host_facts_fail_that_vm_only(tmp_path: Path) -> None:
    dp = FakeDatapaths()
    ag = _agent(tmp_path, dp, HostFacts())
    ag.reconcile({"generation": 1, "vms": [_vm("v1", "softbw", 100, guarantee="strict"), _vm("v2")]})
    assert dp.of("softbw.vm_set") == [] and dp.paccp == {"/v2": (0, 1.0)}
    assert ag.metrics.apply_errors._value.get() == 1
    with pytest.raises(UserError, match=r"host file has no addr, index"):
        ag.applier.apply(ag.applied()["v1"], None)


def test_host_file_is_validated(tmp_path: Path) -> None:
    p = tmp_path / "host.toml"
    p.write_text('port = "eth0"\nport_rate = "1Gbit"\n[vm.v1]\naddr = "10.0.0.1"\nindex = 1\n')
    assert HostFacts.load(p).vm["v1"].index == 1
    p.write_text("[vm.v1]\nindex = 999\n")
    with pytest.raises(UserError, match=r"vm.v1.index"):
        HostFacts.load(p)
    p.write_text("[vm.v1]\nifnme = 'x'\n")
    with pytest.raises(UserError, match=r"ifnme"):
        HostFacts.load(p)


def test_pins_of_dead_enforcers_are_reaped_live_ones_kept(tmp_path: Path) -> None:
    import os

    from paccp.service.schemes import reap_host_pins

    live, dead, other = tmp_path / f"{os.getpid()}-7f00", tmp_path / "999999999-7f00", tmp_path / "notes"
    for d in (live, dead, other):
        d.mkdir()
    assert reap_host_pins(tmp_path) == [dead]
    assert live.exists() and other.exists() and not dead.exists()
