"""Pure parts of the datapath (no root): attribution, rule owners, the MPTCP and SoftBW helpers."""

from __future__ import annotations

from pathlib import Path

import pytest

from paccp.datapath.core import cgroups
from paccp.datapath.mptcp import testbed as mptcp_testbed
from paccp.datapath.paccp import metering, rules
from paccp.datapath.softbw import control as softbw
from paccp.errors import UserError


def test_attribution_by_socket_cgroup() -> None:
    paths = {10: "/vms/a", 11: "/vms/a/inner", 20: "/user.slice"}
    known = {10: cgroups.Known("/vms/a", "acme")}
    assert metering.attribute(10, 11, paths, known, "dflt") == metering.Owner("acme", "/vms/a")
    assert metering.attribute(0, 20, paths, known, "dflt") == metering.Owner(
        metering.HOST_TENANT, "outside-vm:/user.slice"
    )
    # a VM registered without a tenant takes the default; an unknown id is named by its number
    assert metering.attribute(30, 30, paths, {}, "dflt") == metering.Owner("dflt", "cgroup:30")


def test_rule_needs_an_owner() -> None:
    with pytest.raises(UserError, match="needs an owner"):
        rules.rule_owner(None, False)
    with pytest.raises(UserError, match="not both"):
        rules.rule_owner("/vm1", True)
    assert rules.rule_owner(None, True) == (0, "host-wide")


def test_mptcp_scaling_and_levels() -> None:
    assert mptcp_testbed.scaled(350e6, 100_000_000) == 35_000_000
    # the paper's A_l = B/U with U = 75 Mb/s: 400 -> 5, 300 -> 4, 100 -> 1
    assert [mptcp_testbed.a_level(b * 1_000_000) for b in (400, 300, 200, 100)] == [5, 4, 3, 1]


def test_goodput_counts_new_subflows_from_zero() -> None:
    a = {"x": ("bg", 1000), "y": ("wc", 500)}
    b = {"x": ("bg", 2000), "y": ("wc", 1500), "z": ("wc", 250)}
    assert mptcp_testbed._goodput(a, b, 1.0) == {"bg": 8000.0, "wc": 10000.0}


def test_softbw_classes() -> None:
    assert (softbw.unsat_class(1), softbw.sat_class(1)) == ("1:101", "1:201")
    assert softbw._clsid("1:101") == 0x10101


def test_rate_limiter_allocation() -> None:
    """The softbw-short rate limiter: active VMs share the port by weight, an idle VM keeps the floor,
    a VM using less than its limit is held to 1.2 x what it used and the rest goes to the others."""
    from paccp.datapath.softbw import short as ss

    got = ss.allocate(100.0, used=[0.0, 50.0, 50.0], limits=[33.0, 50.0, 50.0], weights=[1, 1, 1])
    assert got == pytest.approx([ss.FLOOR * 100, 50.0, 50.0])
    got = ss.allocate(100.0, used=[10.0, 50.0, 50.0], limits=[50.0, 50.0, 50.0], weights=[1, 1, 1])
    assert got[0] == pytest.approx(12.0) and got[1] == pytest.approx(44.0) and got[2] == pytest.approx(44.0)
    # a VM at its limit demands more: after one update with the others idle it gets the whole port
    got = ss.allocate(100.0, used=[1.0, 0.0, 0.0], limits=[1.0, 50.0, 50.0], weights=[1, 1, 1])
    assert got == pytest.approx([100.0, 1.0, 1.0])


def test_simulator_column_same_setup() -> None:
    """The simulator's prediction for a testbed setup: rates scaled to the testbed's link (100 Mbit/s),
    BG subflows shaped to the scaled guarantees, WC subflows carrying the spare capacity."""
    from paccp.datapath.core import sim_predict

    servers = [("s1", 40_000_000, 5, 1), ("s2", 20_000_000, 2, 1)]
    got = sim_predict.mptcp(servers, 100_000_000, 48_448, star=True, duration_s=sim_predict.QUICK_S)
    assert set(got) == {"s1", "s2"}
    for name, g, _a, _c in servers:
        assert 0.85 * g / 1e6 <= got[name]["bg"] <= 1.02 * g / 1e6, got  # payload <= the wire guarantee
    assert sum(v["wc"] for v in got.values()) > 20, got  # 40 Mb/s spare
    sb = sim_predict.softbw([1, 4, 8], 45_000_000, 100_000_000, 48_448, scheduler=True, duration_s=0.6)
    rates = list(sb["mbps"].values())
    assert len(rates) == 3 and max(rates) / min(rates) < 1.2, sb


def test_testbed_usage_records_validate() -> None:
    """Testbed windows become usage records of PACCP's schema: BG as mrg at the guarantee, WC as be."""
    from paccp.datapath.core import usage as tu

    w = tu.Window(1_700_000_000_000_000_000, 1_700_000_010_000_000_000)  # 10 s
    recs = tu.mptcp_records("mptcp-bg", "tuned", w, {"s1": 35_000_000}, {"s1": 32e6}, {"s1": 4e6})
    bg, wc = recs
    assert (bg.cos, bg.theta_bps, bg.guarantee, bg.bytes) == ("mrg", 35_000_000, "strict", 40_000_000)
    assert (wc.cos, wc.theta_bps, wc.bytes, wc.flow_id) == ("be", 0, 5_000_000, "s1/wc")
    sb = tu.softbw_records("softbw-share", "1-4-softbw", w, 45_000_000, {"v1": 47e6, "v2": 48e6})
    fifo = tu.softbw_records("softbw-share", "1-4-fifo", w, None, {"v1": 6e6})
    assert [r.cos for r in sb + fifo] == ["mrg", "mrg", "be"]
    assert len({r.record_id for r in recs + sb + fifo}) == 5


def test_testbed_usage_file_roundtrip(tmp_path: Path) -> None:
    from paccp.common.usage import read_usage
    from paccp.datapath.core import usage as tu

    w = tu.Window(1_700_000_000_000_000_000, 1_700_000_002_000_000_000)
    recs = tu.softbw_records("softbw-share", "1-4-softbw", w, 45_000_000, {"v1": 47e6})
    path = tu.write(tmp_path / "x", recs)
    assert list(read_usage(path)) == recs


def test_the_fifo_check_finds_the_vm_furthest_from_its_optimum_either_way() -> None:
    from paccp.datapath.host.testbed import fifo_worst

    opt = {"a": 20.0, "b": 40.0, "c": 10.0}
    # c at 3x its optimum is further off than a at 0.5x
    assert fifo_worst({"goodput_bps": {"a": 10.0, "b": 40.0, "c": 30.0}}, opt) == ("c", 3.0)
    # a at 0.1x (10x below) is further off than c at 2x; a VM with no goodput record counts as 0
    assert fifo_worst({"goodput_bps": {"a": 2.0, "b": 40.0, "c": 20.0}}, opt) == ("a", 0.1)
    assert fifo_worst({"goodput_bps": {"a": 20.0, "c": 10.0}}, opt) == ("b", 0.0)
