"""Flow rules: a (theta, omega) for the sockets of an owner cgroup (or the whole host) by port."""

from __future__ import annotations

from typing import Any

from paccp.datapath.core import bpfsys, cgroups
from paccp.datapath.paccp import params
from paccp.datapath.paccp.maps import PARAMS, RULE_KEY, U32, U64, Maps, pack_params, q20_to_omega
from paccp.errors import UserError


def sync_rule_count(m: Maps) -> None:
    """Write the number of rules into paccp_global (0 lets the BPF side skip every rule lookup)."""
    n = sum(1 for _ in bpfsys.items(m.fd("paccp_rules"), RULE_KEY.size, PARAMS.size))
    bpfsys.update(m.fd("paccp_nrules"), U32.pack(0), U64.pack(n))


def rule_owner(cgroup: str | None, host_wide: bool) -> tuple[int, str]:
    """A rule's owner: a cgroup (id, path) or, explicitly, the whole host (0, "host-wide")."""
    if host_wide and cgroup:
        raise UserError("give either --cgroup (the rule's owner) or --host-wide, not both")
    if host_wide:
        return 0, "host-wide"
    if not cgroup:
        raise UserError(
            "a flow rule needs an owner: --cgroup PATH (only that cgroup's sockets get the pair), "
            "or --host-wide to give it to every process on the host"
        )
    cg = cgroups.resolve_cgroup(cgroup)
    return cg.cgid, cg.rel


def rule_set(
    port: int,
    theta: str | int,
    omega: float,
    cgroup: str | None = None,
    host_wide: bool = False,
    tenant: str | None = None,
) -> str:
    """A flow rule: paccp sockets of ``cgroup`` (or its children, two levels) whose destination (or local)
    port is ``port`` use this pair; with ``host_wide`` every paccp socket on the host does. Returns the
    owner's name. Sockets outside the owner's cgroup keep the default pair (0, 1) whatever their port.
    """
    theta_bps, om = params.check_pair(theta, omega)
    port = params.check_port(port)
    owner, name = rule_owner(cgroup, host_wide)
    params.check_tenant(tenant)
    if owner:
        cgroups.remember(cgroups.resolve_cgroup(cgroup or ""), tenant)
    with Maps() as m:
        bpfsys.update(m.fd("paccp_rules"), RULE_KEY.pack(owner, port, 0), pack_params(theta_bps, om))
        sync_rule_count(m)
    return name


def rule_clear(port: int, cgroup: str | None = None, host_wide: bool = False) -> bool:
    """Remove the rule of ``port`` owned by ``cgroup`` (or the host-wide one)."""
    port = params.check_port(port)
    owner, _name = rule_owner(cgroup, host_wide)
    with Maps() as m:
        existed = bpfsys.delete(m.fd("paccp_rules"), RULE_KEY.pack(owner, port, 0))
        sync_rule_count(m)
    return existed


def list_rules(m: Maps) -> list[dict[str, Any]]:
    paths = cgroups.cgroup_paths()
    out = []
    for k, v in bpfsys.items(m.fd("paccp_rules"), RULE_KEY.size, PARAMS.size):
        owner, port, _pad = RULE_KEY.unpack(k)
        theta, omq, _f = PARAMS.unpack(v)
        out.append(
            {
                "port": port,
                "owner": paths.get(owner, f"cgroup:{owner}") if owner else "host-wide",
                "owner_cgid": owner,
                "theta_bps": theta,
                "omega": float(q20_to_omega(omq)),
            }
        )
    return sorted(out, key=lambda r: (r["port"], r["owner"]))
