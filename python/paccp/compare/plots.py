"""One PNG per score, schemes side by side (grouped bars with 95 % CI error bars)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.patches import Patch

from paccp.common.outdir import save_figure_atomic

Getter = Callable[[dict[str, Any], str], dict[str, Any] | None]


def _bars(
    doc: dict[str, Any],
    groups: list[tuple[str, str, str]],
    get: Getter,
    ylabel: str,
    title: str,
    path: Path,
    scale: float = 1.0,
    hline: float | None = None,
) -> None:
    """groups: (label, point, class); one bar per scheme in each group. Nothing is written (and a stale
    file is removed) when no scheme has a value: no empty plot."""
    schemes = doc["schemes"]
    drawn = False
    fig, ax = plt.subplots(figsize=(max(6.0, 0.5 * len(groups) * len(schemes)), 3.6))
    width = 0.8 / max(1, len(schemes))
    for i, s in enumerate(schemes):
        xs, ys, lo, hi = [], [], [], []
        for gi, (_label, point, cls) in enumerate(groups):
            x = gi + (i - (len(schemes) - 1) / 2) * width
            r = doc["results"].get(point, {}).get(s)
            if r is None:  # the scheme could not run this point: say so at its place
                ax.text(x, 0, "not run", rotation=90, ha="center", va="bottom", fontsize=6, color=f"C{i}")
                continue
            v = get(r, cls)
            if v is None or v.get("mean") is None:
                continue
            y, e = v["mean"] * scale, (v.get("ci95") or 0.0) * scale
            xs.append(x)
            ys.append(y)
            lo.append(min(e, y))  # every score is >= 0: the CI bar stops at 0
            hi.append(e)
        drawn = drawn or bool(xs)
        ax.bar(xs, ys, width, yerr=[lo, hi], capsize=2, label=s, color=f"C{i}")
    if hline is not None:
        ax.axhline(hline, color="k", lw=0.8, ls=":")
    ax.set_xticks(range(len(groups)), [g[0] for g in groups], fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    handles = [Patch(color=f"C{i}", label=s) for i, s in enumerate(schemes)]  # also for schemes not run
    _legend_outside(ax, handles)
    fig.tight_layout()
    if drawn:
        save_figure_atomic(fig, path, dpi=110)
    else:
        path.unlink(missing_ok=True)
    plt.close(fig)


def _legend_outside(ax: Any, handles: list[Any] | None = None) -> None:
    """The legend right of the axes, where it cannot cover a bar."""
    ax.legend(handles=handles, fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)


def plot_all(doc: dict[str, Any], out: Path) -> None:
    """guarantee.png, utilisation.png, spare.png, fct.png, got.png, paid.png, consistency.png, gaming.png,
    and shuffle.png for MapReduce points."""
    classes = [p["name"] for p in doc["purchases"]]
    guaranteed = [p["name"] for p in doc["purchases"] if p["guarantee"] > 0]
    pts = doc["points"]

    def per_class(cs: list[str]) -> list[tuple[str, str, str]]:
        return [(f"{p}\n{c}" if len(pts) > 1 else c, p, c) for p in pts for c in cs]

    def cls(key: str) -> Getter:
        return lambda r, c: r["classes"].get(c, {}).get(key) if r else None

    if guaranteed:
        _bars(
            doc,
            per_class(guaranteed),
            cls("fail_share"),
            "windows failed (%)",
            "Guarantee failures (demand >= G, got < G)",
            out / "guarantee.png",
            100,
        )
    _bars(
        doc,
        [(p, p, "") for p in pts],
        lambda r, _c: r["utilisation"] if r else None,
        "utilisation (%)",
        f"Utilisation of the {doc['bottlenecks']} channels",
        out / "utilisation.png",
        100,
    )
    _bars(
        doc,
        per_class(classes),
        cls("spare_vs_target"),
        "spare / target",
        "Share of spare bandwidth vs the weights' target (1 = on target)",
        out / "spare.png",
        hline=1.0,
    )
    _bars(
        doc,
        per_class(classes),
        lambda r, c: r["classes"].get(c, {}).get("fct", {}).get("small", {}).get("p99_ms") if r else None,
        "ms",
        "FCT of small flows (<= 100 KB), 99th percentile",
        out / "fct.png",
    )
    _bars(
        doc,
        per_class(classes),
        cls("got_bps"),
        "Mb/s (while backlogged)",
        "What each class got",
        out / "got.png",
        1e-6,
    )
    _bars(
        doc,
        per_class(classes),
        cls("paid_per_hour"),
        f"{doc['currency']} per VM-hour",
        "What each class paid",
        out / "paid.png",
    )
    _bars(
        doc,
        per_class(classes),
        cls("consistency"),
        "(got/got_ref) / (paid/paid_ref)",
        "Price-performance consistency (1 = consistent)",
        out / "consistency.png",
        hline=1.0,
    )
    if any((r or {}).get("shuffle") for res in doc["results"].values() for r in res.values()):
        groups = [(f"{c} jobs", p, c) for p in pts for c in ("all", "small", "medium", "large")]
        _bars(
            doc,
            groups,
            lambda r, c: (r.get("shuffle") or {}).get(c) if r else None,
            "ms",
            "MapReduce: mean job shuffle time",
            out / "shuffle.png",
            1e3,
        )
    g = doc.get("gaming")
    if g and g["results"]:
        schemes = [s for s in doc["schemes"] if s in g["results"]]
        ks = [str(k) for k in g["k"]]
        fig, ax = plt.subplots(figsize=(6.5, 3.6))
        width = 0.8 / max(1, len(schemes))
        for i, s in enumerate(schemes):
            xs = [ki + (i - (len(schemes) - 1) / 2) * width for ki in range(len(ks))]
            ys = [g["results"][s][k]["gain"]["mean"] or 0.0 for k in ks]
            es = [g["results"][s][k]["gain"]["ci95"] or 0.0 for k in ks]
            lo = [min(e, y) for e, y in zip(es, ys, strict=True)]
            ax.bar(xs, ys, width, yerr=[lo, es], capsize=2, label=s, color=f"C{doc['schemes'].index(s)}")
        ax.axhline(1.0, color="k", lw=0.8, ls=":")
        ax.set_xticks(range(len(ks)), [f"k = {k}" for k in ks])
        ax.set_ylabel("rate with k flows / a VM's with 1")
        ax.set_title(f"Gaming: one of {g['vms']} VMs opens k flows, same purchase", fontsize=10)
        _legend_outside(ax)
        fig.tight_layout()
        save_figure_atomic(fig, out / "gaming.png", dpi=110)
        plt.close(fig)
