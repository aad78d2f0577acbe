"""Property-based suite (Hypothesis) over the parsers added since the first probe (issue 30): comparison
files (``[compare]`` and its ``quick.set``), sweep files (``[sweep]``, ``[grid]``, deadline rules), the
``[scheme]`` sections (mptcp_bgwc, elasticswitch, paccp_host) and ``[softbw]``, and the datapath and
testbed argument parsers. The property: any input either parses to a valid model or raises our one-line
:class:`UserError`, never another exception. Pure functions only: no engine run, no kernel state.

The profiles (``ci``: derandomized, in make test; ``PACCP_HYPOTHESIS=explore``: many more examples) are
the ones of tests/test_hardening_props.py, whose hostile values this suite reuses.
"""

from __future__ import annotations

import copy
import math
import tempfile
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_hardening_props import HOSTILE, mutated

from paccp.errors import UserError

ROOT = Path(__file__).resolve().parents[1]


def _user_error_or_value(fn: Any, *args: Any, **kw: Any) -> Any:
    """``fn(*args)``; a UserError must be one line (and is returned); any other exception fails."""
    try:
        return fn(*args, **kw)
    except UserError as exc:
        assert exc.message and "\n" not in exc.message.strip(), exc.message
        assert "Value error," not in exc.message, exc.message
        return exc


# ---------------------------------------------------------------------------------------------------
# [scheme] and [softbw]


def _scheme_bases() -> list[dict[str, Any]]:
    from paccp.experiments import mptcp_bgwc, softbw_share

    mptcp = mptcp_bgwc.bg_scenario(udp=True, quick=True)
    mptcp["scheme"]["udp"] = mptcp["scheme"]["udp"][:1]
    return [
        mptcp,
        softbw_share.scenario(2, "softbw", "nonblocking", True, 1),
        softbw_share.scenario(2, "elasticswitch", "leafspine", True, 1),
        dict(softbw_share.scenario(2, "best_effort", "nonblocking", True, 1), scheme={"kind": "paccp_host"}),
    ]


SCHEME_BASES = _scheme_bases()
SCHEME_PATHS: list[tuple[Any, ...]] = [
    ("scheme", k)
    for k in (
        "kind", "variant", "wc_subflows", "scheduler", "subflow_cc", "fair_wc", "unit", "bg_burst",
        "receive_buffer", "rcvbuf_beta", "penalize", "wc_extra_delay", "switch_queue", "guarantee",
        "gp_period", "ra_period", "ecn_delay", "md", "ai", "min_step", "burst", "alloc", "per_vm", "hold",
        "window", "mark", "queue", "idle", "rcos", "x",
    )
] + [
    ("scheme", "competition_levels", "vm1"), ("scheme", "guarantees", "vm0"), ("scheme", "red", "min_th"),
    ("scheme", "red", "max_p"), ("scheme", "udp", 0, "rate"), ("scheme", "udp", 0, "start"),
    ("scheme", "udp", 0, "stop"), ("scheme", "udp", 0, "vm"), ("scheme", "wc_delay_steps"),
]  # fmt: skip
SOFTBW_PATHS: list[tuple[Any, ...]] = [
    ("softbw", "overcommit"), ("softbw", "billing_cycle"), ("softbw", "host_overcommit", "s"),
    ("softbw", "host_overcommit", "nope"), ("softbw", "guarantees", 0, "kind"),
    ("softbw", "guarantees", 0, "rate"), ("softbw", "guarantees", 0, "size"),
    ("softbw", "guarantees", 0, "deadline"), ("softbw", "guarantees", 0, "start"),
    ("softbw", "guarantees", 0, "vm"), ("softbw", "guarantees", 1, "vm"), ("softbw", "x"),
]  # fmt: skip


def _parse_and_map(doc: dict[str, Any]) -> None:
    """Validate a scenario and map it to the engine's input (the schemes' to_engine included)."""
    from paccp.scenario import parse_scenario, to_engine

    sc = parse_scenario(doc)
    to_engine(sc)


@given(st.sampled_from(range(len(SCHEME_BASES))).flatmap(lambda i: mutated(SCHEME_BASES[i], SCHEME_PATHS)))
def test_scheme_sections(doc: dict[str, Any]) -> None:
    if not isinstance(doc.get("scheme"), dict):
        return
    _user_error_or_value(_parse_and_map, doc)


@given(mutated(SCHEME_BASES[1], SOFTBW_PATHS))
def test_softbw_section(doc: dict[str, Any]) -> None:
    _user_error_or_value(_parse_and_map, doc)


def test_scheme_bases_are_valid() -> None:
    """The unmutated bases parse (else every example above would be a trivial error)."""
    for doc in SCHEME_BASES:
        _parse_and_map(copy.deepcopy(doc))


# ---------------------------------------------------------------------------------------------------
# comparison files: [compare] and its --quick version (quick.set re-checked)

COMPARE_FILES = ["compare-leafspine-websearch.toml", "compare-clos-mapreduce.toml"]
COMPARE_BASES = [tomllib.loads((ROOT / "scenarios" / f).read_text()) for f in COMPARE_FILES]
COMPARE_PATHS: list[tuple[Any, ...]] = [
    ("compare", k) for k in ("name", "seeds", "window", "bottlenecks", "book", "x", "points")
] + [
    ("compare", "traffic", k)
    for k in ("kind", "flows_per_vm", "starts", "jobs", "size_scale", "time_scale", "max_tasks", "drain")
] + [
    ("compare", "purchases", 0, "guarantee"), ("compare", "purchases", 0, "weight"),
    ("compare", "purchases", 0, "share"), ("compare", "purchases", 1, "name"),
    ("compare", "vms", "per_host"), ("compare", "gaming", "k"), ("compare", "gaming", "vms"),
    ("compare", "gaming", "guarantee"), ("compare", "gaming", "duration"), ("compare", "quick", "seeds"),
    ("compare", "quick", "points"), ("compare", "quick", "mapreduce_jobs"), ("compare", "quick", "gaming_k"),
    ("compare", "quick", "set", "run.duration"), ("compare", "quick", "set", "run.warmup"),
    ("compare", "quick", "set", "softbw.overcommit"), ("compare", "quick", "set", "vms"),
    ("compare", "quick", "set", "arrivals.0.load"), ("compare", "quick", "set", "arrivals.9.stop"),
    ("compare", "quick", "set", "compare.window"), ("compare", "quick", "set", "topology.x.y"),
    ("run", "duration"), ("run", "warmup"), ("topology", "kind"), ("scheme",), ("softbw",),
]  # fmt: skip


def _spec_and_quick(doc: dict[str, Any]) -> None:
    from paccp.compare.spec import parse_spec

    spec = parse_spec(doc, Path("c.toml"))
    quick = spec.quick()
    assert quick.cfg.window > 0


@given(st.sampled_from(range(len(COMPARE_BASES))).flatmap(lambda i: mutated(COMPARE_BASES[i], COMPARE_PATHS)))
def test_compare_file(doc: dict[str, Any]) -> None:
    _user_error_or_value(_spec_and_quick, doc)


def test_compare_bases_are_valid() -> None:
    for doc in COMPARE_BASES:
        _spec_and_quick(copy.deepcopy(doc))


# ---------------------------------------------------------------------------------------------------
# sweep files and deadline rules

SWEEP_DIR = Path(tempfile.mkdtemp(prefix="paccp-props-sweep-"))
(SWEEP_DIR / "s.toml").write_text(
    (ROOT / "scenarios" / "dumbbell.toml")
    .read_text()
    .replace('duration = "100ms"', 'duration = "30ms"')
    .replace('start = "30ms"', 'start = "1ms"')
    .replace('at = "60ms"', 'at = "20ms"')
)
SWEEP_BASE: dict[str, Any] = {
    "sweep": {"name": "p", "scenario": "s.toml", "seeds": [1, 2], "deadline": {"kind": "size_class"}},
    "grid": {"cc.rcos": [2.0, 3.0], "flows.0.omega": [1.0]},
}
SWEEP_PATHS: list[tuple[Any, ...]] = [
    ("sweep", k) for k in ("name", "scenario", "seeds", "deadline", "x")
] + [
    ("sweep", "deadline", k) for k in ("kind", "rate", "split", "floor_ms", "link", "small_ms", "big_rate")
] + [
    ("grid", k) for k in ("cc.rcos", "flows.0.omega", "load", "seed", "scenario", "run.duration",
                          "flows.9.omega", "topology.bottleneck_rate", "flows.x", "vms.0.theta")
]  # fmt: skip


@st.composite
def sweep_docs(draw: st.DrawFn) -> dict[str, Any]:
    doc = draw(mutated(SWEEP_BASE, SWEEP_PATHS))
    if draw(st.booleans()):  # a grid value list (the hostile values are mostly scalars)
        key = draw(st.sampled_from(["cc.rcos", "flows.0.omega", "run.warmup", "load"]))
        doc["grid"][key] = draw(st.lists(HOSTILE, min_size=0, max_size=3))
    return doc


@given(sweep_docs())
def test_sweep_file(doc: dict[str, Any]) -> None:
    from paccp.sim.sweep import sweep_points

    res = _user_error_or_value(sweep_points, doc, SWEEP_DIR / "sw.toml")
    if not isinstance(res, UserError):
        _name, points = res
        assert points and all(p.resolved is not None for p in points)


@given(st.dictionaries(st.sampled_from(SWEEP_PATHS[6:12]).map(lambda p: p[-1]), HOSTILE, max_size=4))
def test_deadline_rule(spec: dict[str, Any]) -> None:
    from paccp.sim.sweep import deadline_rule

    _user_error_or_value(deadline_rule, spec)
    _user_error_or_value(deadline_rule, {"kind": "active_share", "rate": "5Gbit", **spec})


def test_sweep_base_is_valid() -> None:
    from paccp.sim.sweep import sweep_points

    assert len(sweep_points(copy.deepcopy(SWEEP_BASE), SWEEP_DIR / "sw.toml")[1]) == 4


# ---------------------------------------------------------------------------------------------------
# datapath and testbed arguments (pure: limits, the pair and rcos checks, the cgroup resolver, flow specs)

ARG = st.one_of(
    HOSTILE.map(lambda v: v if isinstance(v, str) else str(v)),
    st.from_regex(
        r"\A-?[0-9]{0,30}(\.[0-9]{0,5})?(e-?[0-9]{1,4})?\s?(bit|kbit|Mbit|Gbit|Tbit|Pbit|bps|ms|us|ns|s|d|)\Z"
    ),
)


@given(ARG, st.booleans())
def test_rate_and_duration_arguments(value: str, positive: bool) -> None:
    from paccp import limits

    bps = _user_error_or_value(limits.check_rate, value, "--rate", positive=positive)
    if not isinstance(bps, UserError):
        assert isinstance(bps, int) and (bps > 0 if positive else bps >= 0) and bps <= limits.MAX_RATE_BPS
    else:
        assert bps.message.startswith("--rate"), bps.message
    ns = _user_error_or_value(limits.check_duration, value, "--duration", positive=positive)
    if not isinstance(ns, UserError):
        assert isinstance(ns, int) and 0 <= ns <= limits.MAX_TIME_NS
    else:
        assert ns.message.startswith("--duration"), ns.message


@given(ARG, HOSTILE)
def test_theta_omega_and_rcos(theta: str, omega: Any) -> None:
    from paccp import limits
    from paccp.datapath.paccp.maps import pack_params
    from paccp.datapath.paccp.params import check_pair, check_rcos

    pair = _user_error_or_value(check_pair, theta, omega)
    if isinstance(pair, UserError):
        assert pair.message.startswith(("--theta", "--omega")), pair.message
    else:
        pack_params(*pair)  # what the checks accept fits the maps
        assert 0 < pair[1] <= limits.MAX_DATAPATH_OMEGA
    rcos = _user_error_or_value(check_rcos, omega)
    if not isinstance(rcos, UserError):
        assert math.isfinite(rcos) and 1 <= rcos <= limits.MAX_RCOS


@pytest.fixture(scope="module")
def cg_tree() -> Path:
    root = Path(tempfile.mkdtemp(prefix="paccp-props-cg-")) / "cgroup2"
    for d in (root, root / "vm1", root / "a" / "b", root.parent / "cpu"):
        d.mkdir(parents=True)
        (d / "cgroup.procs").write_text("")
    (root / "out").symlink_to(root.parent / "cpu")
    return root


PATH_PART = st.sampled_from(["vm1", "a", "b", "..", ".", "", "out", "cpu", "x", "\x00", "\n", "/", "//"])


@given(st.lists(PATH_PART, max_size=5).map("/".join), st.booleans(), st.booleans())
def test_cgroup_resolver(cg_tree: Path, rel: str, absolute: bool, host_wide: bool) -> None:
    from paccp.datapath.core.cgroups import cgroup_path_in

    path = str(cg_tree) + "/" + rel if absolute else rel
    got = _user_error_or_value(cgroup_path_in, path, cg_tree, host_wide=host_wide)
    if isinstance(got, UserError):
        assert got.message.startswith("--cgroup"), got.message
    else:
        real = cg_tree.resolve()
        assert got == real or real in got.parents
        assert host_wide or got != real
        assert (got / "cgroup.procs").exists()


@given(
    st.lists(st.one_of(st.sampled_from(["be", "ds", "mrg", "BE", " ", ""]), ARG), max_size=20).flatmap(
        lambda parts: st.just(parts)
    ),
    st.sampled_from([",", ":"]),
)
def test_testbed_flow_specs(parts: list[str], sep: str) -> None:
    from paccp.datapath.paccp.testbed import parse_flow_specs

    specs = _user_error_or_value(parse_flow_specs, sep.join(parts))
    if isinstance(specs, UserError):
        assert specs.message.startswith("--flows: "), specs.message
    else:
        assert 1 <= len(specs) <= 16 and all(s.label in ("BE", "DS", "MRG") for s in specs)
