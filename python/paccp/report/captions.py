"""What each plot shows and what to look for: the captions of ``paccp report``.

A caption is chosen by the section's kind (an experiment id, ``run``, ``compare``) and the PNG's name; the
same file name means different things in different experiments (``rates.png``, ``utilisation.png``,
``fct.png``), so experiment-specific captions come first. Terms: docs/glossary.md.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import PurePath
from typing import Any

# (section kind or "*", file name) -> caption
_FIXED: dict[tuple[str, str], str] = {
    # comparisons (paccp compare)
    ("compare", "guarantee.png"): "Guarantees: share of measurement windows in which a class that wanted at "
    "least its guarantee got less, per scheme. Look for: bars at 0 for the schemes that sell guarantees.",
    ("compare", "spare.png"): "Weights: the share of the spare bandwidth (above the guarantees) each class "
    "got, divided by what its weight entitles it to. Look for: bars on the dotted line at 1.",
    ("compare", "got.png"): "Weights: the rate each class got while it had data to send, per scheme. Look "
    "for: classes with higher weights (DS, MRG) above BE.",
    ("compare", "utilisation.png"): "Utilisation of the bottleneck channels, per scheme. Look for: schemes "
    "that keep guarantees without leaving capacity idle (bars near the top).",
    ("compare", "fct.png"): "FCT: 99th-percentile completion time of small flows (up to 100 KB) per class "
    "and scheme. Look for: short bars for the classes that pay for priority.",
    ("compare", "shuffle.png"): "FCT (MapReduce): mean shuffle time per job class and scheme. Look for: "
    "short bars, and large jobs not starved.",
    ("compare", "paid.png"): "Price: what each class paid per VM-hour under each scheme's price book.",
    ("compare", "consistency.png"): "Price: (what a class got / what the reference class got) divided by "
    "(what it paid / what the reference paid); the reference is the class with the smallest weight. Look "
    "for: bars on the dotted line at 1 (a class gets what it pays for).",
    ("compare", "gaming.png"): "Gaming: the rate of a VM that opens k flows divided by a VM's with one flow "
    "on the same purchase. Look for: bars at 1 (opening more flows does not pay).",
    # workload experiments
    ("*", "fct_norm.png"): "Mean FCT of DS and MRG flows divided by BE's, per size class and load, with "
    "95 % confidence intervals. Look for: points below the dashed line at 1 (faster than BE).",
    ("*", "meet_rate.png"): "Share of flows that finish before their deadline, per CoS, size class and "
    "load. Look for: MRG and DS above BE, MRG near 1.",
    ("*", "rcos.png"): "The rcos study: MRG's deadline meet rate and the mean and 99th-percentile FCT of all "
    "flows as rcos grows. Look for: the rcos where MRG meets its deadlines without slowing everyone.",
    # SoftBW experiments
    ("softbw-oc", "utilisation.png"): "Utilisation against the over-commitment factor, strict vs dynamic "
    "guarantees, per demand model. Look for: higher utilisation as more is sold.",
    ("softbw-oc", "failures.png"): "Share of guarantees not met against the over-commitment factor. Look "
    "for: how much can be sold before failures rise.",
    ("softbw-oc", "analytic.png"): "The analytic model next to the simulation: failures and utilisation "
    "against over-commitment. Look for: the two curves agreeing.",
    ("*", "share.png"): "Per-VM rate per fabric, VM count and scheme, with the guarantee line. Look for: "
    "every VM at or above its guarantee.",
    ("*", "fig7_fig8.png"): "Mean BG and WC rate per receive-buffer setting, one panel per (guarantee, "
    "delay). Look for: BG at the guarantee whatever the buffer.",
    ("*", "fig17.png"): "The WC subflow's rate over time, dynamic vs fixed receive buffer. Look for: the "
    "dynamic buffer letting WC use the spare.",
    ("*", "fig5_fig16.png"): "The servers' BG rate over time, one panel per (buffer, scheduler). Look for: "
    "BG holding its guarantee with every scheduler.",
    ("*", "wc_by_cc.png"): "WC rate per server under each congestion control (paper Fig. 3). Look for: "
    "the spare shared by the servers' competition levels.",
    ("*", "shuffle_cdf.png"): "Distribution of MapReduce shuffle times per scheme. Look for: curves to the "
    "left (faster shuffles).",
    ("*", "shuffle_mean.png"): "Mean shuffle time per scheme (paper Fig. 20). Look for: the lowest bar.",
}
_BY_EXPERIMENT: dict[str, dict[str, str]] = {
    "softbw-converge": {
        "rates.png": "Per-VM rate over time (5 ms means), one panel per scheme and traffic. Look for: "
        "how fast each VM reaches its share after a change."
    },
    "softbw-price": {
        "rates.png": "Per-VM rate and fulfilment over time (10 s means), one column per host. Look for: "
        "VMs that are charged for more than they got."
    },
    "softbw-short": {
        "fct.png": "Mean short-flow FCT per size class and scheme (left) and the ES / SoftBW ratio per seed "
        "(right). Look for: ratios above 1."
    },
}
_MPTCP_CLASS = {
    "bg": "the BG subflows (the guaranteed path); dotted: each VM's guarantee. Look for: each VM's line on "
    "its dotted line (with UDP traffic, below it by the UDP rate, which shares the VM's shaper)",
    "wc": "the WC subflows (the work-conserving paths sharing the spare). Look for: the spare shared, not "
    "left idle",
    "udp": "the constant-rate UDP flows. Look for: steady lines at their sending rate",
    "tcp": "single-path TCP (free competition). Look for: shares following the flow count, not a guarantee",
    "total": "all of each VM's traffic; dotted: its guarantee. Look for: every VM at or above its dotted "
    "line",
}


def caption(kind: str, png: PurePath, summary: Mapping[str, Any]) -> str:
    """The caption of ``png`` (relative to its section's directory) in a section of ``kind``."""
    name = png.name
    where = " / ".join(png.parent.parts)
    prefix = f"{where}: " if where else ""
    if name in _BY_EXPERIMENT.get(kind, {}):
        return prefix + _BY_EXPERIMENT[kind][name]
    for key in ((kind, name), ("*", name)):
        if key in _FIXED:
            return prefix + _FIXED[key]
    m = re.fullmatch(r"rate_(.+)\.png", name)
    if m:
        cls = m.group(1)
        if kind.startswith("mptcp-") and cls in _MPTCP_CLASS:
            return f"{prefix}Per-VM delivered rate over time of {_MPTCP_CLASS[cls]}."
        c = (summary.get("classes") or {}).get(cls, {})
        lines = []
        if isinstance(c, dict) and c.get("optimal_bps"):
            lines.append("dashed: the optimum (weighted proportional fairness)")
        if isinstance(c, dict) and c.get("theta_bps"):
            lines.append("dotted red: theta, the guarantee per flow")
        look = "Look for: the mean settling"
        look += " on the dashed line" if lines and "dashed" in lines[0] else ""
        look += " and the band staying above the dotted line" if any("dotted" in x for x in lines) else ""
        return (
            f"{prefix}Class {cls}: mean delivered rate per flow over simulated time, with the 10th-90th "
            f"percentile band across its flows" + (f"; {'; '.join(lines)}" if lines else "") + f". {look}."
        )
    words = re.sub(r"[_\-]+", " ", PurePath(name).stem)
    return f"{prefix}{kind}: {words} (no description for this plot)"


def compare_pngs() -> set[str]:
    """The PNGs of a comparison that its report places under their questions."""
    return {name for (kind, name) in _FIXED if kind == "compare"}
