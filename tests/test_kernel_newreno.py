"""Issue 31's kernel check without root: the scaling, the engine twin and the trace parsing."""

from __future__ import annotations

from pathlib import Path

import pytest

from paccp.crosscheck import kernel_newreno as kn
from paccp.crosscheck import newreno_twin as nt


def test_scaling_keeps_the_issue_bdp_in_packets() -> None:
    # the issue: 10 Gb/s, RTT 2 x (30 + 20 + 10) us for f0 -> ~99 frames of 1514 bytes; any k keeps it
    for k in (1, 100, 250):
        sc = nt.Scaled(k)
        assert sc.bdp_pkts(0) == pytest.approx(2 * 60e-6 * 10e9 / 8 / 1514)
        assert sc.bdp_pkts(3) == pytest.approx(2 * 120e-6 * 10e9 / 8 / 1514)
        assert sc.duration_ns == 200_000_000 * k and sc.window_ns == 10_000_000 * k
    assert nt.Scaled(100).rate_bps == 100_000_000 and nt.Scaled(100).edge_bps == 400_000_000


def test_twin_puts_every_rtt_where_the_testbed_has_it() -> None:
    sc = nt.Scaled(100)
    for placement in ("kernel", "issue"):
        doc = nt.engine_twin(sc, True, placement=placement)
        delay = {(lk["a"], lk["b"]): lk["delay_ns"] for lk in doc["topology"]["links"]}
        for i in range(4):
            one_way = delay[(f"s{i}", "L")] + delay[("L", "R")] + delay[("R", f"d{i}")]
            slack = 0 if placement == "issue" else 2 * nt.HOP_NS
            assert one_way - slack == sc.base_rtt_ns(i) // 2
        assert doc["transport"]["sack"] is False and doc["transport"]["prr"] is True
        assert doc["transport"]["dupack_threshold"] == 3 and doc["transport"]["delayed_ack"] is False
        bottleneck = next(lk for lk in doc["topology"]["links"] if lk["a"] == "L")
        assert bottleneck["buffer"] == {"bytes": 101 * 1514} and bottleneck["rate_bps"] == 100_000_000
        assert [f["start_ns"] for f in doc["flows"]] == [0, 1_000_000, 2_000_000, 3_000_000]


def test_data_syn_is_the_second_syn(tmp_path: Path) -> None:
    p = tmp_path / "syn.txt"
    p.write_text(
        "1700000000.100000 IP 10.201.0.2.40000 > 10.202.0.2.5301: Flags [S], seq 1, win 64240, length 0\n"
        "1700000000.100500 IP 10.201.0.2.40002 > 10.202.0.2.9999: Flags [S], seq 1, win 64240, length 0\n"
        "1700000000.150000 IP 10.201.0.2.40004 > 10.202.0.2.5301: Flags [S], seq 1, win 64240, length 0\n"
    )
    assert kn.data_syn_times(p, 5301) == pytest.approx(1700000000.15)
    assert kn.data_syn_times(p, 9999) is None
    assert kn.data_syn_times(tmp_path / "absent", 5301) is None


def test_zero_windows_skip_the_first() -> None:
    assert nt.zero_windows([0, 5, 0, 0, 3, 0]) == {"zero_windows": 3, "longest_zero_run": 2}


def test_engine_twin_short_run_moves_every_flow() -> None:
    # a tenth of the issue's run at k = 100 (2 s of simulated time): every flow gets data through
    e = nt.run_engine(nt.Scaled(100, 0.1), prr=True)
    assert all(f["bytes"] > 1_000_000 for f in e["flows"]), e["flows"]
