"""``paccp-host`` (PACCP enforced at the host, issue 25) at a scaled-down size: opening flows gains
nothing on a host bottleneck, and guarantees (scaled by one factor) hold at 2x over-commitment, while
the ablation without the per-VM entity does game (so the test can tell)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from paccp.compare.measure import evaluate
from paccp.compare.schemes import SCHEMES
from paccp.compare.setup import Setup, build_setup, gaming_setup
from paccp.compare.spec import Spec, load_spec
from paccp.sim.sweep import Point, resolve

REPO = Path(__file__).resolve().parents[1]


def _spec(tmp_path: Path, starts: str) -> Spec:
    text = (REPO / "scenarios" / "compare-overcommit.toml").read_text()
    text = text.replace("starts = [0, 0, 0.5, 0.75]", f"starts = {starts}")
    text = text.replace('duration = "300ms"\nwarmup = "50ms"', 'duration = "120ms"\nwarmup = "30ms"')
    text = text.replace('duration = "300ms"\n\n[compare.quick]', 'duration = "120ms"\n\n[compare.quick]')
    p = tmp_path / "oc.toml"
    p.write_text(text)
    return load_spec(p)


def _rates(scheme: str, setup: Setup) -> tuple[dict[str, np.ndarray], float]:
    raw = evaluate(resolve(Point(scenario=SCHEMES[scheme].build(setup), params={}), where="test"))
    w = raw["window_ns"]
    k0 = -(-raw["warmup_ns"] // w)
    pf = (raw["mtu"] - raw["header"]) / raw["mtu"]
    return {vm: np.asarray(m["got"][k0:], dtype=float) * 8e9 / w for vm, m in raw["vms"].items()}, pf


def test_guarantees_scaled_by_one_factor_hold_at_2x(tmp_path: Path) -> None:
    spec = _spec(tmp_path, "[0, 0, 0, 0]")
    pt = next(p for p in spec.cfg.points if p.name == "2x")
    setup = build_setup(spec, pt, 1)
    rates, pf = _rates("paccp-host", setup)
    # 4 VMs on each 1 Gb/s host: gold (700, 2), silver (300, 1) twice, 2 Gb/s sold: each gets G / 2
    for v in setup.vms:
        want = v.purchase.guarantee / 2 * pf
        got = rates[v.id]
        # nearly every window within 10 % (the host's window keeps the guests from losing segments
        # in their own host queue, whose recovery moved acked bytes from one window to the next)
        assert (got >= 0.9 * want).mean() >= 0.9, (v.id, want, got)
        assert abs(got.mean() - want) <= 0.05 * want, (v.id, want, got.mean())
    # the paper's PACCP (VBP) does not: gold below its scaled guarantee in most windows
    vbp, _ = _rates("paccp-vbp", setup)
    gold = [v.id for v in setup.vms if v.purchase.name == "gold"]
    assert min(np.mean(vbp[g] >= 0.9 * 350e6 * pf) for g in gold) < 0.9


def _gain(spec: Spec, scheme: str, k: int) -> float:
    """The gaming VM's rate with k connections over the mean VM rate with one each (seed 1)."""
    cfg = spec.cfg
    tr = spec.base.get("transport")
    assert cfg.gaming is not None
    r1, _ = _rates(scheme, gaming_setup(cfg.gaming, 1, 1, cfg.window, tr))
    base = float(np.mean([r.mean() for r in r1.values()]))
    st = gaming_setup(cfg.gaming, k, 1, cfg.window, tr)
    rk, _ = _rates(scheme, st)
    assert st.gamer is not None
    return float(rk[st.gamer].mean()) / base


def test_opening_flows_gains_nothing_on_a_host_bottleneck(tmp_path: Path) -> None:
    spec = _spec(tmp_path, "[0, 0, 0.5, 0.75]")
    g16 = _gain(spec, "paccp-host", 16)
    assert 0.85 <= g16 <= 1.10, g16
    # without the VM as one entity (a queue per flow), 16 flows take most of the port
    assert _gain(spec, "paccp-host-no-vm", 16) > 2.0


def test_opening_flows_gains_nothing_on_a_fabric_bottleneck() -> None:
    """The leaf-spine file's gaming point (4 VMs on one 10 Gb/s switch-to-switch link, 20 ms): with the
    fabric law at the host, 16 connections gain nothing; with the host-queue cap alone, the guests'
    Reno does game."""
    spec = load_spec(REPO / "scenarios" / "compare-leafspine-websearch.toml").quick()
    assert _gain(spec, "paccp-host", 16) <= 1.10
    assert _gain(spec, "paccp-host-no-fabric", 16) > 1.3


def test_opening_flows_gains_nothing_below_one_segment_per_connection() -> None:
    """The Clos file's gaming point (4 VMs on one 1 Gb/s link, 60 us unloaded RTT: a fair share near
    1.3 segments per RTT per VM; 100 ms): 16 connections of one segment each would hold 16; the host
    paces each connection at its law's rate. (Round 3's law per round of each connection kept 1.26-1.30
    times the share while the VM had one pacer and one queue; with a pacer per connection it gives 0.91,
    so the contrast is no longer asserted; docs/host-scheme.md.)"""
    spec = load_spec(REPO / "scenarios" / "compare-clos-mapreduce.toml").quick()
    assert _gain(spec, "paccp-host", 16) <= 1.10
    assert _gain(spec, "paccp-host-no-fabric", 16) > 2.0


def test_a_crowded_fabric_bottleneck_shares_fairly_and_gains_nothing() -> None:
    """The generalisation file's gaming point (6 VMs on one 500 Mb/s link, 60 us unloaded RTT: 0.4
    segment per RTT per VM; 100 ms). With one connection each the six get their fair share (a VM's
    first connection opens at its guarantee's window and slow-starts; opened at the cap, 90 % of the
    host queue each, several switch queues in all, losses and timeouts decide: without the guarantee
    at priority, one VM got 0.23 of its share; with it, opening at the cap alone no longer starves one
    here, 0.88 at least, so the contrast is asserted with both off). With 4 connections the gamer gains
    nothing. (With one pacer and one queue per VM, its connections driven each by its own ACKs, one
    every 4 of the VM's, took 1.5 times the share, which pooling the VM's ACKs repaired; with a pacer
    per connection, no-pool gives 1.13, so that contrast is no longer asserted.)"""
    from paccp.compare.host_scheme import build_with

    spec = load_spec(REPO / "scenarios" / "compare-generalise-4class.toml").quick()
    cfg = spec.cfg
    assert cfg.gaming is not None
    st = gaming_setup(cfg.gaming, 1, 1, cfg.window, spec.base.get("transport"))
    fair = cfg.gaming.rate / cfg.gaming.vms
    host, _ = _rates("paccp-host", st)
    assert min(r.mean() for r in host.values()) >= 0.8 * fair, host
    raw = evaluate(resolve(Point(scenario=build_with(start=False, prio=False)(st), params={}), where="test"))
    k0 = -(-raw["warmup_ns"] // raw["window_ns"])
    cap = [
        np.asarray(m["got"][k0:], dtype=float).mean() * 8e9 / raw["window_ns"] for m in raw["vms"].values()
    ]
    assert min(cap) < 0.5 * fair, cap
    assert _gain(spec, "paccp-host", 4) <= 1.10


def test_distance_reference_dual_matches_the_exact_optimum() -> None:
    """The distance score's fast solver (large windows) agrees with :func:`paccp.sim.optimum.solve`."""
    from paccp.compare.distance import dual_rates
    from paccp.sim.optimum import Flow, Problem, solve

    rng = np.random.default_rng(7)
    links = {f"l{i}": float(rng.uniform(1e9, 10e9)) for i in range(12)}
    flows = tuple(
        Flow(
            f"f{i}",
            tuple(rng.choice(list(links), size=3, replace=False)),
            float(rng.choice([0, 0, 1e8])),
            float(rng.choice([0.5, 1.0, 2.0])),
        )
        for i in range(50)
    )
    exact = solve(Problem(links, flows)).rates_bps
    dual = dual_rates(Problem(links, flows))
    assert max(abs(dual[k] - exact[k]) / exact[k] for k in exact) < 1e-3


def test_problems_solved_together_by_the_dual_get_the_rates_each_gets_alone() -> None:
    """The distance score solves a run's large problems as one problem of disjoint blocks: each block's
    rates are those of its problem solved alone (to 1e-9), not pulled by the other blocks."""
    from paccp.compare.distance import EXACT_MAX, _rates_of, dual_rates
    from paccp.sim.optimum import Flow, Problem

    rng = np.random.default_rng(11)
    probs = []
    for scale in (1e9, 1e7):  # blocks whose prices differ by two orders of magnitude
        links = {f"l{i}": float(rng.uniform(1, 10)) * scale for i in range(8)}
        flows = tuple(
            Flow(
                f"f{i}", tuple(rng.choice(list(links), size=2, replace=False)), 0.0, float(rng.choice([1, 3]))
            )
            for i in range(EXACT_MAX + 5)
        )
        probs.append(Problem(links, flows))
    together = _rates_of(probs)
    for prob, got in zip(probs, together, strict=True):
        alone = dual_rates(prob)
        assert max(abs(got[k] - alone[k]) / alone[k] for k in alone) < 1e-9


def test_a_vm_joining_mid_window_counts_for_the_time_it_was_there() -> None:
    """Score definitions: a VM that joins 0.3 ms into a 5 ms window is present 94 % of it (its guarantee
    makes that window over-committed, not feasible); the distance reference of a window is the time
    average of the optimum over it: a gold VM guaranteed more than the NIC joining 0.4 into a window
    leaves best effort the whole NIC for 0.4 of it (the join rounded to a 200th) and nothing after, so
    best effort's reference is 0.4 of the NIC, not 0 (one optimum with gold weighted by its presence)
    nor the whole NIC; a VM is scored only in the windows it was backlogged throughout."""
    from types import SimpleNamespace

    from paccp.compare.distance import presence, window_shares

    starts = np.arange(4, dtype=np.int64) * 5_000_000
    fr = presence(5_300_000, None, starts, 5_000_000)
    assert list(np.round(fr, 3)) == [0.0, 0.94, 1.0, 1.0]
    fr = presence(0, 12_500_000, starts, 5_000_000)
    assert list(np.round(fr, 3)) == [1.0, 1.0, 0.5, 0.0]
    raw = {
        "mtu": 1500,
        "header": 0,
        "hosts": ["s", "r"],
        "channels": [["s", "sw", 1e9, 0], ["sw", "r", 1e10, 0]],
        "window_ns": 5_000_000,
        "warmup_ns": 0,
        "duration_ns": 10_000_000,
        "conns": [],  # long-lived connections have no size, so no row
        "conn_backlog": {"a": ["be", [[0, None], [1, None]]], "b": ["gold", [[1, None, 0.6]]]},
        "vms": {"be": {"got": [625_000, 234_375]}, "gold": {"got": [0, 390_625]}},
    }
    vm = SimpleNamespace
    setup = vm(
        vms=[
            vm(id="be", host="s", purchase=vm(name="BE", guarantee=0.0, weight=1.0)),
            vm(id="gold", host="s", purchase=vm(name="G", guarantee=1.2e9, weight=2.0)),
        ],
        flows=[{"id": "a", "vm": "be", "dst": "r"}, {"id": "b", "vm": "gold", "dst": "r"}],
    )
    series = window_shares(raw, setup)  # type: ignore[arg-type]
    assert series is not None and set(series) == {"be"}  # gold is not backlogged throughout window 1
    got0, share0, _ = series["be"][0]
    got1, share1, _ = series["be"][1]
    assert abs(share0 - 1e9) < 1e3 and abs(got0 - 1e9) < 1e3
    assert abs(share1 - 0.4e9) < 1e3 and abs(got1 - 0.375e9) < 1e3


def test_the_per_vm_bar_counts_an_error_of_exactly_ten_percent_as_within() -> None:
    """Score definitions: 10 segments against a share of 100/9 is an error of exactly 10 %, within 10 %
    (its float is 0.1 + 4e-16); 9 segments is not. A VM within 10 % in 19 of its 20 windows meets the
    per-VM bar (95 %), one within in 18 of 20 does not, and ``score_series`` counts the VMs below it."""
    from types import SimpleNamespace

    from paccp.compare.distance import is_within, per_vm_within, score_series

    seg = 1460 * 8 / 0.005
    share = 100 / 9 * seg
    assert abs(10 * seg - share) / share > 0.1  # the rounding the slack is for
    assert is_within(abs(10 * seg - share) / share) and not is_within(abs(9 * seg - share) / share)
    one_miss = {k: (share if k else 9 * seg, share, share) for k in range(20)}
    two_misses = {k: (share if k > 1 else 9 * seg, share, share) for k in range(20)}
    assert per_vm_within(one_miss) == 0.95 and per_vm_within(two_misses) == 0.9
    setup = SimpleNamespace(
        vms=[SimpleNamespace(id=v, purchase=SimpleNamespace(name="BE")) for v in ("a", "b", "c")]
    )
    series = {"a": one_miss, "b": two_misses, "c": {k: (10 * seg, share, share) for k in range(20)}}
    s = score_series(series, setup)  # type: ignore[arg-type]
    assert (s["vms"], s["vms_below"]) == (3, 1)
    assert abs(s["within"] - 57 / 60) < 1e-12


def test_an_ideal_scheduler_in_whole_segments_misses_small_shares() -> None:
    """The whole-segment bound (docs/host-scheme.md, "Shares below a segment per millisecond"): a VM
    whose optimum share is 4.9 segments per window, delivered exactly in whole segments, gets 5 in nine
    windows of ten and 4 in the tenth (18 % off); at 49 segments per window every count is within 10 %."""
    from types import SimpleNamespace
    from unittest import mock

    from paccp.compare import distance

    seg_bits = 1460 * 8
    w_s = 0.005
    raw = {"window_ns": 5_000_000, "mtu": 1500, "header": 40}
    setup = SimpleNamespace(vms=[SimpleNamespace(id="small", purchase=SimpleNamespace(name="Y"))])
    for per_window, within in ((4.9, 0.9), (49.0, 1.0)):
        x = per_window * seg_bits / w_s
        series = {"small": {k: (x, x, x) for k in range(100)}}
        with mock.patch.object(distance, "window_shares", return_value=series):
            b = distance.whole_segment_bound(raw, setup)  # type: ignore[arg-type]
        assert abs(b["classes"]["Y"]["within"] - within) < 0.011, (per_window, b)


def test_the_engine_reports_what_the_hosts_law_saw() -> None:
    """The engine's ``host_law`` (what ``tools/law_counters.py`` prints): one row per VM under paccp-host,
    its law's mean rate consistent with the bottleneck it shares (the Clos file's gaming point: 4 VMs on
    one 1 Gb/s link); nothing without the host's law."""
    from paccp.sim import engine

    spec = load_spec(REPO / "scenarios" / "compare-clos-mapreduce.toml").quick()
    g = spec.cfg.gaming
    assert g is not None
    setup = gaming_setup(g, 4, 1, spec.cfg.window, spec.base.get("transport"))
    for name in ("paccp-host", "paccp-host-no-fabric"):
        resolved = resolve(Point(scenario=SCHEMES[name].build(setup), params={}), where="test").resolved
        assert resolved is not None
        res = engine.run(resolved.engine)
        if name == "paccp-host-no-fabric":
            assert res.host_law is None
            continue
        assert res.host_law is not None
        law = {str(r["vm"]): r for r in res.host_law.to_pylist()}
        assert set(law) == {v.id for v in setup.vms}
        seg_bits = (resolved.scenario.transport.mtu - resolved.scenario.transport.header) * 8
        total_bps = 0.0
        for r in law.values():
            t = r["marked_ns"] + r["unmarked_ns"] + r["unused_ns"]
            assert r["samples"] > 0 and 0 < r["marked_ns"] < t, r
            total_bps += r["law_segments"] / (r["law_ns"] / 1e9) * seg_bits
        assert 0.7 * g.rate <= total_bps <= 1.5 * g.rate, (total_bps, g.rate)


def test_the_guarantee_at_priority_sets_two_levels_with_ce_in_the_switches() -> None:
    """``paccp-host`` (docs/host-scheme.md, "The guarantee at priority"): the switches get two
    strict-priority levels sharing their link's buffer, marking CE above the law's mark; the host's
    selector gets ``prio``. Its ablation ``paccp-host-no-prio``, and the ablations without the law, keep
    the switches' drop-tail queues. ``prio = true`` asked for without the law is a one-line input error."""
    import pytest

    from paccp.errors import UserError

    spec = load_spec(REPO / "scenarios" / "compare-clos-mapreduce.toml").quick()
    g = spec.cfg.gaming
    assert g is not None
    setup = gaming_setup(g, 4, 1, spec.cfg.window, spec.base.get("transport"))
    eng: dict[str, dict[str, object]] = {}
    for name in ("paccp-host", "paccp-host-no-prio", "paccp-host-no-fabric"):
        resolved = resolve(Point(scenario=SCHEMES[name].build(setup), params={}), where="test").resolved
        assert resolved is not None
        eng[name] = resolved.engine["queues"]
    mark_ns = 50_000
    assert eng["paccp-host"]["switch"] == {
        "kind": "strict_priority",
        "levels": [eng["paccp-host"]["host"]["buffer"]] * 2,  # type: ignore[index]
        "shared_buffer": True,
        "ce_ns": mark_ns,
    }
    assert eng["paccp-host"]["host"]["selector"]["window"]["prio"] is True  # type: ignore[index]
    for name in ("paccp-host-no-prio", "paccp-host-no-fabric"):
        assert eng[name].get("switch", {"kind": "drop_tail"}) == {"kind": "drop_tail"}, name
        assert eng[name]["host"]["selector"]["window"]["prio"] is False  # type: ignore[index]
    sc = SCHEMES["paccp-host"].build(setup)
    sc["scheme"]["window"] = "cap"
    sc["scheme"]["prio"] = True
    with pytest.raises(UserError, match=r"scheme.prio: needs window = \"law\""):
        resolve(Point(scenario=sc, params={}), where="test")
