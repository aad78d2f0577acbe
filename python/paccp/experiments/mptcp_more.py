"""The MPTCP BG/WC experiments on the subflow-as-flow model's coupling, pauses and finite connections:
``mptcp-cc`` (Fig. 3), ``mptcp-wc`` (Fig. 13) and ``mptcp-clos`` (Figs. 18-20).

They run on the engine's subflow groups (``crates/paccp-sim/src/transport/coupled.rs``): a connection's
BG and WC subflows are flows of one group; coupled controllers (LIA, OLIA) see the group's windows; a
finite connection's subflows draw segments from one shared budget whenever their windows have room (an
ample send buffer and an unbounded receive buffer: no subflow scheduler and no head-of-line blocking are
modelled, so results do not depend on the scheduler or the receive buffer until the connection layer
replaces this model). Setups, the paper's numbers and the scenario builders are in :mod:`.mptcp_bgwc`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from paccp.experiments import Experiment, ExperimentOptions, register
from paccp.experiments import mptcp_bgwc as E
from paccp.experiments import mptcp_checks as mc
from paccp.experiments.mptcp_measure import Measured

CCS = ("reno", "lia", "olia")  # mptcp-cc: uncoupled Reno (the paper's choice) vs the coupled ones
CC_SERVERS = ("S1", "S3", "S4")


def _bars(path: Path, title: str, groups: dict[str, dict[str, float]], ylabel: str) -> None:
    """A grouped bar chart: one group per key of ``groups``, one bar per inner key."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(groups)
    inner = sorted({k for g in groups.values() for k in g})
    x = np.arange(len(names))
    w = 0.8 / max(1, len(inner))
    fig, ax = plt.subplots(figsize=(6, 3.2), dpi=100)
    for k, key in enumerate(inner):
        ax.bar(x + k * w - 0.4 + w / 2, [groups[n].get(key, 0.0) for n in names], w, label=key)
    ax.set_xticks(x, names)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)


def run_cc(opts: ExperimentOptions) -> dict[str, Any]:
    """mptcp-cc (Fig. 3): S1, S3, S4 with 100 / 200 / 300 Mb/s on one link; WC subflows under uncoupled Reno,
    LIA and OLIA (coupled over each connection's BG and WC subflows); no fair-WC policy."""
    out = opts.out_dir / "mptcp-cc"
    g = {f"vm{s}": float(v) for s, v in E.PAPER["mptcp-cc"].numbers["guarantee_mbps"].items()}
    measured: dict[str, Any] = {}
    wc_by_cc: dict[str, dict[str, float]] = {}
    checks: list[dict[str, Any]] = []
    for cc in CCS:
        m: Measured = E._measure(
            E.cc_scenario(cc, quick=opts.quick, seed=opts.seed), out, cc, f"mptcp-cc {cc}", g
        )
        wc = {s: m.rate(f"vm{s}", "wc") for s in CC_SERVERS}
        bg = {s: m.rate(f"vm{s}", "bg") for s in CC_SERVERS}
        wc_by_cc[cc] = wc
        measured[cc] = {
            "wc": wc,
            "bg": bg,
            "wc_cv_over_time": _cv_over_time(m, [f"vm{s}" for s in CC_SERVERS]),
            "wall_s": m.wall_s,
        }
        spare = E.LINK_PAYLOAD_MBPS - sum(bg.values())
        checks += mc.checks_cc(cc, wc, spare_mbps=spare)
        low = min(bg[s] / g[f"vm{s}"] for s in CC_SERVERS)
        checks.append(
            mc.check(f"{cc}: guarantees held (BG >= 95 % of B_g)", "held", f"worst {low:.1%}", low >= 0.95)
        )
    _bars(out / "wc_by_cc.png", "mptcp-cc: WC Mb/s per server (Fig. 3)", wc_by_cc, "WC Mb/s")
    return E._finish("mptcp-cc", opts, measured, checks)


def _cv_over_time(m: Measured, vms: list[str]) -> dict[str, float]:
    """Per VM: coefficient of variation of its WC rate over the samples after warm-up (how erratic)."""
    out = {}
    n = m.times_s.size
    first = n // 10
    for vm in vms:
        s = m.series.get((vm, "wc"))
        if s is None or s[first:].size == 0 or s[first:].mean() <= 0:
            out[vm] = 0.0
            continue
        out[vm] = float(s[first:].std() / s[first:].mean())
    return out


register(Experiment(id="mptcp-cc", title=f"MPTCP BG/WC {E.PAPER['mptcp-cc'].figures}", run=run_cc))
