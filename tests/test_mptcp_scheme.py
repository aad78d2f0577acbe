"""Scheme mptcp_bgwc: its scenario section, validation (one-line errors) and the paper's scaffolded setups."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from paccp.errors import UserError
from paccp.experiments import mptcp_bgwc as exp
from paccp.scenario import parse_scenario, to_engine, to_toml
from paccp.scenario.schemes.mptcp_bgwc import alpha_w, disjoint_paths, dynamic_receive_buffer
from paccp.traffic import mapreduce as mr


def _base() -> dict[str, Any]:
    return exp.bg_scenario(udp=True, quick=True)


def test_paper_setup_validates_and_resolves_the_policy() -> None:
    sc = parse_scenario(_base())
    assert sc.scheme is not None
    s = sc.scheme
    assert (s.variant, s.scheduler, s.subflow_cc, s.wc_subflows, s.fair_wc) == (
        "ours",
        "bg_first",
        "reno",
        1,
        True,
    )
    assert s.receive_buffer == 6_291_456
    # A_l = max(1, floor(B_g / 75 Mb/s)): the paper's examples 400 -> 5, 300 -> 4, 100 -> 1
    assert [s.competition_level("x", g * 10**6) for g in (400, 350, 300, 200, 100, 50, 0)] == [
        5,
        4,
        4,
        2,
        1,
        1,
        1,
    ]
    assert s.burst_bytes(350_000_000, 1500) == 43_750 + 1500
    assert len(s.udp) == 4 and s.udp[0].rate == 50_000_000


def test_given_competition_levels_override_the_policy() -> None:
    sc = parse_scenario(exp.table3_scenario(1))
    assert sc.scheme is not None
    assert [sc.scheme.competition_level(v.id, v.theta) for v in sc.vms] == [2, 1, 1]


def _err(spec: dict[str, Any]) -> str:
    with pytest.raises(UserError) as ei:
        parse_scenario(spec)
    msg = ei.value.message
    assert "\n" not in msg
    return msg


def test_bad_parameters_are_one_line_errors() -> None:
    s = _base()
    s["vms"][0]["theta"] = "-100Mbit"
    assert "vms[0].theta" in _err(s) and "negative" in _err(s)

    s = _base()
    s["scheme"]["competition_levels"] = {"vm1": 0}
    assert _err(s) == "scenario: scheme.competition_levels.vm1: A_l must be in 1..1000000, got 0"

    s = _base()
    s["scheme"]["competition_levels"] = {"nope": 2}
    assert "unknown VM" in _err(s)

    s = _base()
    s["scheme"]["wc_subflows"] = 2  # the Fig. 11 testbed has one path
    assert "N = 2 > the 1 disjoint path(s) from S1 to S5 (flows[0])" in _err(s)

    s = _base()
    s["scheme"]["wc_subflows"] = 0
    assert "scheme.wc_subflows" in _err(s)

    s = _base()
    s["scheme"]["scheduler"] = "round_robin"
    assert _err(s).startswith("scenario: scheme.scheduler: Input should be 'bg_first' or 'least_rtt'")

    s = _base()
    s["scheme"]["subflow_cc"] = "balia"
    assert "scheme.subflow_cc" in _err(s)

    s = _base()
    s["scheme"]["variant"] = "magic"
    assert "scheme.variant" in _err(s)

    s = _base()
    del s["flows"][0]["vm"]
    assert "flows[0].vm: scheme mptcp_bgwc needs every flow in a VM" in _err(s)

    s = _base()
    s["scheme"]["udp"][0]["dst"] = "S1"
    assert "scheme.udp[0].dst: the VM's own host" in _err(s)

    s = _base()
    s["scheme"]["rcvbuf_beta"] = 0.5
    assert "scheme.rcvbuf_beta" in _err(s)

    s = _base()
    s["cc"] = {"kind": "reno"}
    assert "cc: not used by scheme mptcp_bgwc" in _err(s)


def test_wc_subflows_up_to_the_disjoint_paths_of_a_leaf_spine() -> None:
    s = _base()
    s["topology"] = {"kind": "leaf_spine", "leaves": 2, "spines": 3, "hosts_per_leaf": 2}
    s["vms"] = [{"id": "vm1", "host": "h0", "theta": "350Mbit"}]
    s["flows"] = [{"id": "f", "src": "h0", "dst": "h2", "vm": "vm1"}]
    s["scheme"] = {"kind": "mptcp_bgwc", "wc_subflows": 3}
    parse_scenario(s)
    s["scheme"]["wc_subflows"] = "paths"
    parse_scenario(s)
    s["scheme"]["wc_subflows"] = 4
    assert "N = 4 > the 3 disjoint path(s)" in _err(s)


def test_disjoint_paths_on_the_papers_topologies() -> None:
    clos = parse_scenario(
        {
            "topology": exp.clos(),
            "vms": [{"id": "v", "host": "h0", "theta": "800Mbit"}],
            "flows": [{"id": "f", "src": "h0", "dst": "h399", "vm": "v"}],
            "scheme": {"kind": "mptcp_bgwc"},
        }
    )
    assert disjoint_paths(clos, "h0", "h399") == 2  # across pods: two aggregation switches, two cores
    assert disjoint_paths(clos, "h0", "h30") == 2  # same pod, other ToR: two aggregation switches
    assert disjoint_paths(clos, "h0", "h1") == 1  # same ToR
    tb = parse_scenario(_base())
    assert disjoint_paths(tb, "S1", "S5") == 1


def test_fair_wc_increase_and_dynamic_buffer() -> None:
    assert alpha_w(5, 1) == 25
    assert alpha_w(1, 3) == pytest.approx(1 / 9)
    assert alpha_w(2, 2) == 1
    with pytest.raises(ValueError):
        alpha_w(0, 1)
    # beta 3, RTTs 0.2 / 2.2 ms, 500 + 473 Mb/s -> 3 * 2.2e-3 * 973e6 / 8 bytes
    assert dynamic_receive_buffer(3, [0.2e-3, 2.2e-3], [500e6, 473e6]) == 802_725


def test_engine_json_of_the_scheme() -> None:
    eng = to_engine(parse_scenario(exp.bg_scenario(udp=True, quick=True)))
    vms = {v["id"]: v for v in eng["vms"]}
    assert vms["vm1"]["theta_bps"] == 350_000_000 and vms["vm1/wc"]["omega"] == 4.0  # A_l = 350 // 75
    fl = {f["id"]: f for f in eng["flows"]}
    assert fl["f1/bg"]["class"] == 0 and fl["f1/bg"]["vm"] == "vm1"
    wc = fl["f1/wc0"]
    assert (wc["class"], wc["vm"], wc["cc"], wc["same_path_as"]) == (
        1,
        "vm1/wc",
        {"kind": "fair_wc"},
        "f1/bg",
    )
    assert fl["u0-vm1/udp"]["cbr_bps"] == 50_000_000 and fl["u0-vm1/udp"]["vm"] == "vm1"
    assert (
        eng["queues"]["switch"]["kind"] == "strict_priority" and len(eng["queues"]["switch"]["levels"]) == 2
    )
    buckets = eng["queues"]["host"]["buckets"]
    assert (buckets[0]["vm"], buckets[0]["rate_bps"]) == ("vm1", 350_000_000)
    # bg_only: no WC subflow; free_competition: plain Reno, no queues
    spec = exp.bg_scenario(udp=False, quick=True)
    spec["scheme"]["variant"] = "bg_only"
    assert [f["id"] for f in to_engine(parse_scenario(spec))["flows"]] == [f"f{i}/bg" for i in range(1, 5)]
    spec["scheme"]["variant"] = "free_competition"
    eng = to_engine(parse_scenario(spec))
    assert eng["cc"] == {"kind": "reno"} and "queues" not in eng and eng["flows"][0]["id"] == "f1"
    # RED on the switch levels: Cisco IOS's WRED defaults unless given
    spec["scheme"]["variant"] = "ours"
    spec["scheme"]["switch_queue"] = "red"
    red = to_engine(parse_scenario(spec))["queues"]["switch"]["red"]
    assert red == {"min_th": 20.0, "max_th": 40.0, "max_p": 0.1, "w_q": 2.0**-9, "gentle": False}
    spec["scheme"]["variant"] = "free_competition"
    assert "scheme.switch_queue" in _err(spec)
    # the levels in one buffer (paccp compare's mptcp-bgwc-shared); free_competition has no levels
    spec["scheme"]["switch_queue"] = "drop_tail"
    spec["scheme"]["shared_buffer"] = True
    assert "scheme.shared_buffer" in _err(spec)
    spec["scheme"]["variant"] = "ours"
    assert to_engine(parse_scenario(spec))["queues"]["switch"]["shared_buffer"] is True


def test_paper_numbers_cover_every_experiment_of_spec_section_10() -> None:
    ids = {
        "mptcp-sched",
        "mptcp-cc",
        "mptcp-rcvbuf",
        "mptcp-bg",
        "mptcp-wc",
        "mptcp-table3",
        "mptcp-fair",
        "mptcp-clos",
    }
    assert set(exp.PAPER) == ids
    from paccp.experiments import load_all

    runnable = {i for i in load_all() if i.startswith("mptcp-")}
    assert {"mptcp-bg", "mptcp-table3", "mptcp-fair", "mptcp-sched", "mptcp-rcvbuf"} <= runnable
    assert {"mptcp-cc", "mptcp-wc", "mptcp-clos"} <= runnable
    assert runnable | set(exp.NEEDS) == ids and not runnable & set(exp.NEEDS)
    rows = exp.PAPER["mptcp-table3"].numbers["rows"]
    assert [r["wc"] for r in rows] == [(62, 31, 31), (212, 106, 106), (120, 65, 35), (217, 110, None)]


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        (("vms", 0, "theta"), "-100Mbit", "vms[0].theta"),  # negative guarantee
        (("scheme", "competition_levels"), {"vm1": 0}, "scheme.competition_levels.vm1"),  # A_l < 1
        (("scheme", "wc_subflows"), 2, "scheme.wc_subflows"),  # N > the testbed's one path
        (("scheme", "scheduler"), "random", "scheme.scheduler"),  # unknown scheduler
        (("scheme", "red"), {"min_th": 30, "max_th": 20}, "scheme.red.max_th"),
        (("scheme", "switch_queue"), "codel", "scheme.switch_queue"),
    ],
)
def test_cli_reports_a_bad_scheme_in_one_line_with_exit_2(
    tmp_path: Path, path: tuple[Any, ...], value: Any, field: str
) -> None:
    s = _base()
    node: Any = s
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    p = tmp_path / "bad.toml"
    p.write_text(to_toml(s))
    r = subprocess.run(
        [sys.executable, "-m", "paccp.cli", "run", str(p), "--out", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("paccp: error:") and field in lines[0], lines


def test_coupled_and_finite_connections_in_the_engine_json() -> None:
    # LIA / OLIA: every subflow of a connection (BG included) runs the coupled controller, the WC
    # subflows are the BG subflow's connection's; fair WC (Eq. 7 is Reno's) cannot be combined with them.
    eng = to_engine(parse_scenario(exp.cc_scenario("lia", quick=True)))
    fl = {f["id"]: f for f in eng["flows"]}
    assert fl["fS1/bg"]["cc"] == {"kind": "lia"} and fl["fS1/wc0"]["cc"] == {"kind": "lia"}
    conn = {c["id"]: c for c in eng["connections"]}["fS1"]
    assert [x["flow"] for x in conn["subflows"]][:2] == ["fS1/bg", "fS1/wc0"]
    spec = exp.cc_scenario("olia", quick=True)
    spec["scheme"]["fair_wc"] = True
    assert "scheme.fair_wc: Eq. 7 changes Reno's increase" in _err(spec)
    # A finite connection: the connection carries the size, its subflows none.
    spec, _ = exp.clos_scenario("ours", mr.Scaling(jobs=3, size_scale=1e-3, time_scale=1e-3, max_tasks=4))
    eng = to_engine(parse_scenario(spec))
    bg = [f for f in eng["flows"] if f["id"].endswith("/bg")]
    wc = [f for f in eng["flows"] if f["id"].endswith("/wc0")]
    assert bg and len(wc) == len(bg) and all(f["size_bytes"] is None for f in bg + wc)
    conns = eng["connections"]
    assert len(conns) == len(bg) and all(c["size_bytes"] for c in conns)
    assert all(c["subflows"][1]["flow"] == c["id"] + "/wc0" for c in conns)
