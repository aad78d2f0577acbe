"""Property-based suite (Hypothesis) over the scenario, CDF and optimum parsers and the CLI entry points
``run``, ``optimum``, ``report`` and ``sweep``: for generated hostile inputs the result is a success or exit 2
with one line on stderr, never a traceback, and nothing is left behind on failure.

Deterministic in ``make test`` (``derandomize``); ``PACCP_HYPOTHESIS=explore`` runs many more random
examples: ``PACCP_HYPOTHESIS=explore .venv/bin/pytest -q tests/test_hardening_props.py``.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from paccp.cli import main
from paccp.errors import UserError
from paccp.scenario import load_scenario, parse_scenario, to_engine
from paccp.sim import optimum as opt
from paccp.traffic.workload import load_cdf, parse_cdf

settings.register_profile(
    "ci", derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow], max_examples=60
)
settings.register_profile(
    "explore", deadline=None, suppress_health_check=[HealthCheck.too_slow], max_examples=2000
)
settings.load_profile(os.environ.get("PACCP_HYPOTHESIS", "ci"))
SCALE = 30 if os.environ.get("PACCP_HYPOTHESIS") == "explore" else 1


def n(examples: int) -> int:
    """Examples for a slow test (engine runs, solver): small in make test, 30x when exploring."""
    return examples * SCALE


BASE: dict[str, Any] = {
    "run": {"duration": "4ms", "warmup": "1ms", "seed": 1},
    "topology": {"kind": "dumbbell", "left_hosts": 2, "right_hosts": 2, "bottleneck_rate": "10Gbit"},
    "billing": {"epoch": "2026-11-01T00:00:00Z", "tenant": "acme"},
    "vms": [{"id": "vm0", "host": "l1", "theta": "1Gbit", "omega": 2.0, "cos": "mrg"}],
    "flows": [
        {"id": "a", "src": "l0", "dst": "r0", "omega": 1.0, "label": "BE"},
        {"id": "b", "src": "l1", "dst": "r1", "vm": "vm0", "size": "100KB"},
    ],
    "arrivals": [{"workload": "websearch", "load": 0.05, "stop": "3ms", "sources": ["l0"]}],
}
PATHS: list[tuple[Any, ...]] = [
    ("run", "duration"),
    ("run", "warmup"),
    ("run", "seed"),
    ("run", "sample_interval"),
    ("run", "sample_flows"),
    ("transport", "mtu"),
    ("transport", "init_cwnd"),
    ("transport", "min_rto"),
    ("transport", "host_fq"),
    ("cc", "rcos"),
    ("cc", "min_cwnd"),
    ("topology", "left_hosts"),
    ("topology", "bottleneck_rate"),
    ("topology", "bottleneck_buffer"),
    ("topology", "access_delay"),
    ("topology", "nic_buffer"),
    ("billing", "epoch"),
    ("billing", "tenant"),
    ("vms", 0, "theta"),
    ("vms", 0, "omega"),
    ("vms", 0, "cos"),
    ("vms", 0, "id"),
    ("flows", 0, "theta"),
    ("flows", 0, "omega"),
    ("flows", 0, "size"),
    ("flows", 0, "start"),
    ("flows", 0, "label"),
    ("flows", 0, "id"),
    ("flows", 0, "src"),
    ("flows", 0, "cos"),
    ("flows", 0, "deadline"),
    ("flows", 0, "tenant"),
    ("flows", 1, "vm"),
    ("arrivals", 0, "load"),
    ("arrivals", 0, "rate_per_s"),
    ("arrivals", 0, "workload"),
    ("arrivals", 0, "max_flows"),
    ("arrivals", 0, "stop"),
    ("arrivals", 0, "id_prefix"),
]
TOKENS = [
    "10Gbit", "-1Gbit", "1e400Gbit", "1e999999999bit", "nan", "inf", "", " ", "0", "20us", "100pkt", "-5pkt",
    "1.5MB", "1e30B", "2000d", "[/]", "[red]x[/]", "a\x00b", "x" * 300, "\udcff", "1900-01-01T00:00:00Z",
    "9999-01-01T00:00:00Z", "2026-11-01T00:00:00Z", "mrg", "be", "ds", "websearch", "/", "/dev/null", "all",
]  # fmt: skip
HOSTILE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.integers(min_value=10**300, max_value=10**400),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(TOKENS),
    st.text(max_size=12),
    st.lists(st.integers(min_value=-3, max_value=3), max_size=3),
    st.dictionaries(
        st.sampled_from(["packets", "bytes", "x"]), st.integers(min_value=-5, max_value=10**20), max_size=2
    ),
)


def _put(doc: dict[str, Any], path: tuple[Any, ...], value: Any) -> None:
    """``doc[path] = value``, making missing tables; a path through a missing list item is skipped."""
    cur: Any = doc
    for p in path[:-1]:
        if isinstance(p, int):
            if not isinstance(cur, list) or p >= len(cur):
                return
            cur = cur[p]
        elif isinstance(cur, dict):
            cur = cur.setdefault(p, {})
        else:
            return
    last = path[-1]
    fits = isinstance(cur, list) and isinstance(last, int) and last < len(cur)
    if fits or (isinstance(cur, dict) and isinstance(last, str)):
        cur[last] = value


def mutated(base: dict[str, Any], paths: list[tuple[Any, ...]]) -> Any:
    """Documents like ``base`` with one to three of ``paths`` set to hostile values."""

    @st.composite
    def gen(draw: st.DrawFn) -> dict[str, Any]:
        doc = copy.deepcopy(base)
        for _ in range(draw(st.integers(min_value=1, max_value=3))):
            _put(doc, draw(st.sampled_from(paths)), draw(HOSTILE))
        return doc

    return gen()


def scenarios() -> Any:
    """A valid scenario with one to three fields replaced by hostile values."""
    return mutated(BASE, PATHS)


def _ints_and_floats(o: Any) -> list[Any]:
    if isinstance(o, dict):
        return [x for v in o.values() for x in _ints_and_floats(v)]
    if isinstance(o, list):
        return [x for v in o for x in _ints_and_floats(v)]
    return [o] if isinstance(o, int | float) and not isinstance(o, bool) else []


@given(scenarios())
def test_scenario_parser(doc: dict[str, Any]) -> None:
    """A UserError, or an engine input whose integers fit u64 (and ns in ps) and whose floats are finite."""
    try:
        sc = parse_scenario(doc)
    except UserError:
        return
    eng = to_engine(sc)
    json.dumps(eng, allow_nan=False)
    for x in _ints_and_floats(eng):
        assert math.isfinite(x) and (not isinstance(x, int) or 0 <= x < 2**63)
    assert eng["duration_ns"] * 1000 < 2**64


@given(
    st.one_of(
        st.binary(max_size=300), st.text(max_size=300).map(lambda t: t.encode("utf-8", "surrogatepass"))
    )
)
def test_scenario_file(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "s.toml"
        p.write_bytes(data)
        with contextlib.suppress(UserError):
            load_scenario(p)


NUM_TOKEN = st.one_of(
    st.sampled_from(["0", "1", "100", "1e9", "1e300", "nan", "inf", "-1", "1.5", "100.0", "x", "1e16"]),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(min_value=-10, max_value=10**20).map(str),
)
CDF_LINE = st.one_of(
    st.tuples(NUM_TOKEN, NUM_TOKEN).map(" ".join),
    st.sampled_from(["# comment", "", "1 2 3", "\t100\t0.5"]),
    st.text(max_size=10),
)


@given(st.lists(CDF_LINE, max_size=8))
def test_cdf_parser(lines: list[str]) -> None:
    """A UserError, or a monotone CDF on 0..1 with a finite mean of at least one byte."""
    try:
        cdf = parse_cdf("\n".join(lines), name="gen")
    except UserError:
        return
    assert math.isfinite(cdf.mean_bytes) and cdf.mean_bytes >= 1
    assert all(0 <= f <= 1 for _, f in cdf.points)
    assert all(a[0] <= b[0] and a[1] <= b[1] for a, b in zip(cdf.points, cdf.points[1:], strict=False))


@given(st.binary(max_size=200))
def test_cdf_file(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "w.cdf"
        p.write_bytes(data)
        with contextlib.suppress(UserError):
            load_cdf(p)


JSON_LEAF = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=5),
)
JSONISH = st.recursive(
    JSON_LEAF,
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3),
    max_leaves=8,
)


@st.composite
def problems(draw: st.DrawFn) -> Any:
    doc: dict[str, Any] = {
        "links": {"a": 10e9, "b": 40e9},
        "flows": [
            {"id": "x", "route": ["a"], "theta_bps": 0, "omega": 1},
            {"id": "y", "route": ["a", "b"], "theta_bps": 2e9, "omega": 2},
        ],
    }
    for _ in range(draw(st.integers(min_value=0, max_value=3))):
        where = draw(
            st.sampled_from(["links.a", "links.c", "f.id", "f.route", "f.theta_bps", "f.omega", "f.k", "top"])
        )
        value = draw(JSONISH)
        if where == "top":
            doc[draw(st.sampled_from(["links", "flows", "extra"]))] = value
        elif where.startswith("links."):
            if isinstance(doc.get("links"), dict):
                doc["links"][where[6:]] = value
        elif isinstance(doc.get("flows"), list) and doc["flows"] and isinstance(doc["flows"][0], dict):
            doc["flows"][0][where[2:]] = value
    return doc


def _check_solution(p: opt.Problem, sol: opt.Solution) -> None:
    for ln, load in sol.loads_bps.items():
        assert load <= p.links[ln] * (1 + opt.FEASIBILITY_REL)
    for f in p.flows:
        x = sol.rates_bps[f.id]
        assert math.isfinite(x) and x > 0 and x >= f.theta_bps * (1 - 1e-12)


@given(problems())
def test_optimum_parser_and_solver(doc: Any) -> None:
    """A UserError, or a feasible answer."""
    try:
        p = opt.problem_from_json(doc)
        sol = opt.solve(p)
    except UserError:
        return
    _check_solution(p, sol)


LOG_CAP = st.floats(min_value=math.log10(1.6e6), max_value=math.log10(776e9))
LOG_OMEGA = st.floats(min_value=-3, max_value=math.log10(400))


@st.composite
def wide_problems(draw: st.DrawFn) -> opt.Problem:
    m = draw(st.integers(min_value=1, max_value=6))
    caps = {f"l{k}": 10 ** draw(LOG_CAP) for k in range(m)}
    flows = []
    for i in range(draw(st.integers(min_value=1, max_value=12))):
        route = tuple(sorted(draw(st.sets(st.sampled_from(sorted(caps)), min_size=1, max_size=min(m, 3)))))
        theta = (
            draw(st.sampled_from([0.0, 0.0, draw(st.floats(0, 0.5))])) * min(caps[ln] for ln in route) / 12
        )
        flows.append(opt.Flow(f"f{i}", route, theta, 10 ** draw(LOG_OMEGA)))
    return opt.Problem(links=caps, flows=tuple(flows))


@settings(max_examples=n(8))
@given(wide_problems())
def test_optimum_feasible_wide_range(p: opt.Problem) -> None:
    """Capacities 1.6 Mb/s - 776 Gb/s, omegas 1e-3 - 4e2: feasible within 1e-9 relative, or an error."""
    try:
        sol = opt.solve(p)
    except UserError:
        return
    _check_solution(p, sol)


def _cli(args: list[str]) -> tuple[int, str, str]:
    """The real entry point in this process: (exit code, stdout, stderr); any other exception propagates
    (a traceback is a failure of the property)."""
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(args)
        except SystemExit as exc:
            code = int(exc.code or 0) if not isinstance(exc.code, str) else 1
    return code, out.getvalue(), err.getvalue()


def _assert_clean_failure(code: int, err: str) -> None:
    assert code == 2, (code, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("paccp: error: "), err


def _toml(doc: dict[str, Any]) -> str | None:
    from paccp.scenario import to_toml

    try:
        return to_toml(doc)
    except (TypeError, ValueError):
        return None


@settings(max_examples=n(20))
@given(scenarios())
def test_cli_run(doc: dict[str, Any]) -> None:
    """``paccp run``: a complete run directory, or exit 2 with one line and nothing left behind."""
    text = _toml(doc)
    if text is None:
        return
    with tempfile.TemporaryDirectory() as d:
        scen = Path(d) / "s.toml"
        scen.write_bytes(text.encode("utf-8", "surrogateescape"))
        code, _, err = _cli(["run", str(scen), "--out", str(Path(d) / "out")])
        if code == 0:
            assert (Path(d) / "out" / "summary.json").is_file()
        else:
            _assert_clean_failure(code, err)
            assert not (Path(d) / "out").exists()
        assert sorted(p.name for p in Path(d).iterdir()) == (["out", "s.toml"] if code == 0 else ["s.toml"])


@settings(max_examples=n(30))
@given(st.one_of(problems().map(lambda d: json.dumps(d)), st.text(max_size=80)))
def test_cli_optimum(text: str) -> None:
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "p.json"
        p.write_bytes(text.encode("utf-8", "surrogateescape"))
        code, out, err = _cli(["optimum", str(p)])
        if code == 0:
            assert "rates_bps" in json.loads(out)
        else:
            _assert_clean_failure(code, err)


@settings(max_examples=n(30))
@given(st.lists(st.one_of(JSONISH.map(json.dumps), st.binary(max_size=40).map(repr)), min_size=1, max_size=3))
def test_cli_report(summaries: list[str]) -> None:
    """``paccp report`` renders what it can and lists the rest; it never stops on one bad summary."""
    with tempfile.TemporaryDirectory() as d:
        for k, text in enumerate(summaries):
            (Path(d) / f"r{k}").mkdir()
            (Path(d) / f"r{k}" / "summary.json").write_text(text)
        code, _, err = _cli(["report", d])
        assert code == 0, err
        assert (Path(d) / "report.html").is_file()
        assert all(line.startswith("paccp: warning: skipped") for line in err.strip().splitlines() if line)


SWEEP_LINES = st.lists(
    st.sampled_from(
        [
            "[sweep]", "name = 'x'", "scenario = 's.toml'", "scenario = 'nope.toml'", "seeds = [1]",
            "seeds = [-1]", "seeds = []", "deadline = {kind = 'size_class'}", "deadline = {kind = 'x'}",
            "deadline = {kind = 'size_class', small_ms = nan}", "[grid]", "load = [0.05]", "load = [1e9]",
            "load = []", "'run.duration' = ['3ms']", "'flows.9.id' = ['x']", "workload = ['/']", "[other]",
            "x = [nan]", "'arrivals' = [5]", "'run' = [3]", "seeds = [true]", "scenario = 5",
            'scenario = "a\\u0000b"', "scenario = [1]",
        ]
    ),
    max_size=8,
)  # fmt: skip


@settings(max_examples=n(12))
@given(SWEEP_LINES)
def test_cli_sweep_validation(lines: list[str]) -> None:
    """``paccp sweep``: a bad sweep file is one line, exit 2, before any point runs."""
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "s.toml").write_text(_toml(BASE) or "")
        sweep = Path(d) / "sw.toml"
        sweep.write_text("\n".join(lines) + "\n")
        code, _, err = _cli(["sweep", str(sweep), "--out", str(Path(d) / "out"), "--workers", "1"])
        if code != 0:
            _assert_clean_failure(code, err)
