"""One PNG per score, schemes side by side (grouped bars with 95 % CI error bars)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

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
    """groups: (label, point, class); one bar per scheme in each group."""
    schemes = doc["schemes"]
    fig, ax = plt.subplots(figsize=(max(6.0, 0.5 * len(groups) * len(schemes)), 3.6))
    width = 0.8 / max(1, len(schemes))
    for i, s in enumerate(schemes):
        xs, ys, es = [], [], []
        for gi, (_label, point, cls) in enumerate(groups):
            r = doc["results"].get(point, {}).get(s)
            v = get(r, cls) if r is not None else None
            if v is None or v.get("mean") is None:
                continue
            xs.append(gi + (i - (len(schemes) - 1) / 2) * width)
            ys.append(v["mean"] * scale)
            es.append((v.get("ci95") or 0.0) * scale)
        ax.bar(xs, ys, width, yerr=es, capsize=2, label=s)
    if hline is not None:
        ax.axhline(hline, color="k", lw=0.8, ls=":")
    ax.set_xticks(range(len(groups)), [g[0] for g in groups], fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, ncol=min(len(schemes), 6))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_all(doc: dict[str, Any], out: Path) -> None:
    """guarantee.png, utilisation.png, spare.png, fct.png, consistency.png, paid_got.png, gaming.png."""
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
            ax.bar(xs, ys, width, yerr=es, capsize=2, label=s)
        ax.axhline(1.0, color="k", lw=0.8, ls=":")
        ax.set_xticks(range(len(ks)), [f"k = {k}" for k in ks])
        ax.set_ylabel("rate with k flows / with 1")
        ax.set_title(f"Gaming: one of {g['vms']} VMs opens k flows, same purchase", fontsize=10)
        ax.legend(fontsize=7, ncol=min(len(schemes), 6))
        fig.tight_layout()
        fig.savefig(out / "gaming.png", dpi=110)
        plt.close(fig)
