"""Multipath connections (transport/conn) through the mptcp_bgwc scheme, the parts mptcp-cc/-wc/-clos need: a
finite connection's subflows share its bytes and finish together; a stop time ends a connection; coupled
controllers see peers; one WC subflow per disjoint path."""

from __future__ import annotations

from typing import Any

from paccp.experiments import mptcp_bgwc as exp
from paccp.scenario import parse_scenario, to_engine
from paccp.sim.rundir import run_engine


def _records(spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    res, _ = run_engine(to_engine(parse_scenario(spec)), description="test")
    return {str(r["id"]): r for r in res.flows.to_pylist()}


def _one_connection(size: str | None, **scheme: Any) -> dict[str, Any]:
    flow: dict[str, Any] = {"id": "f", "src": "S", "dst": "R", "vm": "vmS"}
    if size is not None:
        flow["size"] = size
    return exp._scenario(exp.star(["S"], "R"), [("vmS", "S", 100)], [flow], scheme, duration_s=0.5, seed=1)


def test_a_finite_connection_uses_the_idle_link_through_its_wc_subflow_and_finishes_once() -> None:
    res, _ = run_engine(to_engine(parse_scenario(_one_connection("2MB"))), description="test")
    r = {str(x["id"]): x for x in res.flows.to_pylist()}
    bg, wc = r["f/bg"], r["f/wc0"]
    assert res.connections is not None
    c = res.connections.to_pydict()
    assert c["bytes_delivered"] == [2_000_000] and c["finish_ns"] == [bg["finish_ns"]]
    assert bg["finish_ns"] is not None and bg["finish_ns"] == wc["finish_ns"]  # the connection completes once
    took = (bg["finish_ns"] - bg["start_ns"]) / 1e9
    # 2 MB: 160 ms at the 100 Mb/s guarantee alone; with the WC subflow on the idle 1 Gb/s link far less
    assert took < 0.05, took
    # the connection completes at the receiver, before the last segment's ACK reaches the sender
    assert bg["bytes_acked"] + wc["bytes_acked"] >= 2_000_000 - 1460
    assert wc["bytes_acked"] > bg["bytes_acked"]
    # bg_only: the rate limit alone (about 160 ms)
    r = _records(_one_connection("2MB", variant="bg_only"))
    assert (r["f/bg"]["finish_ns"] - r["f/bg"]["start_ns"]) / 1e9 > 0.15


def test_stop_ends_a_long_lived_connection() -> None:
    spec = _one_connection(None)
    spec["flows"][0]["stop"] = "0.1s"
    r = _records(spec)
    for sub in ("f/bg", "f/wc0"):
        fin = r[sub]["finish_ns"]
        assert fin is not None and 100_000_000 <= fin < 120_000_000, (sub, fin)


def test_coupled_controllers_see_their_peers() -> None:
    # Fig. 3's setup: three connections share the idle capacity; LIA and OLIA give other WC rates than
    # uncoupled Reno only if their increase saw the BG subflow's window
    wc = {}
    for cc in ("reno", "lia", "olia"):
        r = _records(exp.cc_scenario(cc, quick=True))
        wc[cc] = tuple(r[f"f{s}/wc0"]["bytes_acked"] for s in ("S1", "S3", "S4"))
    assert len(set(wc.values())) == 3, wc


def test_one_wc_subflow_per_disjoint_path() -> None:
    # N = M ("paths"): WC subflow k takes the k-th spine of a leaf-spine, the k-th aggregation / core
    # switch of the Clos; N = 1 rides the BG subflow's path
    s: dict[str, Any] = {
        "run": {"duration": "20ms", "warmup": "0s"},
        "topology": {"kind": "leaf_spine", "leaves": 2, "spines": 3, "hosts_per_leaf": 2},
        "vms": [{"id": "vm1", "host": "h0", "theta": "350Mbit"}],
        "flows": [{"id": "f", "src": "h0", "dst": "h2", "vm": "vm1"}],
        "scheme": {"kind": "mptcp_bgwc", "wc_subflows": "paths"},
    }
    r = _records(s)
    spines = {r[f"f/wc{k}"]["route"][1] for k in range(3)}
    assert spines == {"leaf0->spine0", "leaf0->spine1", "leaf0->spine2"}
    assert all(r[f"f/wc{k}"]["bytes_acked"] > 0 for k in range(3))
    s["scheme"]["wc_subflows"] = 1
    r = _records(s)
    assert r["f/wc0"]["route"] == r["f/bg"]["route"]
    clos = exp._scenario(
        exp.clos(),
        [("v", "h0", 800)],
        [{"id": "f", "src": "h0", "dst": "h399", "vm": "v"}],
        {"wc_subflows": "paths"},
        duration_s=0.02,  # one whole 10 ms sample interval after the warm-up (scenario rule run.warmup)
        seed=1,
    )
    r = _records(clos)
    a, b = (set(r[f"f/wc{k}"]["route"][1:-1]) for k in range(2))
    assert a and b and not a & b, (a, b)  # no fabric link in common


def test_n_above_one_needs_ecmp_routing() -> None:
    import pytest

    from paccp.errors import UserError

    s: dict[str, Any] = {
        "topology": {"kind": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 2},
        "routing": {"kind": "leaf_spine_paper"},
        "vms": [{"id": "vm1", "host": "h0", "theta": "350Mbit"}],
        "flows": [{"id": "f", "src": "h0", "dst": "h2", "vm": "vm1"}],
        "scheme": {"kind": "mptcp_bgwc", "wc_subflows": 2},
    }
    with pytest.raises(UserError, match=r"scheme.wc_subflows: N > 1 needs ECMP routing") as ei:
        parse_scenario(s)
    assert "\n" not in str(ei.value)


def test_a_subflow_timeout_reinjects_its_data_on_another_subflow() -> None:
    # Incast of six finite connections onto one receiver: WC subflows lose at the low-priority queue and
    # time out; their unacknowledged DSNs are queued and resent on the BG subflow (Linux MPTCP), and every
    # connection completes with all its bytes.
    senders = [f"S{i}" for i in range(6)]
    spec = exp._scenario(
        exp.star(senders, "R"),
        [(f"v{s}", s, 150) for s in senders],
        [{"id": f"f{s}", "src": s, "dst": "R", "vm": f"v{s}", "size": "3MB"} for s in senders],
        {},
        duration_s=0.5,
        seed=1,
    )
    res, _ = run_engine(to_engine(parse_scenario(spec)), description="test")
    assert res.connections is not None
    c = res.connections.to_pydict()
    timeouts = sum(r["timeouts"] for r in res.flows.to_pylist() if str(r["id"]).endswith("/wc0"))
    assert timeouts > 0 and sum(c["rto_reinjections"]) > 0
    assert all(0 < r <= q for r, q in zip(c["rto_reinjections"], c["rto_queued"], strict=True))
    assert c["bytes_delivered"] == [3_000_000] * 6 and all(t is not None for t in c["finish_ns"])
