"""The results table of docs/kvm-guest.md, generated from ``paccp testbed kvm-guest`` outputs.

    .venv/bin/python tools/kvm_guest_table.py out/kvm-guest-run1 out/kvm-guest-run2 ...

One row per run directory (its ``summary.json``): the two VMs' mixes, the port rate, the guest alone
(mean / 10th percentile of its 100 ms windows), the FIFO phase (the guest's mean against its optimum),
the enforced phase (share of 100 ms windows within 10 % of the optimum, per VM, and the means against
the optimum) and how many of the run's checks hold.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def mix(vm: dict[str, Any]) -> str:
    """``cubic x 8, omega 1`` (``udp`` for a blaster)."""
    what = "UDP blaster" if vm["cc"] == "udp" else f"{vm['cc']} x {vm['conns']}"
    return f"{what}, omega {vm['omega']:g}"


def row(run: Path) -> str:
    """One markdown row of ``run``'s summary.json."""
    s = json.loads((run / "summary.json").read_text())
    ph, opt, vms = s["phases"], s["optimum_mbps"], s["vms"]
    alone, fifo, enf = ph["alone"], ph["fifo"], ph["enforced"]
    g_fifo = fifo["guest"]["mean_mbps"]
    held = sum(1 for c in s["checks"] if c["holds"])
    return (
        f"| {run.name} | {mix(vms['guest'])} vs {mix(vms['ns'])} | {s['rate_mbps']:g} Mbit/s "
        f"| {alone['guest']['mean_mbps']:.1f} / {alone['p10_mbps']:.1f} "
        f"| {g_fifo:.2f} vs {opt['guest']:.2f} ({g_fifo / opt['guest']:.2f}x) "
        f"| {enf['guest']['within_10pct']:.0%}, {enf['ns']['within_10pct']:.0%} "
        f"| {enf['guest']['mean_mbps']:.2f} / {enf['ns']['mean_mbps']:.2f} vs "
        f"{opt['guest']:.2f} / {opt['ns']:.2f} | {held} of {len(s['checks'])} |"
    )


HEADER = (
    "| run | guest (QEMU) vs namespace guest | port | guest alone: mean / p10 Mbit/s "
    "| FIFO: guest vs its optimum | enforced: guest, ns windows within 10 % "
    "| enforced means vs optimum (Mbit/s) | checks held |\n"
    "|---|---|---|---|---|---|---|---|"
)


def main(argv: list[str]) -> int:
    """Print the table of the run directories in ``argv``."""
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    print(HEADER)
    for d in argv:
        print(row(Path(d)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
