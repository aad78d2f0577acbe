"""The fixed-point control law (bpf/paccp_law.h) against the oracle vectors (tests/vectors/paccp_law.json).

The harness bpf/test_law.c is compiled with gcc and fed every case; results are compared here within
REL_TOL relative + ABS_TOL segments absolute (the header documents its Q20 approximation error).
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VECTORS = ROOT / "tests" / "vectors" / "paccp_law.json"
ONE = 1 << 20
REL_TOL = 1e-3
ABS_TOL = 1e-3


def _q20(x: float) -> int:
    return round(x * ONE)


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    exe = tmp_path_factory.mktemp("law") / "test_law"
    subprocess.run(
        ["gcc", "-O2", "-Wall", "-Werror", "-o", str(exe), str(ROOT / "bpf" / "test_law.c")],
        check=True,
    )
    return exe


def _run(exe: Path, lines: list[str]) -> list[str]:
    out = subprocess.run(
        [str(exe)], input="\n".join(lines) + "\n", capture_output=True, text=True, check=True
    )
    return out.stdout.splitlines()


def _close(got: float, want: float) -> bool:
    return abs(got - want) <= REL_TOL * abs(want) + ABS_TOL


def test_every_law_case(harness: Path) -> None:
    doc = json.loads(VECTORS.read_text())
    cases = doc["cases"]
    assert len(cases) > 100
    lines = [
        f"L {int(c['phase'] == 'ss')} {_q20(c['cwnd'])} {_q20(c['wmin'])} {_q20(c['omega'])} "
        f"{_q20(c['rcos'])} {int(c['event'] == 'loss')}"
        for c in cases
    ]
    out = _run(harness, lines)
    assert len(out) == len(cases)
    bad = []
    for case, line in zip(cases, out, strict=True):
        rtt_q, acks, ack_q = (int(v) for v in line.split())
        rtt, ack = rtt_q / ONE, ack_q / ONE
        if not _close(rtt, case["per_rtt"]["cwnd"]):
            bad.append(f"{case['id']} per_rtt {rtt} != {case['per_rtt']['cwnd']}")
        if acks != case["per_ack"]["acks"]:
            bad.append(f"{case['id']} acks {acks} != {case['per_ack']['acks']}")
        if not _close(ack, case["per_ack"]["cwnd"]):
            bad.append(f"{case['id']} per_ack {ack} != {case['per_ack']['cwnd']}")
        if case["event"] == "loss" and not _close(rtt, case["per_rtt"]["ssthresh"]):
            bad.append(f"{case['id']} ssthresh")
    assert not bad, f"{len(bad)} mismatches, first: {bad[:5]}"


def test_every_wmin_case(harness: Path) -> None:
    cases = json.loads(VECTORS.read_text())["wmin_cases"]
    out = _run(harness, [f"W {c['theta_bps']} {c['srtt_ns']} {c['mss_bytes']}" for c in cases])
    for case, line in zip(cases, out, strict=True):
        assert _close(int(line) / ONE, case["wmin"]), (case, int(line) / ONE)


def test_pow3_approximation_error(harness: Path) -> None:
    """3^(1-omega) over a dense omega grid: the stated error bound (2e-6 absolute in Q20 units)."""
    omegas = [i / 64 for i in range(0, 64 * 8)]
    out = _run(harness, [f"P {_q20(o)}" for o in omegas])
    worst = max(abs(int(v) / ONE - 3 ** (1 - _q20(o) / ONE)) for o, v in zip(omegas, out, strict=True))
    assert worst < 2e-6, worst
    assert math.isfinite(worst)
