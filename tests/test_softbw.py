"""SoftBW: the interval model's allocation rule, the analytic failure formula, dynamic jobs, the [softbw]
scenario schema, and softbw-oc / softbw-price at --quick scale."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from paccp.cli import main
from paccp.common.usage import read_usage
from paccp.errors import UserError
from paccp.experiments import ExperimentOptions, load_all
from paccp.scenario import parse_scenario
from paccp.softbw.model import DYNAMIC, STRICT, allocate, analytic_failure, fill_to_level, simulate


def test_fill_to_level_is_max_min_with_floors() -> None:
    low = np.array([[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [4.5, 2.0, 1.0], [1.0, 1.0, 1.0]])
    high = np.array([[1.0, 2.0, 3.0], [5.0, 5.0, 5.0], [9.0, 9.0, 9.0], [1.0, 1.0, 1.0]])
    r = fill_to_level(low, high, np.array([4.0, 6.0, 10.0, 10.0]))
    np.testing.assert_allclose(r, [[1.0, 1.5, 1.5], [2.0, 2.0, 2.0], [4.5, 2.75, 2.75], [1.0, 1.0, 1.0]])


def test_allocate_properties_on_random_hosts() -> None:
    """Work conserving, guarantees first, equal rates among the VMs short of what they are owed."""
    rng = np.random.default_rng(3)
    d = rng.exponential(3.0, size=(5000, 4)) * (rng.random((5000, 4)) < 0.7)
    b = rng.choice([0.0, 1.0, 2.5, 4.0], size=(5000, 4))
    cap = np.full(5000, 10.0)
    r = allocate(d, b, cap)
    assert np.all(r <= d + 1e-9) and np.all(r >= -1e-12)
    np.testing.assert_allclose(r.sum(1), np.minimum(d.sum(1), cap), rtol=1e-9, atol=1e-9)
    owed = np.minimum(d, b)
    fits = owed.sum(1) <= cap
    assert np.all(r[fits] >= owed[fits] - 1e-9)  # every guarantee met when they fit
    # over-committed: the VMs that got less than owed all got the same rate, and nobody got more than owed
    for i in np.nonzero(~fits)[0]:
        short = r[i] < owed[i] - 1e-9
        assert short.any() and np.ptp(r[i][short]) < 1e-9
        assert np.all(r[i] <= owed[i] + 1e-9) and np.all(r[i][~short] <= r[i][short].max() + 1e-9)


def test_allocation_examples() -> None:
    cap = np.array([10.0])
    cases = [  # (demand, guarantee, expected): spare shared on the total; overload max-min up to B
        ([10.0, 10, 1], [4.0, 4, 4], [4.5, 4.5, 1]),
        ([10.0, 10, 10], [8.0, 4, 4], [10 / 3, 10 / 3, 10 / 3]),
        ([10.0, 10, 2], [8.0, 4, 4], [4, 4, 2]),
        ([10.0, 0, 1], [4.0, 4, 0], [9, 0, 1]),
        ([10.0, 10, 10], [4.5, 2, 1], [4.5, 2.75, 2.75]),
    ]
    for d, b, want in cases:
        np.testing.assert_allclose(allocate(np.array([d]), np.array([b]), cap), [want])


INF = math.inf
# (guarantees, demands) in Mb/s on a 1 Gb/s port; inf = always backlogged
PORT_CASES = [
    ([450, 450], [INF, INF]),
    ([450, 450, 450], [INF, INF, INF]),
    ([600, 600, 300], [INF, INF, INF]),
    ([800, 400], [INF, INF]),
    ([450, 450, 450], [200, INF, INF]),
    ([600, 200, 0], [INF, INF, INF]),
    ([450, 200, 100], [INF, INF, INF]),
    ([450, 450, 0, 0], [300, INF, INF, 100]),
    ([250, 250, 250, 250], [400, INF, 50, INF]),
]


@pytest.mark.parametrize(("b", "d"), PORT_CASES)
def test_fluid_rule_matches_the_packet_rule(b: list[float], d: list[float]) -> None:
    """The interval model's allocation is where the packet-by-packet fulfilment rule ends up."""
    from softbw_packet_ref import port_rates

    m = 1e6
    ref = port_rates(1e9, [x * m for x in b], [x * m for x in d])
    demand = np.array([[1e12 if math.isinf(x) else x * m for x in d]])
    fluid = allocate(demand, np.array([[x * m for x in b]]), np.array([1e9]))[0]
    np.testing.assert_allclose(ref, fluid, rtol=0.0, atol=1e6)  # within 1 Mb/s of 1 Gb/s
    # stamping departures at the start of serialisation changes only how the spare is shared above the
    # guarantees: what is owed, min(d, B) max-min, is still delivered, and the port stays busy
    start = np.array(port_rates(1e9, [x * m for x in b], [x * m for x in d], stamp="start"))
    guar = np.array([[x * m for x in b]])
    owed = fill_to_level(np.zeros_like(guar), np.minimum(demand, guar), np.array([1e9]))[0]
    assert np.all(start >= owed - 1e6), (start, owed)
    assert abs(start.sum() - fluid.sum()) < 1e6


@pytest.mark.parametrize(("n", "rho", "delta"), [(4, 0.1, 4.0), (4, 0.3, 2.0), (2, 0.2, 3.0), (1, 0.5, 1.0)])
def test_analytic_failure_is_the_erlang_tail(n: int, rho: float, delta: float) -> None:
    from scipy.stats import gamma

    # total demand of n exponentials of mean rho * delta * C / n exceeds C
    want = gamma.sf(1.0, a=n, scale=rho * delta / n)
    assert math.isclose(analytic_failure(n, rho, delta), want, rel_tol=1e-12)


def test_dynamic_jobs_late_and_on_time() -> None:
    """Two dynamic VMs of B = 6 on a port of 10; both need 6 for 10 s: one job must run late."""
    t = 20
    d = np.zeros((t, 1, 2))
    d[:10, 0, :] = 6.0  # 60 units each in the first block
    run = simulate(np.array([10.0]), np.full((1, 2), DYNAMIC, dtype=np.int64), np.full((1, 2), 6.0), d,
                   job_window=10)  # fmt: skip
    j = run.jobs
    assert len(j.host) == 2 and np.allclose(j.size_bits, 60.0)
    assert np.all(j.finish_s > j.deadline_s)  # 120 units through 10/s: both finish at 12 s
    np.testing.assert_allclose(j.finish_s, [12.0, 12.0])
    # with room for both they are on time and finish early (work conserving on the backlog)
    run = simulate(np.array([20.0]), np.full((1, 2), DYNAMIC, dtype=np.int64), np.full((1, 2), 6.0), d,
                   job_window=10)  # fmt: skip
    assert np.all(run.jobs.finish_s <= run.jobs.deadline_s)
    np.testing.assert_allclose(run.jobs.finish_s, [6.0, 6.0])


def test_strict_guarantee_holds_when_not_overcommitted() -> None:
    rng = np.random.default_rng(1)
    d = rng.exponential(3.0, size=(200, 50, 4))
    run = simulate(np.full(50, 10.0), np.full((50, 4), STRICT, dtype=np.int64), np.full((50, 4), 2.5), d)
    assert np.all(run.rate_bps >= np.minimum(d, 2.5) - 1e-9)


# -------------------------------------------------------------------------------------------------
# scenario schema

_BASE: dict[str, Any] = {
    "topology": {"kind": "dumbbell", "left_hosts": 2, "right_hosts": 2, "bottleneck_rate": "10Gbit"},
    "vms": [{"id": "a", "host": "l0"}, {"id": "b", "host": "l1"}],
    "flows": [{"id": "f", "src": "l0", "dst": "r0", "vm": "a"}],
}


def _with(softbw: dict[str, Any]) -> dict[str, Any]:
    return {**_BASE, "softbw": softbw}


def test_softbw_schema_accepts_every_kind() -> None:
    sc = parse_scenario(
        _with(
            {
                "overcommit": 2,
                "guarantees": [
                    {"vm": "a", "kind": "strict", "rate": "6Gbit"},
                    {"vm": "b", "kind": "dynamic", "size": "100MB", "deadline": "100ms"},
                ],
            }
        )
    )
    assert sc.softbw is not None and sc.softbw.guarantees[1].sold_bps == pytest.approx(8e9)
    for kind in ("fair", "best_effort"):
        parse_scenario(_with({"guarantees": [{"vm": "a", "kind": kind}]}))


@pytest.mark.parametrize(
    ("softbw", "message"),
    [
        (
            {"guarantees": [{"vm": "a", "kind": "strict", "rate": "0Gbit"}]},
            "strict guarantee needs rate B > 0",
        ),
        ({"guarantees": [{"vm": "a", "kind": "strict"}]}, "strict guarantee needs rate B > 0"),
        ({"overcommit": 0.5}, "over-commitment must be >= 1"),
        ({"host_overcommit": {"l0": 0.9}}, "over-commitment must be >= 1"),
        ({"overcommit": float("inf")}, "softbw.overcommit: Input should be a finite number"),
        ({"guarantees": [{"vm": "a", "kind": "gold"}]}, "unknown guarantee kind 'gold'"),
        (
            {"guarantees": [{"vm": "a", "kind": "dynamic", "size": "1MB"}]},
            "needs size S > 0 and deadline T > 0",
        ),
        ({"guarantees": [{"vm": "zz", "kind": "fair"}]}, "unknown VM 'zz'"),
        ({"guarantees": [{"vm": "a", "kind": "strict", "rate": "11Gbit"}]}, "above N x port"),
        ({"host_overcommit": {"nope": 2}}, "unknown host 'nope'"),
    ],
)
def test_softbw_schema_rejects_bad_input(softbw: dict[str, Any], message: str) -> None:
    with pytest.raises(UserError, match=message.replace("(", r"\(")) as exc:
        parse_scenario(_with(softbw))
    assert "\n" not in str(exc.value)


def test_bad_softbw_scenario_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "bad.toml"
    base = (
        '[topology]\nkind = "dumbbell"\nleft_hosts = 1\nright_hosts = 1\nbottleneck_rate = "10Gbit"\n'
        '[[vms]]\nid = "a"\nhost = "l0"\n'
        '[[flows]]\nid = "f"\nsrc = "l0"\ndst = "r0"\nvm = "a"\n'
    )
    cases = [
        ("[softbw]\noverit = 1\n", "softbw.overit: unknown key"),
        ("[softbw]\novercommit = 0.5\n", "over-commitment must be >= 1"),
        (
            '[[softbw.guarantees]]\nvm = "a"\nkind = "strict"\nrate = "0Gbit"\n',
            "strict guarantee needs rate B > 0",
        ),
        ('[[softbw.guarantees]]\nvm = "a"\nkind = "strict"\nrate = "-1Gbit"\n', "must not be negative"),
        ('[[softbw.guarantees]]\nvm = "a"\nkind = "platinum"\n', "unknown guarantee kind 'platinum'"),
    ]
    for text, want in cases:
        p.write_text(base + text)
        with pytest.raises(SystemExit) as exc:
            main(["run", str(p), "--out", str(tmp_path / "out")])
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and want in err, err
    assert not (tmp_path / "out").exists()


# -------------------------------------------------------------------------------------------------
# experiments at --quick scale


@pytest.fixture(scope="module")
def quick(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("softbw")
    reg = load_all()
    for exp in ("softbw-oc", "softbw-price", "softbw-share", "softbw-short", "softbw-converge"):
        reg[exp].run(ExperimentOptions(out_dir=out, seed=1, quick=True))
    return out


def _checks(out: Path, exp: str) -> list[dict[str, Any]]:
    summary = json.loads((out / exp / "summary.json").read_text())
    checks: list[dict[str, Any]] = summary["checks"]
    assert checks and all({"statement", "paper", "ours", "holds"} <= set(c) for c in checks)
    return checks


def test_softbw_oc_quick(quick: Path) -> None:
    out = quick / "softbw-oc"
    for f in ("results.csv", "analytic.csv", "table.md", "utilisation.png", "failures.png", "analytic.png"):
        assert (out / f).is_file(), f
    checks = {c["statement"].split(" (")[0]: c for c in _checks(quick, "softbw-oc")}
    analytic = next(c for s, c in checks.items() if s.startswith("simulated overload probability"))
    assert analytic["holds"] is True, analytic
    gain = checks["[exponential] utilisation gain 4x over 1x at least 3.5"]
    assert gain["holds"] is True, gain


def test_softbw_price_quick(quick: Path) -> None:
    out = quick / "softbw-price"
    checks = _checks(quick, "softbw-price")
    totals = [c for c in checks if "invoice" in c["statement"]]
    assert len(totals) == 2 and all(c["holds"] for c in totals), totals
    late = next(c for c in checks if "missed its deadline" in c["statement"])
    assert late["holds"] is True, late  # h1 sells 18 Gb/s on 10: some dynamic job is late at quick scale too
    assert all(c["holds"] is not False for c in checks), checks
    recs = list(read_usage(out / "run" / "usage.jsonl"))
    assert {r.guarantee for r in recs} == {"strict", "dynamic", "fair", "none"}
    inv = json.loads((out / "summary.json").read_text())["invoices"]
    assert set(inv) == {"acme", "globex"} and all(float(v["total"]) > 0 for v in inv.values())
    assert (out / "rates.png").is_file() and (out / "invoice-globex.csv").is_file()


def test_softbw_consistency_flags_overbilling(quick: Path, tmp_path: Path) -> None:
    """The check can fail: bill a strict VM for 1.5x the bytes it got and it pays more than it gets."""
    import shutil

    from paccp.common.usage import write_usage
    from paccp.pricing.book import load_book
    from paccp.pricing.softbw_consistency import softbw_consistency

    run = tmp_path / "run"
    shutil.copytree(quick / "softbw-price" / "run", run)
    book, _ = load_book()
    before = {v.vm: v for v in softbw_consistency(run, book)}
    assert not any(v.flagged for v in before.values())
    recs = [
        r.model_copy(update={"bytes": r.bytes * 3 // 2}) if r.vm == "globex-strict-a" else r
        for r in read_usage(run / "usage.jsonl")
    ]
    write_usage(recs, run / "usage.jsonl")
    after = {v.vm: v for v in softbw_consistency(run, book)}
    assert after["globex-strict-a"].flagged
    assert [vm for vm, v in after.items() if v.flagged] == ["globex-strict-a"]


def test_softbw_share_quick(quick: Path) -> None:
    """Packet-level SoftBW in the engine: guarantees met with 2 VMs, equal fulfilment with 3 (1, 2, 4 flows),
    best effort by flow count; on both fabrics."""
    checks = _checks(quick, "softbw-share")
    assert len(checks) == 10 and all(c["holds"] is True for c in checks), checks
    pts = json.loads((quick / "softbw-share" / "summary.json").read_text())["points"]
    be = next(p for p in pts if p["vms"] == 2 and p["scheme"] == "best_effort")
    assert be["rate_bps"][1] > 2 * be["rate_bps"][0]  # 3 flows vs 1 under FIFO
    # ElasticSwitch-style, 3 VMs over-committed: pairs (1, 2, 4) at their guarantees, shared per pair
    es = next(p for p in pts if p["vms"] == 3 and p["scheme"] == "elasticswitch")
    assert es["rate_bps"][0] < es["rate_bps"][1] < es["rate_bps"][2], es


def test_softbw_short_quick(quick: Path) -> None:
    """Short flows finish faster under SoftBW than under the 50 ms rate limiters (ratio CI above 1)."""
    out = quick / "softbw-short"
    checks = _checks(quick, "softbw-short")
    faster = next(c for c in checks if "faster" in c["statement"])
    assert faster["holds"] is True, faster
    done = next(c for c in checks if "completes" in c["statement"])
    assert done["holds"] is True, done
    ratio = json.loads((out / "summary.json").read_text())["ratio"]["all"]
    assert len(ratio["per_seed"]) == 3 and ratio["ci95"][0] <= ratio["mean"] <= ratio["ci95"][1]
    assert (out / "fct.png").is_file() and (out / "table.md").is_file()


def test_softbw_converge_quick(quick: Path) -> None:
    """SoftBW settles within 40 ms of every join and leave (TCP and UDP); the limiters take longer."""
    out = quick / "softbw-converge"
    checks = _checks(quick, "softbw-converge")
    assert len(checks) == 4
    assert all(c["holds"] is True for c in checks if c["statement"].startswith("SoftBW")), checks
    summary = json.loads((out / "summary.json").read_text())
    assert "second half of the epoch" in summary["definition"]
    for p in summary["points"]:
        assert [e["event"] for e in p["events"]] == ["vm1 joins", "vm2 joins", "vm1 leaves", "vm2 leaves"]
    assert (out / "rates.png").is_file()


def test_elasticswitch_engine_input_and_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """[scheme] elasticswitch: per-VM-pair limiters keyed by destination host; B <= 0 is a one-line error."""
    from paccp.scenario import to_engine

    spec = {
        **_BASE,
        "vms": [{"id": "a", "host": "l0"}, {"id": "b", "host": "l0"}],
        "flows": [
            {"id": "f0", "src": "l0", "dst": "r0", "vm": "a"},
            {"id": "f1", "src": "l0", "dst": "r0", "vm": "b"},
        ],
        "scheme": {"kind": "elasticswitch", "guarantee": "2Gbit", "guarantees": {"b": "1Gbit"}},
    }
    q = to_engine(parse_scenario(spec))["queues"]["host"]
    sel = q["selector"]
    assert q["kind"] == "per_vm" and sel["kind"] == "elasticswitch"
    assert sel["guarantees"] == {"a": 2_000_000_000, "b": 1_000_000_000}
    assert [p["dst"] for p in sel["flow_pairs"]] == [
        2,
        2,
    ]  # host index of r0 (l0, l1, r0, r1) and sel["gp_period_ns"] == 50_000_000
    p = tmp_path / "bad.toml"
    base = (
        '[topology]\nkind = "dumbbell"\nleft_hosts = 1\nright_hosts = 1\nbottleneck_rate = "10Gbit"\n'
        '[[vms]]\nid = "a"\nhost = "l0"\n'
        '[[flows]]\nid = "f"\nsrc = "l0"\ndst = "r0"\nvm = "a"\n'
    )
    for text, want in [
        ('[scheme]\nkind = "elasticswitch"\nguarantee = "0Mbit"\n', "the guarantee B must be > 0"),
        ('[scheme]\nkind = "elasticswitch"\n', "has no guarantee B"),
        ('[scheme]\nkind = "elasticswitch"\nguarantee = "1Gbit"\nmd = 1.5\n', "md"),
    ]:
        p.write_text(base + text)
        with pytest.raises(SystemExit) as exc:
            main(["run", str(p), "--out", str(tmp_path / "out")])
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and want in err, err


def test_softbw_engine_input() -> None:
    """[softbw] becomes per-VM queues with the softbw selector; fair = port / VMs on the host."""
    from paccp.scenario import to_engine

    spec = {
        **_BASE,
        "vms": [{"id": "a", "host": "l0"}, {"id": "b", "host": "l0"}, {"id": "c", "host": "l0"}],
        "softbw": {
            "overcommit": 2,
            "guarantees": [
                {"vm": "a", "kind": "strict", "rate": "4Gbit"},
                {"vm": "b", "kind": "fair"},
                {"vm": "c", "kind": "dynamic", "size": "10MB", "deadline": "100ms", "start": "5ms"},
            ],
        },
    }
    q = to_engine(parse_scenario(spec))["queues"]["host"]
    assert q["kind"] == "per_vm" and q["selector"]["kind"] == "softbw"
    g = q["selector"]["guarantees"]
    assert g["a"] == {"kind": "strict", "rate_bps": 4_000_000_000}
    assert g["b"] == {"kind": "strict", "rate_bps": 10_000_000_000 // 3}
    assert g["c"] == {
        "kind": "dynamic",
        "size_bytes": 10_000_000,
        "start_ns": 5_000_000,
        "deadline_ns": 105_000_000,
    }
    assert "queues" not in to_engine(parse_scenario(_BASE))
