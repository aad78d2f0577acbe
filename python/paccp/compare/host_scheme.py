"""Scheme ``paccp-host`` of the comparison: PACCP's purchase enforced at the VM's host (issue 25).

Mapping: the VM's pair (theta, omega) = (G, W) is read by the host's egress stage (scenario scheme
``paccp_host``, :mod:`paccp.scenario.schemes.paccp_host`); the guests run plain Reno (the host does not
rely on the guest's transport). Price: the ``[vbp]`` section, P0 + P1 (W-1) + P2 G per VM-hour, as
``paccp-vbp``: the product sold is the same VM pair, only where it is enforced changes.

:data:`ABLATIONS` are the ablation schemes (one part of the mechanism off each) and :data:`VARIANTS`
changes not shipped (kept so that their measurements in docs/host-scheme.md can be made again);
``paccp compare`` runs neither by default.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from paccp.errors import UserError
from paccp.pricing.quote import linear_terms

if TYPE_CHECKING:
    from paccp.compare.schemes import VmUse
    from paccp.compare.setup import Setup, SetupVm
    from paccp.compare.spec import Purchase
    from paccp.pricing.book import PriceBook


def build_with(**scheme: Any) -> Callable[[Setup], dict[str, Any]]:
    """A build function: VMs with (G, W), Reno guests, ``[scheme] kind = "paccp_host"`` + ``scheme``."""

    def build(setup: Setup) -> dict[str, Any]:
        sc = copy.deepcopy(setup.base)
        sc["vms"] = [
            {
                "id": v.id,
                "host": v.host,
                "label": v.id,
                "theta": v.purchase.guarantee,
                "omega": v.purchase.weight,
            }
            for v in setup.vms
        ]
        sc["flows"] = [{**f, "label": f["vm"]} for f in setup.flows]
        sc["cc"] = {"kind": "reno"}
        sc["scheme"] = {"kind": "paccp_host", **scheme}
        return sc

    return build


def price(book: PriceBook, vm: SetupVm, use: VmUse) -> Decimal:
    """[vbp] P0 + P1 (W-1) + P2 G per VM-hour (the VBP price of the same pair)."""
    sec = getattr(book, "vbp", None)
    if sec is None:
        raise UserError(f"price book {book.name!r} has no [vbp] section (needed by the comparison)")
    p = vm.purchase
    return sum((t[2] for t in linear_terms(sec, p.cos, p.guarantee, Decimal(str(p.weight)))), Decimal(0))


def params(p: Purchase) -> dict[str, Any]:
    """(theta, omega) = (G, W), enforced at the host."""
    return {"theta_bps": p.guarantee, "omega": p.weight, "cos": p.cos}


#: Ablations: name suffix -> the scheme section's switch that turns one part off.
ABLATIONS: dict[str, dict[str, Any]] = {
    "no-alloc": {"alloc": "equal"},
    "no-vm": {"per_vm": False},
    "no-fabric": {"window": "cap"},
    "no-window": {"window": "off"},
    "no-start": {"start": False},
    "no-loss": {"loss": False},
    "no-fluid": {"fluid": False},
    "no-pool": {"pool": False},
    "no-split": {"split": False},
    "no-merge": {"merge": False},
    "no-turns": {"turns": False},
    "no-dedup": {"dedup": False},
    "no-retag": {"retag": False},
    "no-prio": {"prio": False},
}

#: Variants: name suffix -> switches of changes not shipped (docs/host-scheme.md, "Not solved").
VARIANTS: dict[str, dict[str, Any]] = {
    # the law grows in marked time too, and a paced connection keeps a segment of credit: the fabric
    # gaming points' many-connection VM gets 0.78-1.05 of its share (0.62-0.96 as shipped), but the
    # leaf-spine's MRG and the Clos file's gold fail above their bars
    "grow": {"grow_marked": True, "pace_credit": True},
}
