"""The optimum: SPEC section 5 worked examples as exact vectors, cvxpy cross-check, CLI errors."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from paccp.cli import app
from paccp.errors import UserError
from paccp.sim.optimum import Flow, Problem, normalized_utility, problem_from_json, solve

REL = 1e-9


def _one_link(cap: float, pairs: list[tuple[float, float]]) -> list[float]:
    flows = tuple(Flow(f"f{i}", ("L",), t, w) for i, (t, w) in enumerate(pairs))
    sol = solve(Problem(links={"L": cap}, flows=flows))
    return [sol.rates_bps[f.id] for f in flows]


def _close(got: list[float], want: list[float]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g == pytest.approx(w, rel=REL), (got, want)


B = 1e9


def test_fbp_theta_b_over_6() -> None:
    got = _one_link(B, [(0, 1)] * 3 + [(0, 2)] * 3 + [(B / 6, 2)] * 3)
    _close(got, [B / 18] * 3 + [B / 9] * 3 + [B / 6] * 3)


def test_fbp_theta_b_over_20() -> None:
    got = _one_link(B, [(0, 1)] * 3 + [(0, 2)] * 3 + [(B / 20, 2)] * 3)
    _close(got, [B / 15] * 3 + [2 * B / 15] * 3 + [2 * B / 15] * 3)


@pytest.mark.parametrize(
    ("theta_vm3", "vm_want"),
    [(B / 2, (B / 6, B / 3, B / 2)), (B / 10, (B / 4, B / 2, B / 4))],
)
def test_vbp_vm_cases(theta_vm3: float, vm_want: tuple[float, float, float]) -> None:
    # VM1: 1 BE flow (0,1); VM2: 2 DS flows sharing omega 2; VM3: 2 MRG flows sharing (theta, 1).
    pairs = [(0.0, 1.0), (0.0, 1.0), (0.0, 1.0), (theta_vm3 / 2, 0.5), (theta_vm3 / 2, 0.5)]
    got = _one_link(B, pairs)
    _close([got[0], got[1] + got[2], got[3] + got[4]], list(vm_want))
    _close(got, [vm_want[0], vm_want[1] / 2, vm_want[1] / 2, vm_want[2] / 2, vm_want[2] / 2])


def test_40g_fig4a_and_fig4c() -> None:
    g = 1e9
    got = _one_link(40 * g, [(0, 1)] * 4 + [(0, 2)] * 2 + [(2 * g, 1)] * 2)
    _close(got, [4 * g] * 4 + [8 * g] * 2 + [4 * g] * 2)
    got = _one_link(40 * g, [(0, 1)] * 4 + [(0, 2)] * 2 + [(7 * g, 2)] * 2)
    _close(got, [3.25 * g] * 4 + [6.5 * g] * 2 + [7 * g] * 2)


def test_pinned_and_prices_reported() -> None:
    g = 1e9
    flows = (Flow("be", ("L",), 0, 1), Flow("mrg", ("L",), 12 * g, 2), Flow("x", ("L", "M"), 0, 1))
    sol = solve(Problem(links={"L": 20 * g, "M": 100 * g}, flows=flows))
    assert sol.pinned == ["mrg"]
    out = sol.to_json()
    assert out["bottlenecks"]["L"]["tight"] is True
    assert out["bottlenecks"]["M"]["tight"] is False
    assert out["bottlenecks"]["M"]["price_per_gbps"] == 0.0
    assert out["bottlenecks"]["L"]["price_per_gbps"] > 0


def _cvxpy_solve(links: dict[str, float], flows: list[Flow]) -> np.ndarray:
    cp = pytest.importorskip("cvxpy")
    scale = 1e9
    x = cp.Variable(len(flows))
    w = np.array([f.omega for f in flows])
    cons = [x >= np.array([f.theta_bps / scale for f in flows])]
    for ln, c in links.items():
        rows = [i for i, f in enumerate(flows) if ln in f.route]
        if rows:
            cons.append(cp.sum(x[rows]) <= c / scale)
    prob = cp.Problem(cp.Maximize(w @ cp.log(x)), cons)
    prob.solve(solver=cp.CLARABEL, tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10, max_iter=500)
    return np.asarray(x.value) * scale


@pytest.mark.parametrize("seed", range(6))
def test_random_multilink_matches_cvxpy(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n_links = int(rng.integers(3, 8))
    links = {f"l{k}": float(rng.uniform(1, 40)) * 1e9 for k in range(n_links)}
    flows: list[Flow] = []
    for i in range(int(rng.integers(4, 15))):
        route = tuple(sorted(rng.choice(list(links), size=int(rng.integers(1, 4)), replace=False)))
        flows.append(Flow(f"f{i}", route, 0.0, float(rng.choice([0.5, 1.0, 2.0, 3.0]))))
    # lower bounds: up to 60 % of each flow's tightest per-link equal share, some flows only
    for i, f in enumerate(flows):
        if rng.random() < 0.4:
            share = min(links[ln] / sum(1 for g in flows if ln in g.route) for ln in f.route)
            flows[i] = Flow(f.id, f.route, float(rng.uniform(0.1, 1.6)) * share, f.omega)
    feasible = all(sum(f.theta_bps for f in flows if ln in f.route) < c for ln, c in links.items())
    if not feasible:
        with pytest.raises(UserError, match="infeasible"):
            solve(Problem(links=links, flows=tuple(flows)))
        return
    sol = solve(Problem(links=links, flows=tuple(flows)))
    ref = _cvxpy_solve(links, flows)
    got = np.array([sol.rates_bps[f.id] for f in flows])
    np.testing.assert_allclose(got, ref, rtol=1e-5)
    # KKT: feasibility holds to machine precision
    for ln, c in links.items():
        assert sum(sol.rates_bps[f.id] for f in flows if ln in f.route) <= c * (1 + 1e-12)
    for f in flows:
        assert sol.rates_bps[f.id] >= f.theta_bps * (1 - 1e-12)


def test_infeasible_names_link() -> None:
    flows = (Flow("a", ("L",), 6e9, 1), Flow("b", ("L",), 5e9, 1))
    with pytest.raises(UserError, match="'L'"):
        solve(Problem(links={"L": 10e9}, flows=flows))


def test_normalized_utility_definitions() -> None:
    opt = {"a": 4e9, "b": 8e9}
    w = {"a": 1.0, "b": 2.0}
    same = normalized_utility(opt, opt, w)
    assert same == {"log": 1.0, "geo": 1.0, "mean_ratio": 1.0, "reno": 1.0}
    half = normalized_utility({"a": 2e9, "b": 4e9}, opt, w)
    assert half["geo"] == pytest.approx(0.5)
    assert half["mean_ratio"] == pytest.approx(0.5)
    assert half["reno"] == pytest.approx(0.5)
    ua = math.log(2000) + 2 * math.log(4000)
    uo = math.log(4000) + 2 * math.log(8000)
    assert half["log"] == pytest.approx(ua / uo)


# ---------------------------------------------------------------- CLI


runner = CliRunner()


def _run(tmp_path: Path, obj: object | str) -> tuple[int, str]:
    p = tmp_path / "p.json"
    p.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    res = runner.invoke(app, ["optimum", str(p)])
    return res.exit_code, res.output


def test_cli_prints_rates(tmp_path: Path) -> None:
    prob = {
        "links": {"L": 40e9},
        "flows": [
            {"id": "be", "route": ["L"], "theta_bps": 0, "omega": 1},
            {"id": "mrg", "route": ["L"], "theta_bps": 30e9, "omega": 1},
        ],
    }
    code, out = _run(tmp_path, prob)
    assert code == 0, out
    res = json.loads(out)
    assert res["rates_bps"]["mrg"] == pytest.approx(30e9, rel=REL)
    assert res["rates_bps"]["be"] == pytest.approx(10e9, rel=REL)
    assert res["pinned_at_theta"] == ["mrg"]


def _cli_error(tmp_path: Path, obj: object | str) -> str:
    import subprocess
    import sys

    p = tmp_path / "p.json"
    p.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    res = subprocess.run(
        [sys.executable, "-m", "paccp.cli", "optimum", str(p)], capture_output=True, text=True, check=False
    )
    assert res.returncode == 2, res
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("paccp: error:"), res.stderr
    return lines[0]


def test_cli_errors(tmp_path: Path) -> None:
    ok_flow = {"id": "a", "route": ["L"], "theta_bps": 0, "omega": 1}
    assert "'L'" in _cli_error(
        tmp_path, {"links": {"L": 1e9}, "flows": [dict(ok_flow, theta_bps=2e9)]}
    )  # infeasible
    assert "unknown link 'M'" in _cli_error(
        tmp_path, {"links": {"L": 1e9}, "flows": [dict(ok_flow, route=["M"])]}
    )
    assert "omega" in _cli_error(tmp_path, {"links": {"L": 1e9}, "flows": [dict(ok_flow, omega=0)]})
    assert "not valid JSON" in _cli_error(tmp_path, "{not json")


def test_problem_from_json_rejects_unknown_key() -> None:
    with pytest.raises(UserError, match="unknown key"):
        problem_from_json({"links": {"L": 1}, "flows": [], "extra": 1})


def test_a_window_the_exact_solver_cannot_solve_is_scored_by_the_dual_not_dropped() -> None:
    """A leaf-spine window (53 flows, many pinned by their demand caps) on which the exact solver's
    Newton steps run off: the distance score used to drop such windows silently; it now takes the dual's
    rates, which match an independent solver (cvxpy)."""
    from paccp.compare.distance import _rates_of

    doc = json.loads((Path(__file__).parent / "data" / "optimum_newton_runaway.json").read_text())
    prob = problem_from_json(doc)
    with pytest.raises(UserError, match="not finite"):  # fails fast, LAPACK never sees a NaN
        solve(prob)
    rates = _rates_of([prob])[0]
    ref = _cvxpy_solve(prob.links, list(prob.flows))
    got = np.array([rates[f.id] for f in prob.flows])
    np.testing.assert_allclose(got, ref, rtol=1e-3)
