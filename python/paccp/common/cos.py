"""Classes of service: the one owner of the rules that relate a class (BE, DS, MRG) to a (theta, omega) pair.

Every other module calls these functions instead of restating a rule:

- :func:`classify`: the pair rule, theta > 0 -> ``mrg``, else omega > 1 -> ``ds``, else ``be`` (scenario
  labels, run outputs, usage records of the simulator and of the datapath);
- :func:`flow_cos`: the class of one flow in run outputs: its own ``cos`` field, else its VM's, else
  :func:`classify` of its initial pair;
- :func:`from_label`: the class named by a label (``"MRG"``, ``"ds"``) or None (workload experiments read a
  flow's class from its label);
- :func:`pair_error` / :func:`purchase_error`: the pair checks, either *consistent* (what a scenario or a
  usage record may say: ``be``/``ds`` have theta = 0, ``mrg`` has theta > 0; omega is free because VBP
  splits a VM's omega over its flows) or *purchase* (what a tenant may buy: BE (0, 1), DS (0, omega > 1),
  MRG (theta > 0, omega >= 1));
- :func:`split_pair`: the VBP split of a VM's pair over its n active flows, (theta / n, omega / n). The
  engine (``crates/paccp-sim``, docs/engine-contract.md) and the BPF datapath apply the same split in their
  own languages; this is the Python side's only copy.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Literal, get_args

Cos = Literal["be", "ds", "mrg"]
COS_NAMES: tuple[Cos, ...] = get_args(Cos)

Number = int | float | Decimal


def classify(theta_bps: Number, omega: Number) -> Cos:
    """The pair rule: theta > 0 -> mrg, else omega > 1 -> ds, else be."""
    if theta_bps > 0:
        return "mrg"
    if omega > 1:
        return "ds"
    return "be"


def flow_cos(own: str | None, vm: str | None, theta_bps: Number, omega: Number) -> Cos:
    """A flow's class in run outputs: its ``cos`` field, else its VM's, else :func:`classify`."""
    chosen = own or vm
    if chosen is not None:
        return _as_cos(chosen)
    return classify(theta_bps, omega)


def from_label(label: str | None) -> Cos | None:
    """The class a label names (case-insensitive ``be``/``ds``/``mrg``), or None for any other label."""
    lab = str(label).lower() if label is not None else ""
    return _as_cos(lab) if lab in COS_NAMES else None


def pair_error(cos: str, theta_bps: Number) -> str | None:
    """Why a (class, theta) is inconsistent, or None: ``mrg`` needs theta > 0, ``be``/``ds`` theta = 0."""
    if cos not in COS_NAMES:
        return f"unknown class of service {cos!r} (expected be, ds or mrg)"
    if cos == "mrg" and theta_bps <= 0:
        return "'mrg' needs theta > 0"
    if cos in ("be", "ds") and theta_bps != 0:
        return f"{cos!r} needs theta = 0 (theta > 0 is 'mrg')"
    return None


def purchase_error(cos: str, theta_bps: Number, omega: Number) -> str | None:
    """Why a purchase is not one of the paper's classes, or None: BE (0, 1), DS (0, > 1), MRG (> 0, >= 1)."""
    if cos not in COS_NAMES:
        return f"unknown cos {cos!r} (expected be, ds or mrg)"
    if theta_bps < 0:
        return "theta must not be negative"
    if cos == "be" and (theta_bps != 0 or omega != 1):
        return "a be purchase is (theta, omega) = (0, 1)"
    if cos == "ds" and (theta_bps != 0 or omega <= 1):
        return "a ds purchase needs theta = 0 and omega > 1"
    if cos == "mrg" and (theta_bps <= 0 or omega < 1):
        return "an mrg purchase needs theta > 0 and omega >= 1"
    return None


def split_pair(theta_bps: float, omega: float, n_flows: int) -> tuple[float, float]:
    """A VM's pair split equally over its ``n_flows`` active flows (VBP): (theta / n, omega / n)."""
    n = max(1, int(n_flows))
    return theta_bps / n, omega / n


def _as_cos(name: str) -> Cos:
    if name == "be":
        return "be"
    if name == "ds":
        return "ds"
    if name == "mrg":
        return "mrg"
    raise ValueError(f"unknown class of service {name!r} (expected be, ds or mrg)")
