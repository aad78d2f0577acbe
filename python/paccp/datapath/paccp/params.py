"""Checks of user input for the PACCP datapath (by :mod:`paccp.limits`), run before the kernel is touched."""

from __future__ import annotations

from paccp import limits
from paccp.datapath.paccp.maps import pack_params
from paccp.errors import UserError


def check_pair(
    theta: str | int, omega: float, theta_opt: str = "--theta", omega_opt: str = "--omega"
) -> tuple[int, float]:
    """Validate a (theta, omega) pair from user input (theta accepts "400Mbit"), by :mod:`paccp.limits`.

    Pure: called before anything touches the kernel; the pair then packs into the maps without error.
    """
    theta_bps = limits.check_rate(theta, theta_opt)
    om = limits.check_number(omega, omega_opt, 0.0, limits.MAX_DATAPATH_OMEGA, lo_open=True)
    pack_params(theta_bps, om)  # fits the map's fields (u64 theta, u32 omega Q20)
    return theta_bps, om


def check_rcos(rcos: object, option: str = "--rcos") -> float:
    """rcos of ``load``: finite, in [1, 10^6] (checked before the BPF program is loaded)."""
    return limits.check_number(rcos, option, 1.0, limits.MAX_RCOS)


def check_port(port: int, option: str = "--port") -> int:
    return limits.check_int(port, option, 1, limits.MAX_PORT)


def check_tenant(tenant: str | None) -> str | None:
    if tenant is not None and not 1 <= len(tenant) <= 128:
        raise UserError("--tenant must be 1..128 characters")
    return tenant
