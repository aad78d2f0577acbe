"""Measuring an ``mptcp_bgwc`` run: delivered rate per VM and per subflow class, over time and on average.

Subflow classes: ``bg`` (the BG subflow), ``wc`` (all WC subflows of the VM), ``udp`` (its constant-rate
flows), ``tcp`` (single-path TCP: the free-competition variant). The class of an engine flow record is
the suffix of its id after the last ``/`` (``f1/bg``, ``f1/wc0``, ``u1/udp``); a record without one is
``tcp``. Rates are delivered (acknowledged) payload rates in Mb/s, from the engine's samples.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

CLASSES = ("bg", "wc", "udp", "tcp")


def subflow_class(flow_id: str) -> str:
    """``bg`` / ``wc`` / ``udp`` from the id's suffix, else ``tcp``."""
    if "/" not in flow_id:
        return "tcp"
    tail = flow_id.rsplit("/", 1)[1]
    if tail == "bg" or tail == "udp":
        return tail
    if tail.startswith("wc"):
        return "wc"
    return "tcp"


@dataclass(frozen=True)
class Measured:
    """Per (VM, class): rate series and mean over the measurement window, in Mb/s."""

    times_s: np.ndarray
    series: dict[tuple[str, str], np.ndarray]
    mean: dict[tuple[str, str], float]
    wall_s: float
    stats: dict[str, int]
    # The engine's connection records (column -> values), when the run has connections.
    connections: dict[str, list[Any]] | None = None

    def rate(self, vm: str, cls: str) -> float:
        """Mean rate of a VM's class (0 when it has none)."""
        return self.mean.get((vm, cls), 0.0)

    def total(self, vm: str) -> float:
        """Mean rate of all of a VM's traffic."""
        return sum(v for (w, _), v in self.mean.items() if w == vm)

    def window_mean(self, vm: str, cls: str, start_s: float, end_s: float) -> float:
        """Mean of a VM's class over the sample intervals ending in (start_s, end_s]."""
        s = self.series.get((vm, cls))
        if s is None:
            return 0.0
        sel = (self.times_s > start_s + 1e-12) & (self.times_s <= end_s + 1e-12)
        return float(s[sel].mean()) if sel.any() else 0.0


def measure(spec: dict[str, Any], *, description: str) -> Measured:
    """Validate and run a scenario; aggregate its sampled flows by (VM, class)."""
    from paccp.scenario import parse_scenario, to_engine
    from paccp.sim.rundir import run_engine, sample_rates

    sc = parse_scenario(spec, where=description)
    result, wall = run_engine(to_engine(sc), description=description)
    times, ids, rates = sample_rates(result)
    vm_of = dict(
        zip(result.flows.column("id").to_pylist(), result.flows.column("vm").to_pylist(), strict=True)
    )
    series: dict[tuple[str, str], np.ndarray] = {}
    for i, fid in enumerate(ids):
        key = (str(vm_of[fid]).split("/", 1)[0], subflow_class(fid))  # engine VM "v/wc" is VM v
        mbps = rates[i] / 1e6
        series[key] = series[key] + mbps if key in series else mbps.copy()
    first = -(-sc.run.warmup // result.samples.interval_ns)
    mean = {k: float(v[first:].mean()) if v[first:].size else 0.0 for k, v in series.items()}
    conns = None if result.connections is None else result.connections.to_pydict()
    return Measured(times, series, mean, wall, dict(result.stats), conns)


# The panels that draw each VM's guarantee as a dotted line (WC, UDP and TCP have none of their own).
GUARANTEED_PANELS = ("bg", "total")


def panel_title(
    title: str, cls: str, vms: Mapping[str, Any], guarantee_mbps: Mapping[str, float] | None
) -> str:
    """A rate panel's title; "(dotted: guarantee)" only where a dotted line is drawn."""
    dotted = cls in GUARANTEED_PANELS and bool(guarantee_mbps) and any(v in guarantee_mbps for v in vms)  # type: ignore[operator]
    return f"{title}: {cls}" + (" (dotted: guarantee)" if dotted else "")


def plot_vm_classes(
    m: Measured, out: Path, *, title: str, guarantee_mbps: Mapping[str, float] | None = None
) -> list[Path]:
    """``rate_<class>.png`` per class present and ``rate_total.png``: one line per VM over time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    vms = sorted({vm for vm, _ in m.series})
    panels: dict[str, dict[str, np.ndarray]] = {}
    for (vm, cls), s in sorted(m.series.items()):
        panels.setdefault(cls, {})[vm] = s
    panels["total"] = {vm: np.sum([s for (w, _), s in m.series.items() if w == vm], axis=0) for vm in vms}
    written = []
    for cls, lines in panels.items():
        fig, ax = plt.subplots(figsize=(6, 3.2), dpi=100)
        for k, (vm, s) in enumerate(sorted(lines.items())):
            color = f"C{k % 10}"
            ax.plot(m.times_s, s, lw=1.2, color=color, label=vm)
            if guarantee_mbps and vm in guarantee_mbps and cls in GUARANTEED_PANELS:
                ax.axhline(guarantee_mbps[vm], color=color, ls=":", lw=0.8)
        ax.set_xlabel("simulated time (s)")
        ax.set_ylabel("Mb/s")
        ax.set_ylim(bottom=0)
        ax.set_title(panel_title(title, cls, lines, guarantee_mbps))
        ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)  # off the lines
        fig.tight_layout()
        path = out / f"rate_{cls}.png"
        fig.savefig(path, metadata={"Software": None})
        plt.close(fig)
        written.append(path)
    return written


def write_summary(out: Path, summary: dict[str, Any]) -> None:
    """``summary.json`` (sorted keys)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def print_checks(title: str, checks: list[dict[str, Any]]) -> None:
    """The paper-vs-ours table of an experiment's checks (labels such as ``[drop-tail]`` kept literally)."""
    from paccp.common import console as cons

    t = cons.table("check", "paper", "ours", "holds", title=title)
    for c in checks:
        cons.add_row(t, c["statement"], c["paper"], c["ours"], "yes" if c["holds"] else "NO")
    cons.print_table(t)


def congestion_epochs(cuts: Mapping[str, np.ndarray], gap: int) -> list[set[str]]:
    """Group window reductions into congestion epochs: sorted over all subflows, a reduction more than
    ``gap`` samples after the previous one starts a new epoch. Returns, per epoch, the subflows that cut."""
    events = sorted((int(t), f) for f, ts in cuts.items() for t in ts)
    epochs: list[set[str]] = []
    last = None
    for t, f in events:
        if last is None or t - last > gap:
            epochs.append(set())
        epochs[-1].add(f)
        last = t
    return epochs


def rerun_sampled(spec: dict[str, Any], *, seconds: float, description: str) -> Any:
    """``spec`` rerun for ``seconds`` (the first fifth as warm-up) with every flow's window and srtt
    sampled every 100 us; the engine's result."""
    from paccp.scenario import parse_scenario, to_engine
    from paccp.sim.rundir import run_engine

    s = dict(spec, run=dict(spec["run"]))
    s["run"].update(
        {
            "duration": f"{seconds:g}s",
            "warmup": f"{seconds / 5:g}s",
            "sample_interval": "100us",
            "sample_cwnd": True,
        }
    )
    result, _ = run_engine(to_engine(parse_scenario(s, where=description)), description=description)
    return result


def loss_sync(
    spec: dict[str, Any], *, description: str, seconds: float, window_s: float = 2e-3
) -> dict[str, Any]:
    """Why WC shares are what they are: rerun ``spec`` for ``seconds`` with every flow's window sampled
    every 100 us and report, per WC subflow, its mean window, its loss rate (retransmissions per delivered
    segment) and its window reductions (a sample more than 20 % below the previous one), and, for each pair
    of WC subflows, the fraction of the first's reductions within ``window_s`` of one of the other's
    (near 100 %: synchronised losses, every subflow halves at every congestion epoch).

    ``epochs``: who loses at each overflow. Reductions of all WC subflows are grouped into congestion
    epochs (a new epoch after ``window_s`` without any); per subflow the fraction of epochs in which it
    cut (1.0 for every subflow: fully synchronised; about its share of the packets: independent
    per-packet losses, the Mathis model's assumption behind Eq. 7), the mean fraction of subflows cutting
    per epoch, and the retransmissions (segments lost) per epoch."""
    result = rerun_sampled(spec, seconds=seconds, description=description)
    smp = result.samples
    cw = smp.cwnd_pkts
    if cw is None:
        return {}
    first = smp.acked_bytes.shape[1] // 5
    recs = {str(r["id"]): r for r in result.flows.to_pylist()}
    cuts: dict[str, np.ndarray] = {}
    out: dict[str, Any] = {"subflows": {}, "pairs": {}}
    for i, fid in enumerate(smp.flow_ids):
        if subflow_class(fid) != "wc":
            continue
        c = cw[i][first:]
        cuts[fid] = np.nonzero(c[1:] < 0.8 * c[:-1])[0]
        r = recs[fid]
        segs = max(1.0, int(r["bytes_acked"]) / 1460)
        out["subflows"][fid] = {
            "mean_cwnd_pkts": float(c.mean()) if c.size else 0.0,
            "loss_rate": int(r["retransmits"]) / segs,
            "window_reductions": int(cuts[fid].size),
            "timeouts": int(r["timeouts"]),
        }
    w = max(1, round(window_s / 1e-4))
    names = sorted(cuts)
    for k, a in enumerate(names):
        for b in names[k + 1 :]:
            da, db = cuts[a], cuts[b]
            near = sum(1 for x in da if db.size and np.min(np.abs(db - x)) <= w)
            out["pairs"][f"{a} ~ {b}"] = near / da.size if da.size else None
    epochs = congestion_epochs(cuts, w)
    if epochs:
        all_cuts = {
            f: np.nonzero(cw[i][1:] < 0.8 * cw[i][:-1])[0] for i, f in enumerate(smp.flow_ids) if f in cuts
        }
        lost = sum(int(recs[f]["retransmits"]) for f in cuts)
        out["epochs"] = {
            "count": len(epochs),
            "cut_in_fraction_of_epochs": {f: sum(f in e for e in epochs) / len(epochs) for f in names},
            "mean_fraction_cutting": float(np.mean([len(e) / len(names) for e in epochs])),
            "segments_lost_per_epoch": lost / max(1, len(congestion_epochs(all_cuts, w))),
        }
    return out
