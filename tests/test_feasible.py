"""Feasibility of a window's guarantees at every link (paccp.compare.feasible): the max-min fulfilment of
the guaranteed VMs' needs, and the failures vm_rates counts over the windows feasible at every link."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from paccp.compare.feasible import fulfilment
from paccp.compare.measure import vm_rates

W_NS = 5_000_000
PF = 1460 / 1500
G5 = 5e9


def _net(n_hosts: int = 5) -> dict[str, Any]:
    """Hosts h1..hN on one switch, 10 Gb/s each way."""
    hosts = [f"h{i}" for i in range(1, n_hosts + 1)]
    channels = [[h, "s1", 10_000_000_000, 0] for h in hosts] + [["s1", h, 10_000_000_000, 0] for h in hosts]
    return {
        "window_ns": W_NS,
        "warmup_ns": 0,
        "duration_ns": W_NS,
        "mtu": 1500,
        "header": 40,
        "hosts": hosts,
        "channels": channels,
    }


def _case(
    vms: dict[str, tuple[str, float]], conns: dict[str, tuple[str, str, float | None]]
) -> tuple[dict[str, Any], Any]:
    """raw and setup of one window: vms id -> (host, guarantee), conns id -> (vm, dst, rest or None)."""
    raw = _net(6)
    raw["conn_backlog"] = {cid: [vm, [[0, rest]]] for cid, (vm, _d, rest) in conns.items()}
    setup = SimpleNamespace(
        vms=[
            SimpleNamespace(id=v, host=h, purchase=SimpleNamespace(name="G", guarantee=g))
            for v, (h, g) in vms.items()
        ],
        flows=[{"id": cid, "vm": vm, "dst": d} for cid, (vm, d, _r) in conns.items()],
    )
    return raw, setup


def _needs(vms: dict[str, tuple[str, float]]) -> dict[str, np.ndarray]:
    return {v: np.array([g * PF]) for v, (_h, g) in vms.items()}


def test_guarantees_above_a_receivers_link_are_fulfilled_equally() -> None:
    vms = {f"v{i}": (f"h{i}", G5) for i in range(1, 5)}
    raw, setup = _case(vms, {f"c{i}": (f"v{i}", "h5", None) for i in range(1, 5)})
    got = fulfilment(raw, setup, _needs(vms))
    # four 5 Gb/s guarantees into one 10 Gb/s link: half each
    assert {v: round(float(f[0]), 6) for v, f in got.items()} == dict.fromkeys(vms, 0.5)


def test_a_vm_may_carry_its_guarantee_over_whichever_connection_has_room() -> None:
    # b and c fill h5's link with theirs; a reaches h5 and an idle h4: all three are feasible (an equal
    # split of a's guarantee over its two connections would not be)
    vms = {"a": ("h1", G5), "b": ("h2", G5), "c": ("h3", G5)}
    conns = {
        "a1": ("a", "h5", None),
        "a2": ("a", "h4", None),
        "b1": ("b", "h5", None),
        "c1": ("c", "h5", None),
    }
    raw, setup = _case(vms, conns)
    got = fulfilment(raw, setup, _needs(vms))
    assert all(f[0] == pytest.approx(1.0) for f in got.values())


def test_fulfilment_is_max_min_so_a_vm_elsewhere_keeps_its_guarantee() -> None:
    vms = {"a": ("h1", 8e9), "b": ("h2", 8e9), "c": ("h3", 8e9)}
    conns = {"a1": ("a", "h4", None), "b1": ("b", "h5", None), "c1": ("c", "h5", None)}
    raw, setup = _case(vms, conns)
    got = fulfilment(raw, setup, _needs(vms))
    assert got["a"][0] == pytest.approx(1.0)
    assert got["b"][0] == pytest.approx(10 / 16) and got["c"][0] == pytest.approx(10 / 16)


def test_a_vm_needs_at_most_what_its_connections_have_to_send() -> None:
    # a wants 5 Gb/s but has 1 MB to send in the 5 ms window (1.6 Gb/s); b and c want 5 Gb/s each
    vms = {"a": ("h1", G5), "b": ("h2", G5), "c": ("h3", G5)}
    conns = {"a1": ("a", "h5", 1_000_000.0), "b1": ("b", "h5", None), "c1": ("c", "h5", None)}
    raw, setup = _case(vms, conns)
    got = fulfilment(raw, setup, _needs(vms))
    a_can = 1e6 * 8 / (W_NS / 1e9)
    t = 10e9 * PF / (a_can + 2 * G5 * PF)  # h5's link over the needs, a's capped at what it has
    assert [got[v][0] for v in "abc"] == [pytest.approx(t)] * 3
    # alone, a is short of data, not of network
    raw, setup = _case({"a": ("h1", G5)}, {"a1": ("a", "h5", 1_000_000.0)})
    assert fulfilment(raw, setup, _needs({"a": ("h1", G5)}))["a"][0] == 1.0


def test_a_window_nothing_can_overflow_is_feasible() -> None:
    vms = {"a": ("h1", G5), "b": ("h2", G5)}
    raw, setup = _case(vms, {"a1": ("a", "h5", None), "b1": ("b", "h4", None)})
    got = fulfilment(raw, setup, _needs(vms))
    assert got["a"][0] == 1.0 and got["b"][0] == 1.0


def test_vm_rates_counts_a_failure_at_an_overloaded_receiver_as_infeasible_only_at_every_link() -> None:
    vms = {f"v{i}": (f"h{i}", G5) for i in range(1, 5)}
    raw, setup = _case(vms, {f"c{i}": (f"v{i}", "h5", None) for i in range(1, 5)})
    got_bytes = 2.4e9 * (W_NS / 1e9) / 8
    raw["vms"] = {v: {"got": [got_bytes], "backlog": [1e15], "present": [1.0]} for v in vms}
    rates = vm_rates(raw, setup)
    for v in vms:
        r = rates[v]
        # each failed (2.4 < 0.95 x 5 Gb/s); each host's NIC could carry its guarantee, the receiver not
        assert (r["demand"], r["fail"], r["demand_feasible"], r["fail_feasible"]) == (1, 1, 1, 1)
        assert (r["demand_fabric"], r["fail_fabric"]) == (0, 0)


def test_a_round_the_solver_cannot_solve_excuses_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    import scipy.optimize

    real = scipy.optimize.linprog
    calls = []

    def second_fails(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        res = real(*args, **kwargs)
        if len(calls) == 2:
            res.status, res.message = 2, "infeasible (test)"
        return res

    # a and b share h5 (10 / 16 each), c and d share h4 (10 / 12 each): two rounds
    vms = {"a": ("h1", 8e9), "b": ("h2", 8e9), "c": ("h3", 6e9), "d": ("h6", 6e9)}
    conns = {"a1": ("a", "h5", None), "b1": ("b", "h5", None)}
    conns |= {"c1": ("c", "h4", None), "d1": ("d", "h4", None)}
    raw, setup = _case(vms, conns)
    truth = fulfilment(raw, setup, _needs(vms))
    assert [round(float(truth[v][0]), 6) for v in "abcd"] == [0.625, 0.625, 0.833333, 0.833333]
    monkeypatch.setattr(scipy.optimize, "linprog", second_fails)
    got = fulfilment(raw, setup, _needs(vms))
    # the first round showed a and b short at 10 / 16; the second failed: c and d count as feasible,
    # though they were short too
    assert got["a"][0] == pytest.approx(10 / 16) and got["b"][0] == pytest.approx(10 / 16)
    assert got["c"][0] == 1.0 and got["d"][0] == 1.0 and len(calls) == 2
