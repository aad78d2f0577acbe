"""The simulator's prediction for the Fig. 6/7 testbed topology (no root needed)."""

from __future__ import annotations

import pytest

from paccp.datapath.paccp.fig7 import SIM_TRANSPORT, fig7_scenario, simulate_fig7
from paccp.scenario import parse_scenario


def test_fig7_scenario_is_valid_and_matches_the_testbed() -> None:
    sc = parse_scenario(fig7_scenario(200_000_000, 1.0), where="fig7")
    assert len(sc.flows) == 9 and len(sc.vms) == 9
    # VM i sends to VM (i + 3) mod 9 (0 means 9); the MRG VMs have theta = 0.4 x rate, omega 2
    dst = {f.src: f.dst for f in sc.flows}
    assert dst["vm1"] == "vm4" and dst["vm6"] == "vm9" and dst["vm7"] == "vm1"
    mrg = [v for v in sc.vms if v.label == "MRG"]
    assert [v.theta for v in mrg] == [80_000_000] * 3 and all(v.omega == 2.0 for v in mrg)
    assert sc.transport.sack is SIM_TRANSPORT["sack"] and sc.transport.delayed_ack


def test_simulated_fig7_rates_fill_but_do_not_exceed_the_bottlenecks() -> None:
    # 3 s: after a 200 ms-RTO stall the cumulative ACK releases what the receiver buffered, so a short
    # window can show more acknowledged bytes than the link carried in it
    rates, note = simulate_fig7(100_000_000, 3.0)
    assert rates is not None, note
    assert set(rates) == {"BE", "DS", "MRG"}
    # each leaf uplink carries one flow of each class: the class means sum to at most the link's
    # payload rate (1448 of 1500 bytes), and the link is mostly busy
    total = sum(rates.values())
    assert 0.7 * 100 < total <= 100 * 1448 / 1500 * 1.01, rates
    assert "sack=True" in note


def test_simulated_fig7_is_deterministic() -> None:
    a, _ = simulate_fig7(100_000_000, 0.3)
    b, _ = simulate_fig7(100_000_000, 0.3)
    assert a == b


@pytest.mark.parametrize("bad", [{"sack": "maybe"}, {"nonsense": 1}])
def test_bad_transport_is_a_user_error(bad: dict[str, object]) -> None:
    from paccp.errors import UserError

    with pytest.raises((UserError, ValueError)):
        simulate_fig7(100_000_000, 0.3, bad)
