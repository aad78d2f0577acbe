"""Pure parts of the datapath (no root): attribution, rule owners, the MPTCP and SoftBW helpers."""

from __future__ import annotations

import pytest

from paccp.datapath import core, mptcp_testbed, softbw
from paccp.errors import UserError


def test_attribution_by_socket_cgroup() -> None:
    paths = {10: "/vms/a", 11: "/vms/a/inner", 20: "/user.slice"}
    known = {10: core.Known("/vms/a", "acme")}
    assert core.attribute(10, 11, paths, known, "dflt") == core.Owner("acme", "/vms/a")
    assert core.attribute(0, 20, paths, known, "dflt") == core.Owner(
        core.HOST_TENANT, "outside-vm:/user.slice"
    )
    # a VM registered without a tenant takes the default; an unknown id is named by its number
    assert core.attribute(30, 30, paths, {}, "dflt") == core.Owner("dflt", "cgroup:30")


def test_rule_needs_an_owner() -> None:
    with pytest.raises(UserError, match="needs an owner"):
        core._rule_owner(None, False)
    with pytest.raises(UserError, match="not both"):
        core._rule_owner("/vm1", True)
    assert core._rule_owner(None, True) == (0, "host-wide")


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
