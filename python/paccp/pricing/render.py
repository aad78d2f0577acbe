"""The text of the pricing reports: an invoice's table and the per-VM SoftBW consistency table, the same
for ``paccp bill invoice`` / ``paccp price consistency`` and for experiments that save them as text."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import TYPE_CHECKING

from paccp.common import console as cons
from paccp.units import format_rate

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from paccp.pricing.charging import Invoice


def invoice_table(inv: Invoice, tenant: str, period: str, model: str) -> Table:
    """An invoice's line items per VM/flow and CoS, the subtotals per CoS and the total."""
    cols = (
        "vm",
        "flow",
        "cos",
        "theta",
        "omega",
        "item",
        "quantity",
        "unit price",
        f"amount ({inv.currency})",
    )
    tab = cons.table(
        *cols,
        title=f"invoice {tenant} {period} ({model.upper()}, {inv.records} records)",
        right=tuple(c for c in cols if c in ("quantity", "unit price") or c.startswith("amount")),
    )
    for d in inv.to_json()["lines"]:
        cells = (
            d["vm"], d["flow_id"] or "-", d["cos"], format_rate(d["theta_bps"]), d["omega"], d["description"],
            f"{d['quantity']} {d['unit']}", d["unit_price"], d["amount"],
        )  # fmt: skip
        cons.add_row(tab, *cells)
    for cos, sub in inv.subtotals.items():
        cons.add_row(tab, "", "", "", "", "", f"subtotal {cos}", "", "", sub)
    cons.add_row(
        tab, "", "", "", "", "", cons.styled("TOTAL", "bold"), "", "", cons.styled(inv.total, "bold")
    )
    return tab


def as_text(render: Callable[[Console], None]) -> str:
    """What ``render`` prints on a console, as the plain text a pipe gets."""
    buf = io.StringIO()
    render(cons.console(file=buf))
    return buf.getvalue()


def table_text(tab: Table) -> str:
    """A table as the plain text a pipe gets."""
    return as_text(lambda c: c.print(tab))
