"""The workload experiments' library: fabric sizes and timing, the pairs of each class, and the scenario of
one point (used by the experiments of :mod:`paccp.experiments.workload`, by ``paccp bench`` and by tests)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from paccp.common.cos import classify
from paccp.units import parse_rate_bps


@dataclass(frozen=True)
class Size:
    """Fabric size and timing of a workload run."""

    leaves: int
    spines: int
    hosts_per_leaf: int
    warmup_ms: float
    measure_ms: float  # arrivals stop here
    drain_ms: float  # extra simulated time after the last arrival


FULL = Size(6, 5, 40, warmup_ms=50, measure_ms=800, drain_ms=100)
QUICK = Size(3, 2, 16, warmup_ms=5, measure_ms=30, drain_ms=10)

VBP_PAIRS = {"be": ("0bit", 1.0), "ds": ("0bit", 2.0), "mrg": ("5Gbit", 2.0)}
FBP_MIX = (("be", 0.6, "0bit", 1.0), ("ds", 0.2, "0bit", 2.0), ("mrg", 0.2, "2.5Gbit", 2.0))
RCOS_THETA = "3Gbit"


def host_roles(size: Size, kind: str) -> dict[str, str]:
    """Class of service of each host's VM: rcos half BE / half MRG; VBP 1/2 BE, 1/4 DS, 1/4 MRG per rack."""
    roles: dict[str, str] = {}
    h = size.hosts_per_leaf
    for leaf in range(size.leaves):
        for j in range(h):
            if kind == "rcos":
                role = "be" if j < h // 2 else "mrg"
            else:
                role = "be" if j < h // 2 else ("ds" if j < 3 * h // 4 else "mrg")
            roles[f"h{leaf * h + j}"] = role
    return roles


def scenario_dict(
    kind: str,
    workload: str,
    load: float,
    seed: int,
    size: Size,
    rcos: float = 3.0,
    transport: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The scenario (TOML schema of :mod:`paccp.scenario`) of one point; ``kind`` is rcos, vbp or fbp."""
    stop_ms = size.measure_ms
    sc: dict[str, Any] = {
        "run": {
            "seed": seed,
            "duration": f"{stop_ms + size.drain_ms:g}ms",
            "warmup": f"{size.warmup_ms:g}ms",
            "sample_flows": "none",
        },
        **({"transport": dict(transport)} if transport else {}),
        "cc": {"kind": "paccp", "rcos": max(rcos, 1.5)},
        "topology": {
            "kind": "leaf_spine",
            "leaves": size.leaves,
            "spines": size.spines,
            "hosts_per_leaf": size.hosts_per_leaf,
        },
        "routing": {"kind": "ecmp"},
        "arrivals": [{"workload": workload, "load": load, "stop": f"{stop_ms:g}ms"}],
    }
    if kind == "fbp":
        sc["arrivals"][0]["cos"] = {
            "kind": "mix",
            "classes": [
                {"label": c.upper(), "prob": p, "theta": th, "omega": om} for c, p, th, om in FBP_MIX
            ],
        }
        return sc
    sc["vms"] = []
    for host, role in host_roles(size, kind).items():
        if kind == "rcos":
            theta, omega = (RCOS_THETA if rcos > 1.0 else "0bit", 1.0) if role == "mrg" else ("0bit", 1.0)
        else:
            theta, omega = VBP_PAIRS[role]
        cos = classify(parse_rate_bps(theta), omega)  # an MRG VM without theta (rcos = 1) is BE
        sc["vms"].append(
            {
                "id": f"vm-{host}",
                "host": host,
                "theta": theta,
                "omega": omega,
                "cos": cos,
                "label": role.upper(),
            }
        )
    sc["arrivals"][0]["cos"] = {"kind": "by_vm"}
    return sc


def bench_fig8_scenario() -> dict[str, Any]:
    """The ``paccp bench`` workload point: fig8 (VBP, WebSearch) at 80 % load, full paper fabric.

    240 hosts; arrivals for 800 ms (about 56,000 flows), then 100 ms of drain.
    """
    return scenario_dict("vbp", "websearch", 0.8, 1, FULL)
