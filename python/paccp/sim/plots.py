"""Rate-over-time plots (one PNG per class of service), written with matplotlib's Agg backend."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

import numpy as np


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name) or "class"


def plot_class_rates(
    times_s: np.ndarray,
    rates_bps: Mapping[str, np.ndarray],
    out_dir: Path,
    *,
    reference_bps: Mapping[str, float] | None = None,
    theta_bps: Mapping[str, float] | None = None,
    title: str = "",
) -> list[Path]:
    """Write ``rate_<class>.png`` per class: the per-flow mean rate of the class over time.

    ``rates_bps[cls]`` has shape (n_flows_of_class, n_intervals); the plot shows the mean over flows and
    the 10th-90th percentile band. ``reference_bps`` (the optimum) and ``theta_bps`` are drawn as
    horizontal lines when given. Returns the written paths.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for cls, mat in rates_bps.items():
        if mat.size == 0:
            continue
        fig, ax = plt.subplots(figsize=(6, 3.2), dpi=100)
        g = mat / 1e9
        ax.plot(times_s * 1e3, g.mean(axis=0), label=f"{cls} mean per flow", lw=1.4)
        if g.shape[0] > 1:
            ax.fill_between(
                times_s * 1e3,
                np.percentile(g, 10, axis=0),
                np.percentile(g, 90, axis=0),
                alpha=0.25,
                label="10th-90th pct",
            )
        if reference_bps and cls in reference_bps:
            ax.axhline(reference_bps[cls] / 1e9, color="k", ls="--", lw=1, label="optimum")
        if theta_bps and theta_bps.get(cls):
            ax.axhline(theta_bps[cls] / 1e9, color="r", ls=":", lw=1, label="theta")
        ax.set_xlabel("simulated time (ms)")
        ax.set_ylabel("rate (Gb/s)")
        ax.set_ylim(bottom=0)
        ax.set_title(f"{title} {cls}".strip())
        ax.legend(fontsize=7, loc="lower right")
        fig.tight_layout()
        path = out_dir / f"rate_{_safe(cls)}.png"
        fig.savefig(path, metadata={"Software": None})
        plt.close(fig)
        written.append(path)
    return written
