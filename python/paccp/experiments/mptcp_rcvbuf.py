"""``paccp reproduce mptcp-rcvbuf``: the connection-level receive buffer (paper Figs. 6-8 and 17, Tables 1-2).

Setup (:func:`paccp.experiments.mptcp_bgwc.rcvbuf_scenario`): one server S sends one long-lived connection
(BG + WC subflow, the scheme's defaults: BG-first, penalisation and reinjection on) to R over the 1 Gb/s
star; the WC subflow's data get +1 or +2 ms one way (the paper's netem); guarantee 200 or 500 Mb/s;
receive buffer settings 1-5 of Tables 1-2. Our model has no receive-buffer autotuning: a setting's buffer is
its ``tcp_rmem`` *maximum* (what autotuning grows to under a bulk transfer). Fig. 17: the dynamic buffer
(Eq. 1, beta = 3) while the WC delay steps 1 -> 2 -> 3 ms at T/3 and 2T/3 (the paper: +1 ms every 15 s of
45 s), next to the fixed setting-1 buffer. T = 10 s (1 s with ``--quick``, which runs settings 1, 3, 5).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from paccp.experiments import Experiment, ExperimentOptions, register
from paccp.experiments import mptcp_checks as mc
from paccp.experiments.mptcp_bgwc import (
    FULL_S,
    LINK_PAYLOAD_MBPS,
    PAPER,
    QUICK_S,
    _finish,
    _measure,
    rcvbuf_scenario,
)
from paccp.experiments.mptcp_measure import Measured

PAYLOAD = LINK_PAYLOAD_MBPS / 1000
GUARANTEES = (200, 500)
DELAYS_MS = (1, 2)


def _settings(delay_ms: int) -> list[int]:
    """The buffer (tcp_rmem max, bytes) of settings 1-5 of Table 1 (1 ms) or Table 2 (2 ms)."""
    rows = PAPER["mptcp-rcvbuf"].numbers["settings_1ms" if delay_ms == 1 else "settings_2ms"]
    return [int(r[2]) for r in rows]


def _plot_bars(res: dict[str, Any], settings: list[int], out: Path) -> None:
    """``fig7_fig8.png``: mean BG and WC rate per setting, one panel per (guarantee, delay)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(GUARANTEES), len(DELAYS_MS), figsize=(10, 6), dpi=100, sharey=True)
    x = np.arange(len(settings))
    for i, g in enumerate(GUARANTEES):
        for j, d in enumerate(DELAYS_MS):
            ax = axes[i][j]
            rows = [res[f"g{g}-d{d}-s{k + 1}"] for k in settings]
            ax.bar(x - 0.2, [r["bg"] for r in rows], 0.4, label="BG")
            ax.bar(x + 0.2, [r["wc"] for r in rows], 0.4, label="WC")
            ax.set_xticks(x, [f"s{k + 1}" for k in settings])
            ax.set_title(f"guarantee {g} Mb/s, WC +{d} ms", fontsize=9)
            ax.set_ylabel("Mb/s")
            ax.legend(fontsize=7)
    fig.suptitle("mptcp-rcvbuf: throughput per receive-buffer setting (Figs. 7-8)")
    fig.tight_layout()
    out.mkdir(parents=True, exist_ok=True)
    fig.savefig(out / "fig7_fig8.png", metadata={"Software": None})
    plt.close(fig)


def _plot_dynamic(runs: dict[str, Measured], out: Path) -> None:
    """``fig17.png``: the WC subflow's rate over time, dynamic vs setting-1 buffer."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.2), dpi=100)
    for k, (name, m) in enumerate(runs.items()):
        s = m.series.get(("vmS", "wc"), np.zeros_like(m.times_s))
        ax.plot(m.times_s, s, color=f"C{k}", lw=1.2, label=f"WC, {name}")
    ax.set_xlabel("simulated time (s); WC delay 1 -> 2 -> 3 ms at T/3, 2T/3")
    ax.set_ylabel("Mb/s")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7)
    ax.set_title("mptcp-rcvbuf: dynamic receive buffer (Fig. 17)")
    fig.tight_layout()
    fig.savefig(out / "fig17.png", metadata={"Software": None})
    plt.close(fig)


def _counters(m: Measured) -> dict[str, int]:
    """The connection's penalisations, reinjections and window-blocked pushes over the whole run."""
    c = m.connections or {}
    return {k: int(c[k][0]) for k in ("penalisations", "reinjections", "window_blocked") if c.get(k)}


def run(opts: ExperimentOptions) -> dict[str, Any]:
    """Figs. 7-8 (settings x guarantees x delays) and Fig. 17 (dynamic buffer, delay steps)."""
    out = opts.out_dir / "mptcp-rcvbuf"
    dur = QUICK_S if opts.quick else FULL_S
    picked = [0, 2, 4] if opts.quick else [0, 1, 2, 3, 4]
    res: dict[str, Any] = {}
    checks: list[dict[str, Any]] = []
    for g in GUARANTEES:
        gv = {"vmS": float(g)}
        idle = LINK_PAYLOAD_MBPS - g * PAYLOAD
        for d in DELAYS_MS:
            bufs = _settings(d)
            for k in picked:
                name = f"g{g}-d{d}-s{k + 1}"
                m = _measure(
                    rcvbuf_scenario(g, d, bufs[k], quick=opts.quick, seed=opts.seed), out, name, name, gv
                )
                res[name] = {
                    "buffer": bufs[k],
                    "bg": m.rate("vmS", "bg"),
                    "wc": m.rate("vmS", "wc"),
                    "wall_s": m.wall_s,
                } | _counters(m)
            lo, hi = res[f"g{g}-d{d}-s1"], res[f"g{g}-d{d}-s5"]
            tag = f"[{g} Mb/s, +{d} ms]"
            checks.append(
                mc.check(
                    f"{tag} WC small with the smallest buffer (setting 1: under half of setting 5's)",
                    "very small",
                    f"{lo['wc']:.1f} vs {hi['wc']:.1f}",
                    lo["wc"] < 0.5 * hi["wc"],
                )
            )
            checks.append(
                mc.check(
                    f"{tag} WC takes the idle bandwidth with the largest buffer (setting 5, >= 90 %)",
                    "all idle",
                    f"{hi['wc']:.1f} of {idle:.1f}",
                    hi["wc"] >= 0.9 * idle,
                )
            )
            low_bg = min(res[f"g{g}-d{d}-s{k + 1}"]["bg"] for k in picked)
            checks.append(
                mc.check(
                    f"{tag} BG at its guarantee with every buffer (within {mc.BG_TOLERANCE:.0%})",
                    "held (penalisation protects the BG subflow)",
                    f"worst {low_bg:.1f} of {g * PAYLOAD:.1f}",
                    low_bg >= (1 - mc.BG_TOLERANCE) * g * PAYLOAD,
                )
            )
    _plot_bars(res, picked, out)
    # Fig. 17: dynamic buffer vs setting 1 while the WC delay steps up.
    third = dur / 3
    steps = [{"at": f"{third * k:g}s", "delay": f"{k + 1}ms"} for k in (1, 2)]
    dyn_runs: dict[str, Measured] = {}
    for name, buf in (("dynamic", "dynamic"), ("setting 1", _settings(1)[0])):
        spec = rcvbuf_scenario(200, 1, buf, quick=opts.quick, seed=opts.seed)
        spec["scheme"]["wc_delay_steps"] = steps
        dyn_runs[name] = _measure(
            spec, out, f"fig17-{name.replace(' ', '')}", f"Fig. 17 {name}", {"vmS": 200.0}
        )
    _plot_dynamic(dyn_runs, out)
    idle = LINK_PAYLOAD_MBPS - 200 * PAYLOAD
    fig17: dict[str, Any] = {}
    for name, m in dyn_runs.items():
        fig17[name] = (
            {
                f"phase{p + 1}_wc_second_half": m.window_mean(
                    "vmS", "wc", p * third + third / 2, (p + 1) * third
                )
                for p in range(3)
            }
            | {"wall_s": m.wall_s}
            | _counters(m)
        )
    worst = min(v for k, v in fig17["dynamic"].items() if k.startswith("phase"))
    checks.append(
        mc.check(
            "Fig. 17: the dynamic buffer recovers after each delay step (WC in the second half of each "
            "phase >= 90 % of the idle bandwidth)",
            "recovers quickly",
            f"worst {worst:.1f} of {idle:.1f}",
            worst >= 0.9 * idle,
        )
    )
    fixed = max(v for k, v in fig17["setting 1"].items() if k.startswith("phase"))
    checks.append(
        mc.check(
            "Fig. 17: the fixed setting-1 buffer does not (WC under half the idle bandwidth in every phase)",
            "(Fig. 7: small)",
            f"best {fixed:.1f}",
            fixed < 0.5 * idle,
        )
    )
    res["fig17"] = fig17
    return _finish("mptcp-rcvbuf", opts, res, checks)


register(Experiment(id="mptcp-rcvbuf", title=f"MPTCP BG/WC {PAPER['mptcp-rcvbuf'].figures}", run=run))
