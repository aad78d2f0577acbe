"""The kernel side of the cross-check on the live kernel: 3 Reno flows through HTB + bfifo, and its twin."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from paccp.crosscheck import kernel_side


def test_kernel_dumbbell_counts_drops_recoveries_and_samples(tmp_path: Path) -> None:
    # plain Reno in namespaces: root and the tools, no BPF
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces, tc)")
    for tool in ("iperf3", "ip", "tc", "nstat", "ss"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (tools/install-system-deps.sh)")
    k = kernel_side.run_kernel_dumbbell(3, 200_000_000, 3, 1, tmp_path)
    assert len(k["flows"]) == 3
    # three Reno flows fill the 200 Mbit bottleneck between them and lose packets at its bfifo
    assert sum(f["goodput_mbps"] for f in k["flows"]) > 0.7 * 200 * 1448 / 1514, k["flows"]
    assert k["drops"] > 0 and k["bottleneck_pkts"] > 10_000, k
    assert all(f["nstat"]["TcpExtTCPSackRecovery"] > 0 for f in k["flows"]), [f["nstat"] for f in k["flows"]]
    assert len(k["ss_medians"]) == 3 and all(2 <= r["cwnd"] < 200 for r in k["ss_medians"].values())
    e = kernel_side.run_engine_dumbbell(3, 200_000_000, 3, 1)
    assert e["drops"] > 0 and all(f["loss_events"] > 0 for f in e["flows"]), e


def test_kernel_paccp_two_way_dumbbell(loaded: None, tmp_path: Path) -> None:
    """BE / DS / MRG each way through two shaped queues on the datapath (``loaded`` skips without it)."""
    from paccp.crosscheck import kernel_paccp

    k = kernel_paccp.run_kernel(200_000_000, 3, 1, tmp_path, two_way=True)
    assert set(k["mbps"]) == {"F0", "F1", "F2", "R0", "R1", "R2"}
    assert all(v > 1 for v in k["mbps"].values()), k["mbps"]
    # both bottlenecks are shaped and carry data: both drop
    assert k["drops_per_s"]["L->R"] > 0 and k["drops_per_s"]["R->L"] > 0, k["drops_per_s"]
    assert set(k["timeouts_per_s"]) == set(k["mbps"])
    m = kernel_paccp.compare_metrics(k, True)
    assert "R2_MRG_mbps" in m and "drops_per_s[R->L]" in m
