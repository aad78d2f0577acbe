"""What the testbed commands of every scheme print: a summary's checks and its paper / testbed / simulator
comparison, and the simulated seconds of the simulator column."""

from __future__ import annotations

from typing import Any

from paccp.common import console as cons


def checks_table(summary: dict[str, Any]) -> None:
    t = cons.table("statement", "paper", "testbed", "holds", title=summary.get("experiment", ""))
    for c in summary["checks"]:
        cons.add_row(t, c["statement"], c["paper"], c["ours"], "yes" if c["holds"] else "NO")
    cons.print_table(t)
    if summary.get("compare"):
        c = cons.table(
            "quantity", "paper (scaled)", "testbed", "simulator", title="paper vs testbed vs simulator"
        )
        for row in summary["compare"]:
            cons.add_row(c, row["quantity"], row["paper"], row["testbed"], row["simulator"])
        cons.print_table(c)


SIM_HELP = "also run the simulator's scheme on the same topology, rates and queues (a few seconds)"


def sim_seconds(simulate: bool) -> float | None:
    """Simulated seconds for the simulator column (None: no column)."""
    from paccp.datapath.core import sim_predict

    return sim_predict.SIM_S if simulate else None
