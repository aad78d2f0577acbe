"""A VM's (theta, omega): its cgroup programs, its pair in the maps, its metering slices, and the reaping
of what belongs to removed cgroups."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

from paccp.datapath.core import bpfsys, cgroups
from paccp.datapath.paccp import params, rules
from paccp.datapath.paccp.maps import (
    CGROUP_PROGS,
    KIND_VM,
    PARAMS,
    PIN_DIR,
    Q20,
    RULE_KEY,
    SLICE,
    SLICE_KEY,
    U64,
    VM_STATE,
    Maps,
    omega_to_q20,
    pack_params,
)


def attach_sockops(cg: cgroups.CgroupRef) -> None:
    """Attach the VM programs to a cgroup: sockops (selects paccp) and the setsockopt guard (keeps it)."""
    for at, name in CGROUP_PROGS:
        cgroups.attach_cgroup_prog(cg.path, at, Path(PIN_DIR, name))


def detach_sockops(cg: cgroups.CgroupRef) -> None:
    for at, name in CGROUP_PROGS:
        cgroups.detach_cgroup_prog(cg.path, at, Path(PIN_DIR, name))


def vm_set(
    cgroup: str, theta: str | int, omega: float, tenant: str | None = None, host_wide: bool = False
) -> cgroups.CgroupRef:
    """Give a VM (cgroup) its (theta, omega); its connections use paccp from now on (VBP split).

    Its metering slice starts now (a VM with no traffic is metered too) and is closed by the next
    ``vm set``, by ``vm clear`` or when the cgroup is removed.
    """
    theta_bps, om = params.check_pair(theta, omega)
    cg = cgroups.resolve_cgroup(cgroup, host_wide=host_wide)
    params.check_tenant(tenant)
    cgroups.remember(cg, tenant)
    with Maps() as m:
        attach_sockops(cg)
        bpfsys.update(m.fd("paccp_vm_cfg"), U64.pack(cg.cgid), pack_params(theta_bps, om))
        fresh = VM_STATE.pack(0, 0, 0, theta_bps, omega_to_q20(om), 0, time.monotonic_ns(), 0)
        try:
            bpfsys.update(m.fd("paccp_vm_state"), U64.pack(cg.cgid), fresh, bpfsys.BPF_NOEXIST)
        except FileExistsError:
            _close_vm_slice(m, cg.cgid, theta_bps, omega_to_q20(om))
    return cg


def _close_vm_slice(m: Maps, cgid: int, theta_bps: int, omega_q20: int, end: bool = False) -> None:
    """Close the VM's current (theta, omega) metering slice now and start one at the new pair.

    With ``end`` the VM's metering state is dropped instead (its exporter series stop).

    The BPF side does the same lazily at the VM's next ACK; doing it here also closes slices of VMs with
    no traffic left. The map value is rewritten from user space, so bytes acked by the VM's flows between
    the read and the write (a few packets under traffic) can be lost from the VM counter.
    """
    key = U64.pack(cgid)
    raw = bpfsys.lookup(m.fd("paccp_vm_state"), key, VM_STATE.size)
    if raw is None:
        return
    active, pad, nbytes, ptheta, pomega, pad2, since, b0 = VM_STATE.unpack(raw)
    if (ptheta, pomega) == (theta_bps, omega_q20) and not end:
        return
    now = time.monotonic_ns()
    if pomega and now > since:
        skey = SLICE_KEY.pack(cgid, ptheta, pomega, KIND_VM, since)
        bpfsys.update(m.fd("paccp_slices"), skey, SLICE.pack(now - since, max(0, nbytes - b0)))
    if end:
        bpfsys.delete(m.fd("paccp_vm_state"), key)
        return
    bpfsys.update(
        m.fd("paccp_vm_state"),
        key,
        VM_STATE.pack(active, pad, nbytes, theta_bps, omega_q20, pad2, now, nbytes),
    )


def vm_clear(cgroup: str, detach: bool = True, host_wide: bool = False) -> bool:
    """Remove a VM's pair (its flows fall back to BE, outside any VM), close its metering slice (the
    VM's last usage record) and drop its metering state, and detach the sockops program from it."""
    cg = cgroups.resolve_cgroup(cgroup, host_wide=host_wide)
    with Maps() as m:
        existed = bpfsys.delete(m.fd("paccp_vm_cfg"), U64.pack(cg.cgid))
        _close_vm_slice(m, cg.cgid, 0, Q20, end=True)
    if detach:
        detach_sockops(cg)
    return existed


def reap(m: Maps) -> list[int]:
    """Drop what belongs to removed cgroups; return their ids.

    The cgroup_rmdir tracepoint program closes a removed VM's slice at removal time; this is the fallback
    for removals it did not see (e.g. while paccp was not loaded: then the slice ends now), and it drops
    the flow rules whose owner is gone. Called by status, usage, the exporter and testbed cleanup.
    """
    live = cgroups.live_cgroups()
    gone: set[int] = set()
    for k in [k for k, _v in bpfsys.items(m.fd("paccp_vm_state"), 8, VM_STATE.size)]:
        cgid = U64.unpack(k)[0]
        if cgid not in live:
            _close_vm_slice(m, cgid, 0, Q20, end=True)
            gone.add(cgid)
    for k, _v in bpfsys.items(m.fd("paccp_vm_cfg"), 8, PARAMS.size):
        if U64.unpack(k)[0] not in live:
            bpfsys.delete(m.fd("paccp_vm_cfg"), k)
            gone.add(U64.unpack(k)[0])
    dropped = False
    for k, _v in bpfsys.items(m.fd("paccp_rules"), RULE_KEY.size, PARAMS.size):
        owner = RULE_KEY.unpack(k)[0]
        if owner and owner not in live:
            bpfsys.delete(m.fd("paccp_rules"), k)
            gone.add(owner)
            dropped = True
    if dropped:
        rules.sync_rule_count(m)
    now = time.monotonic_ns()
    for cgid in gone:
        with contextlib.suppress(FileExistsError):
            bpfsys.update(m.fd("paccp_gone"), U64.pack(cgid), U64.pack(now), bpfsys.BPF_NOEXIST)
    return sorted(gone)
