"""``paccp compare``: the purchase mappings, the scores, the three shipped scenarios at --quick, bad input."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from paccp.cli import main
from paccp.compare.schemes import SCHEMES, VmUse, competition_level, softbw_kind
from paccp.compare.setup import Setup, SetupVm, gaming_setup
from paccp.compare.spec import GamingCfg, Purchase
from paccp.errors import UserError
from paccp.pricing.book import load_book

REPO = Path(__file__).resolve().parents[1]
SCENARIOS = {
    "overcommit": REPO / "scenarios" / "compare-overcommit.toml",
    "leafspine": REPO / "scenarios" / "compare-leafspine-websearch.toml",
    "clos": REPO / "scenarios" / "compare-clos-mapreduce.toml",
    "overcommit-3class": REPO / "scenarios" / "compare-overcommit-3class.toml",
    "generalise-4class": REPO / "scenarios" / "compare-generalise-4class.toml",
}
BE = Purchase(name="BE")
DS = Purchase(name="DS", weight=2.0)
MRG = Purchase(name="MRG", guarantee=2_000_000_000, weight=2.0)


# -------------------------------------------------------------------------------------------------
# mappings and prices (no simulation)


def _setup() -> Setup:
    g = GamingCfg(vms=2, rate=1_000_000_000, guarantee=100_000_000, k=[1, 4])
    st = gaming_setup(g, 4, seed=1, window_ns=5_000_000)
    st.vms = [SetupVm("vm0", "s", MRG.model_copy(update={"guarantee": 300_000_000})), SetupVm("vm1", "s", DS)]
    return st


def test_each_scheme_maps_the_same_purchase_to_its_own_parameters() -> None:
    st = _setup()
    vbp = SCHEMES["paccp-vbp"].build(st)
    assert vbp["cc"] == {"kind": "paccp"}
    assert [(v["theta"], v["omega"]) for v in vbp["vms"]] == [(300_000_000, 2.0), (0, 1.0 * 2)]
    assert all(f["vm"] for f in vbp["flows"])  # VBP: the VM's pair, split by the engine
    fbp = SCHEMES["paccp-fbp"].build(st)
    pairs = {f["id"]: (f["theta"], f["omega"]) for f in fbp["flows"]}
    assert pairs["vm0.0"] == (300_000_000, 2.0) and pairs["vm1.0"] == (0, 2.0)
    assert pairs["vm0.1"] == pairs["vm0.3"] == (0, 1.0)  # the gamer's extra flows stay BE under FBP
    assert all("vm" not in f and f["label"] in ("vm0", "vm1") for f in fbp["flows"])
    sb = SCHEMES["softbw"].build(st)
    assert sb["softbw"]["guarantees"] == [
        {"vm": "vm0", "kind": "strict", "rate": 300_000_000},
        {"vm": "vm1", "kind": "fair"},
    ]
    assert sb["cc"] == {"kind": "reno"}
    mp = SCHEMES["mptcp-bgwc"].build(st)
    assert mp["scheme"]["competition_levels"] == {"vm0": 2, "vm1": 2}
    # no guarantee: one bandwidth unit U (75 Mb/s), not the port share a paying VM would not exceed
    assert [v["theta"] for v in mp["vms"]] == [300_000_000, 75_000_000]
    assert "cc" not in mp
    rl = SCHEMES["ratelimit"].build(st)
    assert rl["scheme"] == {
        "kind": "elasticswitch",
        "guarantees": {"vm0": 300_000_000, "vm1": 500_000_000},  # no guarantee: 1 Gb/s port over 2 VMs,
    }
    assert SCHEMES["tcp"].build(st)["cc"] == {"kind": "reno"}
    assert softbw_kind(BE) == "best_effort" and softbw_kind(DS) == "fair" and softbw_kind(MRG) == "strict"
    assert competition_level(Purchase(name="x", weight=2.6)) == 3


def test_mptcp_bgwc_shared_puts_both_levels_within_the_ports_one_buffer() -> None:
    """``mptcp-bgwc`` keeps its reproduction's switch (each level the port's whole buffer);
    ``mptcp-bgwc-shared`` differs from it only in ``shared_buffer``, which the engine JSON carries."""
    from paccp.sim.sweep import Point, resolve

    st = _setup()
    eng = {}
    for name in ("mptcp-bgwc", "mptcp-bgwc-shared"):
        sc = SCHEMES[name].build(st)
        assert sc["scheme"]["shared_buffer"] is (name == "mptcp-bgwc-shared")
        resolved = resolve(Point(scenario=sc, params={}), where="test").resolved
        assert resolved is not None
        eng[name] = resolved.engine["queues"]["switch"]
    levels = eng["mptcp-bgwc"]["levels"]
    assert eng["mptcp-bgwc"] == {"kind": "strict_priority", "levels": levels} and len(levels) == 2
    assert eng["mptcp-bgwc-shared"] == {"kind": "strict_priority", "levels": levels, "shared_buffer": True}


def test_each_scheme_prices_by_its_own_book_section() -> None:
    book, _ = load_book()
    assert book.vbp is not None and book.fbp is not None and book.mptcp_bgwc is not None
    vm = SetupVm("vm0", "s", MRG)
    use = VmUse(rate_bps=3e9, flow_hours=2.0, extra_flow_hours=0.0, run_hours=1.0)
    vbp = SCHEMES["paccp-vbp"].price(book, vm, use)
    assert vbp == book.vbp.p0 + book.vbp.p1 * 1 + book.vbp.p2 * 2
    fbp = SCHEMES["paccp-fbp"].price(book, vm, use)  # two flow-hours of an MRG upgrade in one hour
    assert fbp == book.vbp.p0 + 2 * (book.fbp.p0s + book.fbp.p1s + book.fbp.p2s * 2)
    assert SCHEMES["tcp"].price(book, vm, use) == book.vbp.p0
    assert book.ratelimit is not None
    assert SCHEMES["ratelimit"].price(book, vm, use) == book.ratelimit.p0 + book.ratelimit.p2 * 2
    mp = SCHEMES["mptcp-bgwc"].price(book, vm, use)
    assert mp == book.mptcp_bgwc.p0 + book.mptcp_bgwc.p1 + book.mptcp_bgwc.p2 * 2
    sb = SCHEMES["softbw"].price(book, vm, use)  # strict 2 Gb/s at r = 3: 2 (1 + 2/10) P0 + 1 (1/10) P1
    assert book.softbw is not None
    want = Decimal(2) * Decimal("1.2") * book.softbw.p0 + Decimal(1) * Decimal("0.1") * book.softbw.p1
    assert abs(sb - want) < Decimal("1e-12")
    assert SCHEMES["softbw"].price(book, SetupVm("v", "s", BE), use) == 0


# -------------------------------------------------------------------------------------------------
# the shipped scenarios at --quick


def test_shipped_comparison_files_validate_at_full_size() -> None:
    from paccp.compare.run import _point
    from paccp.compare.setup import build_setup
    from paccp.compare.spec import load_spec

    files = sorted((REPO / "scenarios").glob("compare-*.toml"))
    assert {p.name for p in files} == {p.name for p in SCENARIOS.values()}
    for p in files:
        spec = load_spec(p)
        setup = build_setup(spec, spec.cfg.points[0], spec.cfg.seeds[0])
        for name in ("paccp-vbp", "softbw"):  # every VM, flow and guarantee resolved for the engine
            _point(SCHEMES[name], setup, {}, str(p))


def test_heldout_comparison_files_validate_at_full_size() -> None:
    """The held-out files (scenarios/heldout/, docs/host-scheme.md) resolve for the engine, and none of
    them is one of the shipped files that ``paccp reproduce`` runs."""
    from paccp.compare.run import _point
    from paccp.compare.setup import build_setup
    from paccp.compare.spec import load_spec

    files = sorted((REPO / "scenarios" / "heldout").glob("compare-*.toml"))
    assert len(files) == 7 and not {p.name for p in files} & {p.name for p in SCENARIOS.values()}
    for p in files:
        spec = load_spec(p)
        for point in spec.cfg.points:
            setup = build_setup(spec, point, spec.cfg.seeds[0])
            _point(SCHEMES["paccp-host"], setup, {}, str(p))


def _compare(tmp_path: Path, name: str, workers: int = 2) -> dict[str, Any]:
    """Run a shipped comparison at --quick through the CLI (workers = 1: in this process, no pool to
    start, for scenarios whose runs take a fraction of a second)."""
    out = tmp_path / name
    main(["compare", str(SCENARIOS[name]), "--quick", "--out", str(out), "--workers", str(workers)])
    doc: dict[str, Any] = json.loads((out / "compare.json").read_text())
    assert json.loads((out / "summary.json").read_text()) == doc
    for png in ("utilisation.png", "spare.png", "consistency.png", "paid.png", "got.png", "gaming.png"):
        assert (out / png).stat().st_size > 1000, png
    assert "| scheme |" in (out / "table.md").read_text()
    return doc


def _in_unit(v: dict[str, Any]) -> bool:
    return v["mean"] is None or 0.0 <= v["mean"] <= 1.0


def test_overcommit_quick_gaming_discriminates(tmp_path: Path) -> None:
    doc = _compare(tmp_path, "overcommit", workers=1)
    g = doc["gaming"]["results"]
    tcp16, softbw16 = g["tcp"]["16"]["gain"]["mean"], g["softbw"]["16"]["gain"]["mean"]
    tcp4 = g["tcp"]["4"]["gain"]["mean"]
    # plain TCP rewards flow count (per-flow fairness: 16 of 19 flows would be 3.4x); SoftBW's per-VM
    # scheduler at the host does not
    assert tcp16 > 2.0 and tcp4 > 1.5, (tcp4, tcp16)
    assert softbw16 < 1.25, softbw16
    assert tcp16 > softbw16 + 1.0
    assert g["tcp"]["16"]["gain"]["n"] == 2  # both quick seeds
    checks = {c["statement"].split(":")[0]: c["holds"] for c in doc["checks"]}
    assert checks["plain TCP rewards flow count"] is True
    assert checks["softbw is VM-level"] is True
    # the file's bars for paccp-host ([compare.bars]) are checks too; at the host its gain is none
    bars = [c for c in doc["checks"] if c["paper"].endswith("(issue 25)")]
    gains = [c for c in bars if "opening flows" in c["statement"]]
    assert len(gains) == 3 and all(c["holds"] for c in gains), gains
    assert any("every VM under paccp-host" in c["statement"] for c in bars)
    r = doc["results"]["2x"]
    for s in ("paccp-vbp", "paccp-fbp", "softbw", "mptcp-bgwc", "ratelimit", "tcp"):
        assert _in_unit(r[s]["fail_share"]) and _in_unit(r[s]["utilisation"])
        assert r[s]["utilisation"]["mean"] > 0.9  # long-lived flows keep the NICs busy under every scheme
        assert set(r[s]["classes"]) == {"gold", "silver"}
        assert len(r[s]["per_vm"]) == 8  # per VM too, mean and CI over the seeds
        assert all(v["got_bps"]["n"] == 2 for v in r[s]["per_vm"].values())
    # guarantees over-committed 2x: every scheme fails some windows of the gold VMs (700 Mb/s)
    assert all(r[s]["classes"]["gold"]["fail_share"]["mean"] > 0 for s in r)


def test_a_second_run_takes_every_run_from_the_cache(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Resuming: the comparison's cached raw measurements are read back (not taken for damaged files)."""
    out = tmp_path / "o"
    args = ["compare", str(SCENARIOS["overcommit"]), "--quick", "--out", str(out), "--workers", "1"]
    main([*args, "--schemes", "tcp"])
    first = json.loads((out / "compare.json").read_text())
    capsys.readouterr()
    main([*args, "--schemes", "tcp"])
    second = json.loads((out / "compare.json").read_text())
    assert "unreadable" not in capsys.readouterr().err
    assert first["runs_cached"] == 0 and second["runs_cached"] == second["runs"] > 0
    assert second["results"] == first["results"]


@pytest.mark.parametrize("name", ["leafspine", "clos"])
def test_leafspine_and_clos_quick(tmp_path: Path, name: str) -> None:
    doc = _compare(tmp_path, name)
    point = doc["points"][0]
    res = doc["results"][point]
    assert doc["not_run"] == {}
    for s in ("paccp-vbp", "paccp-fbp", "softbw", "mptcp-bgwc", "ratelimit", "tcp"):
        assert _in_unit(res[s]["utilisation"]), (name, s)
        fct = res[s]["classes"]["BE"]["fct"]
        assert fct["small"]["flows"] > 0 and fct["small"]["p99_ms"]["mean"] > 0
    if name == "clos":  # job shuffle times from the flow records (paccp.traffic.mapreduce)
        assert res["tcp"]["shuffle"]["large"]["mean"] > res["tcp"]["shuffle"]["small"]["mean"] > 0
    assert "gaming" in doc and doc["gaming"]["results"]["tcp"]["16"]["gain"]["mean"] > 1.2


# -------------------------------------------------------------------------------------------------
# bad input: one line, exit code 2


def _fails(args: list[str], want: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(args)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and want in err, err


def test_a_gain_is_the_gamers_rate_over_the_mean_at_k1_seed_by_seed() -> None:
    from paccp.compare.measure import gaming_gains

    ref = {1: (100.0, 200.0), 2: (90.0, 0.0), 3: (50.0, 100.0)}
    cur = {1: (300.0, 150.0), 2: (80.0, 70.0), 3: (100.0, 50.0), 4: (1.0, 1.0)}
    # seed 2 has no rate at k = 1 and seed 4 no run at k = 1: neither counts
    assert gaming_gains(ref, cur) == [1.5, 1.0]


def test_a_scheme_set_stands_for_its_members_once() -> None:
    from paccp.compare.host_scheme import ABLATIONS
    from paccp.compare.schemes import parse_schemes

    names = [s.name for s in parse_schemes("ablations")]
    assert names == ["paccp-host", *(f"paccp-host-{n}" for n in ABLATIONS)]
    assert [s.name for s in parse_schemes("tcp, ablations")][:2] == ["tcp", "paccp-host"]
    with pytest.raises(UserError, match="'paccp-host' given twice"):
        parse_schemes("paccp-host,ablations")


def test_bad_input_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = SCENARIOS["overcommit"].read_text()
    out = str(tmp_path / "o")
    _fails(
        ["compare", str(SCENARIOS["overcommit"]), "--out", out, "--schemes", "paccp,tcp"],
        "unknown scheme 'paccp'",
        capsys,
    )
    _fails(["compare", str(tmp_path / "nope.toml"), "--out", out], "no such comparison file", capsys)
    cases = [
        ('[run]\nduration = "1ms"\n', "missing [compare] table"),
        (good.replace('name = "compare-overcommit"\n', ""), "compare.name: Field required"),
        (good + '\n[[vms]]\nid = "a"\nhost = "s0"\n', "[vms] is not allowed"),
        (good.replace('guarantee = "700Mbit"', 'guarantee = "-7Mbit"'), "compare.purchases.0.guarantee"),
        (good.replace("weight = 2\n", "weight = 0.5\n", 1), "compare.purchases.0.weight"),
        (good.replace('kind = "longlived"', 'kind = "poisson"'), "compare.traffic.kind"),
        (good.replace('hosts = ["s0", "s1"]', 'hosts = ["s9"]'), "unknown host 's9'"),
        (good.replace("k = [1, 4, 16]", "k = [4, 16]"), "k must include 1"),
        (good.replace("starts = [0, 0, 0.5, 0.75]", "starts = [0, 1.5]"), "fraction of the run"),
        (good.replace("per_host = 4\n", "per_host = 4\nracks = 2\n"), "compare.vms.racks"),
        (
            good.replace("[compare.bars]\n", '[compare.bars]\nscheme = "paccp-hots"\n'),
            "unknown scheme 'paccp-hots'",
        ),
        (good.replace("[compare.bars]\n", '[compare.bars]\npoints = ["9x"]\n'), "unknown point '9x'"),
        (good.replace("fail = 0.01\n", "fail = 2\n"), "compare.bars.fail"),
        (
            good.replace(
                '"1Gbit", delay = "10us", buffer = "200pkt" },\n  { a = "s1"',
                '"-1Gbit", delay = "10us", buffer = "200pkt" },\n  { a = "s1"',
            ),
            "topology",
        ),
    ]
    for text, want in cases:
        p = tmp_path / "bad.toml"
        p.write_text(text)
        _fails(["compare", str(p), "--out", out, "--quick"], want, capsys)
    for opts, want in [
        (["--seeds", "0"], "--seed 1 --seeds 0: seeds: 1 to 100 of them, got 0"),
        (["--seeds", "101"], "1 to 100 of them, got 101"),
        (["--seed", "-1"], "seeds must be distinct integers 0..2^63-1"),
        (["--seed", str(2**63 - 2), "--seeds", "3"], "seeds must be distinct integers 0..2^63-1"),
    ]:
        _fails(["compare", str(SCENARIOS["overcommit"]), "--out", out, *opts], want, capsys)
    assert not (tmp_path / "o").exists()


def test_other_seeds_are_one_option_away(tmp_path: Path) -> None:
    """``--seed FIRST --seeds N`` runs FIRST .. FIRST + N - 1 (after --quick); either alone keeps the file's
    first seed or its number of seeds."""
    from paccp.compare.spec import load_spec

    spec = load_spec(SCENARIOS["overcommit"])
    assert spec.cfg.seeds == [1, 2, 3]
    assert spec.with_seeds(None, None) is spec
    assert spec.with_seeds(4, None).cfg.seeds == [4, 5, 6]
    assert spec.with_seeds(None, 5).cfg.seeds == [1, 2, 3, 4, 5]
    assert spec.with_seeds(7, 2).cfg.seeds == [7, 8] and spec.cfg.seeds == [1, 2, 3]
    out = tmp_path / "o"
    args = ["--quick", "--schemes", "tcp", "--seed", "4", "--seeds", "2", "--workers", "1"]
    main(["compare", str(SCENARIOS["overcommit"]), *args, "--out", str(out)])
    doc = json.loads((out / "compare.json").read_text())
    assert doc["seeds"] == [4, 5]
    rows = (out / "runs.csv").read_text().splitlines()
    assert {r.split(",")[2] for r in rows[1:]} == {"4", "5"}


def test_the_table_shows_the_vms_below_the_per_vm_bar() -> None:
    """The main table's column of the issue's per-VM bar: the VMs within 10 % of their optimum share in
    fewer than 95 % of their windows, mean ± CI over seeds, of the VMs scored; "–" for a run without
    the distance score."""
    from paccp.report.tables import score_rows

    bare = {"classes": {}, "utilisation": None}
    r = {**bare, "distance_vms": 120, "distance_vms_below": {"mean": 1.0, "ci95": 0.5}}
    doc = {"purchases": [], "schemes": ["a", "b"], "results": {"p": {"a": r, "b": bare}}}
    header, rows = score_rows(doc, "p")
    col = header.index("VMs < 95 % within")
    assert [row[col] for row in rows] == ["1.0 ± 0.5 of 120", "–"]


def test_a_files_bars_are_checks_that_can_fail() -> None:
    """``[compare.bars]`` (paccp.compare.bars): one check per bar on the means over seeds, every-link
    feasibility where scored, else the NIC's; a bar that is missed says so; nothing to score (no
    feasible window, no plain TCP to compare with) gives no check; unknown points are input errors."""
    from paccp.compare.bars import bar_checks
    from paccp.compare.spec import BarsCfg, CompareCfg

    def m(v: float) -> dict[str, float]:
        return {"mean": v, "ci95": 0.0}

    def res(
        fail: float | None, fabric: float | None, p99: float, util: float, shuffle: float, below: float = 0.0
    ) -> dict[str, Any]:
        return {
            "classes": {
                "G": {
                    "fail_share_feasible": None if fail is None else m(fail),
                    "fail_share_fabric": None if fabric is None else m(fabric),
                },
                "BE": {"fct": {"small": {"p99_ms": m(p99)}}},
            },
            "distance_vms": 4,
            "distance_vms_below": m(below),
            "utilisation": m(util),
            "shuffle": {"all": m(shuffle)},
        }

    bars = BarsCfg(per_vm=True, be_p99=1.1, util_points=2, shuffle=True).model_dump()
    doc: dict[str, Any] = {
        "purchases": [{"name": "G", "guarantee": 1}, {"name": "BE", "guarantee": 0}],
        "points": ["a", "b", "c"],
        "bars": bars,
        "results": {
            # met: NIC 3 % but every link 0.5 %; p99 1.0x; 1.5 points below; shuffle equal
            "a": {"paccp-host": res(0.03, 0.005, 2.0, 0.485, 0.010), "tcp": res(0.3, 0.3, 2.0, 0.5, 0.010)},
            # missed: no every-link score, NIC 2 %; p99 1.2x; 2.5 points below; shuffle slower
            # (and one VM of four below in one seed of three)
            "b": {
                "paccp-host": res(0.02, None, 2.4, 0.475, 0.011, 1 / 3),
                "tcp": res(0.3, None, 2.0, 0.5, 0.010),
            },
            # no feasible window; no plain TCP
            "c": {"paccp-host": res(None, None, 2.0, 0.5, 0.01)},
        },
        "gaming": {
            "where": "host",
            "results": {"paccp-host": {"1": {"gain": m(1.0)}, "16": {"gain": m(1.2)}}},
        },
    }
    got = [(c["statement"].split(":")[0], c["holds"]) for c in bar_checks(doc)]
    assert got == [("a", True)] * 5 + [("b", False)] * 5 + [("c", True)] + [
        ("paccp-host gains nothing from opening flows (host bottleneck)", True),
        ("paccp-host gains nothing from opening flows (host bottleneck)", False),
    ]
    checks = bar_checks(doc)
    assert "at every link" in checks[0]["statement"] and "the sender's NIC" in checks[5]["statement"]
    assert checks[7]["ours"] == "2.40 vs 2.00 ms (1.20x)" and checks[7]["paper"] == "<= 1.1x (issue 25)"
    assert bar_checks({**doc, "bars": None}) == []
    assert [c["holds"] for c in bar_checks({**doc, "bars": {**bars, "points": ["a"], "gain": None}})] == [
        True
    ] * 5
    base = json.loads(
        json.dumps({"name": "x", "purchases": [{"name": "G"}], "traffic": {"kind": "longlived"}})
    )
    with pytest.raises(ValueError, match=r"bars\.points: unknown point 'z'"):
        CompareCfg.model_validate({**base, "bars": {"points": ["z"]}})
