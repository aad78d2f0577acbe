"""The MPTCP BG/WC checks fail when the numbers miss the targets and hold when they meet them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from paccp.experiments import mptcp_checks as mc

G = {"S1": 350.0, "S2": 250.0, "S3": 200.0, "S4": 100.0}


def _holds(rows: list[dict[str, Any]]) -> list[bool]:
    return [bool(r["holds"]) for r in rows]


def test_bg_checks_hold_and_fail() -> None:
    bg = {k: v * 0.98 for k, v in G.items()}
    wc = {k: 22.0 for k in G}
    total = {k: bg[k] + wc[k] for k in G}
    assert all(_holds(mc.checks_bg(G, bg, wc, total, link_mbps=973)))
    low = dict(bg, S4=90.0)
    rows = mc.checks_bg(G, low, wc, {k: low[k] + wc[k] for k in G}, link_mbps=973)
    assert _holds(rows)[6:8] == [False, True]  # S4's BG 10 % low; its total 105 still >= 100
    rows = mc.checks_bg(G, bg, wc, dict(total, S1=300.0), link_mbps=973)
    assert _holds(rows)[1] is False  # S1's total below its guarantee
    rows = mc.checks_bg(G, bg, {k: 1.0 for k in G}, total, link_mbps=973)
    assert _holds(rows)[-1] is False  # the WC subflows leave the spare idle
    # with 50 Mb/s of UDP per VM the BG target is the guarantee minus 50
    bg_udp = {k: v - 50 for k, v in G.items()}
    rows = mc.checks_bg(G, bg_udp, wc, {k: G[k] + 10 for k in G}, link_mbps=973, udp_mbps=50)
    assert all(_holds(rows)[:-1])
    assert not any(_holds(mc.checks_bg(G, G, wc, total, link_mbps=973, udp_mbps=50))[0:8:2])


def test_bg_spare_counts_the_udp_as_delivered() -> None:
    """mptcp-bg printed "96.6 of 91.9 Mb/s": the spare subtracted UDP's nominal 50 Mb/s per VM, while UDP,
    sharing the shaper, delivers less; WC then seemed to take more than the spare."""
    bg = {k: v - 50 for k, v in G.items()}  # 700 in all
    wc = {k: 28.0 for k in G}  # 112
    total = {k: bg[k] + wc[k] + 40.0 for k in G}  # UDP delivers 40 of its 50 Mb/s: 160 in all
    last = mc.checks_bg(G, bg, wc, total, link_mbps=973, udp_mbps=50)[-1]
    taken, spare = (float(x) for x in last["ours"].split(" Mb/s")[0].split(" of "))
    assert (taken, spare) == (112.0, 113.0) and taken <= spare and last["holds"]
    assert "973.0 link - 860.0 BG+UDP delivered" in last["ours"]


def test_table3_shares_within_15_percent() -> None:
    row = {
        "name": "row 3",
        "levels": (5, 2, 1),
        "paper_wc": (120, 65, 35),
        "wc": (135.0, 55.0, 28.0),
        "bg": (399.0, 199.0, 99.0),
        "guarantee": (400, 200, 100),
    }
    assert _holds(mc.checks_table3([row])) == [True, True]
    # equal shares where 5:2:1 is wanted: 0.33 vs 0.625 for A
    row_bad = dict(row, wc=(70.0, 70.0, 70.0), bg=(300.0, 199.0, 99.0))
    assert _holds(mc.checks_table3([row_bad])) == [False, False]
    assert mc.proportional_shares([62, 31, 31], [5, 2, 2])[0] == (0.5, 5 / 9)
    # with the spare given: WC subflows that stall together keep their shares but fail the spare check
    assert _holds(mc.checks_table3([dict(row, spare_mbps=260.0)])) == [True, True, True]
    stalled = dict(row, wc=(62.0, 25.0, 12.5), spare_mbps=260.0)
    assert _holds(mc.checks_table3([stalled])) == [True, True, False]


def test_fair_with_and_without_policy() -> None:
    assert _holds(mc.checks_fair(3, True, {"S1": 100.0, "S3": 95.0, "S4": 105.0})) == [True]
    assert _holds(mc.checks_fair(3, True, {"S1": 180.0, "S3": 60.0, "S4": 60.0})) == [False]
    assert _holds(mc.checks_fair(5, False, {"S1": 200.0, "S3": 40.0, "S4": 42.0})) == [True]
    assert _holds(mc.checks_fair(5, False, {"S1": 90.0, "S3": 90.0, "S4": 90.0})) == [False]


def test_sched_and_clos_ranking() -> None:
    assert _holds(mc.checks_sched({"bg_first": 480.0, "least_rtt": 210.0}, 500)) == [True, True]
    assert _holds(mc.checks_sched({"bg_first": 300.0, "least_rtt": 500.0}, 500)) == [False, False]
    paper = {"ours": 1.0, "wc_only": 1.2, "free_competition": 1.3, "bg_only": 2.0}
    assert _holds(mc.checks_clos(paper)) == [True, True, True]
    swapped = dict(paper, ours=1.25)
    assert _holds(mc.checks_clos(swapped))[:2] == [False, False]
    assert mc.ranking(swapped) == ["wc_only", "ours", "free_competition", "bg_only"]


def test_measure_plumbing_on_the_free_competition_variant(tmp_path: Path) -> None:
    """The variant the engine runs today: four single-path Reno flows share the testbed's 1 Gb/s path."""
    from paccp.experiments import mptcp_bgwc as exp
    from paccp.experiments.mptcp_measure import measure, plot_vm_classes, subflow_class

    assert [subflow_class(x) for x in ("f1/bg", "f1/wc0", "f1/wc3", "u/udp", "f1")] == [
        "bg",
        "wc",
        "wc",
        "udp",
        "tcp",
    ]
    spec = exp.bg_scenario(udp=False, quick=True)
    spec["scheme"]["variant"] = "free_competition"
    spec["run"].update(duration="0.3s", warmup="0.1s")
    m = measure(spec, description="free competition")
    vms = [f"vm{i}" for i in range(1, 5)]
    assert set(m.mean) == {(vm, "tcp") for vm in vms}
    total = sum(m.total(vm) for vm in vms)
    assert 900 < total < 1000  # the shared 1 Gb/s path is full (payload rate, 1460 of 1500 bytes)
    assert all(m.rate(vm, "tcp") > 100 for vm in vms)  # no guarantee, but nobody starves
    paths = plot_vm_classes(m, tmp_path, title="t", guarantee_mbps={"vm1": 350})
    assert sorted(p.name for p in paths) == ["rate_tcp.png", "rate_total.png"]


def test_rate_panel_titles_mention_the_dotted_guarantee_only_where_drawn() -> None:
    """rate_wc.png was titled "(dotted: guarantee)" with no dotted line: WC subflows have no guarantee."""
    from paccp.experiments.mptcp_measure import panel_title

    g = {"vm1": 350.0}
    assert panel_title("mptcp-bg", "wc", {"vm1": 0}, g) == "mptcp-bg: wc"
    assert panel_title("mptcp-bg", "udp", {"vm1": 0}, g) == "mptcp-bg: udp"
    assert panel_title("mptcp-bg", "bg", {"vm1": 0}, g) == "mptcp-bg: bg (dotted: guarantee)"
    assert panel_title("mptcp-bg", "total", {"vm1": 0}, g) == "mptcp-bg: total (dotted: guarantee)"
    assert panel_title("mptcp-bg", "bg", {"vm1": 0}, None) == "mptcp-bg: bg"
