"""What the PACCP datapath metered: configured VMs, flows, slices, the flows table and usage records."""

from __future__ import annotations

import time
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from paccp.datapath.core import bpfsys, cgroups
from paccp.datapath.paccp import vms
from paccp.datapath.paccp.maps import (
    FLOW,
    KIND_FLOW,
    KIND_VM,
    PARAMS,
    Q20,
    SLICE,
    SLICE_KEY,
    U64,
    VM_STATE,
    FlowRec,
    Maps,
    SliceRec,
    VmState,
    q20_to_omega,
)
from paccp.errors import UserError

HOST_TENANT = "(host)"  # tenant of flows whose socket is in no VM cgroup


@dataclass(frozen=True)
class Owner:
    """Who a flow or a VM slice is attributed to: tenant and VM (a cgroup path, or outside any VM)."""

    tenant: str
    vm: str


def attribute(
    vmid: int, cgid: int, paths: dict[int, str], known: dict[int, cgroups.Known], default_tenant: str
) -> Owner:
    """The owner of a socket from its own cgroup: the VM it belongs to, else "outside-vm:<cgroup>".

    Never from a rule's owner: a rule only applies to sockets inside its owner's cgroup.
    """
    if vmid:
        k = known.get(vmid)
        return Owner((k.tenant if k else None) or default_tenant, paths.get(vmid, f"cgroup:{vmid}"))
    return Owner(HOST_TENANT, f"outside-vm:{paths.get(cgid, f'cgroup:{cgid}')}" if cgid else "outside-vm")


def list_vms(m: Maps) -> list[VmConf]:
    paths = cgroups.cgroup_paths()
    states = {
        VmState.decode(k, v).cgid: VmState.decode(k, v)
        for k, v in bpfsys.items(m.fd("paccp_vm_state"), 8, VM_STATE.size)
    }
    out = []
    for k, v in bpfsys.items(m.fd("paccp_vm_cfg"), 8, PARAMS.size):
        cgid = U64.unpack(k)[0]
        theta, omq, _f = PARAMS.unpack(v)
        st = states.get(cgid)
        out.append(
            VmConf(
                cgid=cgid,
                cgroup=paths.get(cgid, f"cgroup:{cgid}"),
                theta_bps=theta,
                omega=float(q20_to_omega(omq)),
                active_flows=st.active if st else 0,
                bytes_acked=st.bytes_acked if st else 0,
            )
        )
    return sorted(out, key=lambda v: v.cgroup)


def status_vms() -> list[VmConf]:
    """Configured VMs with active flow counts and bytes (opens the maps itself)."""
    with Maps() as m:
        return list_vms(m)


@dataclass(frozen=True)
class VmConf:
    """A configured VM (cgroup) with its metering counters."""

    cgid: int
    cgroup: str
    theta_bps: int
    omega: float
    active_flows: int
    bytes_acked: int


def list_flows(m: Maps) -> list[FlowRec]:
    return sorted(
        (FlowRec.decode(k, v) for k, v in bpfsys.items(m.fd("paccp_flows"), 8, FLOW.size)),
        key=lambda f: f.flow_id,
    )


def list_vm_states(m: Maps) -> list[VmState]:
    return [VmState.decode(k, v) for k, v in bpfsys.items(m.fd("paccp_vm_state"), 8, VM_STATE.size)]


def list_slices(m: Maps) -> list[SliceRec]:
    return [SliceRec.decode(k, v) for k, v in bpfsys.items(m.fd("paccp_slices"), SLICE_KEY.size, SLICE.size)]


def flows_table(sample_s: float = 0.5, include_ended: bool = False) -> list[dict[str, Any]]:
    """Live flows with cgroup, effective theta/omega, cwnd, Wmin, srtt, bytes acked and rate.

    The rate is measured from two snapshots ``sample_s`` apart (0: average over the flow's life).
    """
    paths = cgroups.cgroup_paths()
    known = cgroups.known_cgroups()
    with Maps() as m:
        first = {f.flow_id: f for f in list_flows(m)}
        if sample_s > 0:
            time.sleep(sample_s)
        second = list_flows(m)
    rows = []
    for f in second:
        if f.ended and not include_ended:
            continue
        prev = first.get(f.flow_id)
        if sample_s > 0 and prev is not None and f.last_ns > prev.last_ns:
            rate = (f.bytes_acked - prev.bytes_acked) * 8e9 / (f.last_ns - prev.last_ns)
        elif sample_s > 0 and prev is not None:
            rate = 0.0
        else:
            rate = f.bytes_acked * 8e9 / max(1, f.last_ns - f.start_ns)
        owner = attribute(f.vmid, f.cgid, paths, known, "-")
        rows.append(
            {
                "flow_id": f.flow_id,
                "cgroup": paths.get(f.cgid, f"cgroup:{f.cgid}") if f.cgid else None,
                "vm": owner.vm,
                "tenant": owner.tenant,
                "src": f"{f.saddr}:{f.sport}",
                "dst": f"{f.daddr}:{f.dport}",
                "source": f.source,
                "theta_bps": f.theta_bps,
                "omega": float(q20_to_omega(f.omega_q20)) if f.omega_q20 else None,
                "cwnd": f.cwnd,
                "wmin": round(f.wmin_q20 / Q20, 3),
                "srtt_us": f.srtt_us,
                "bytes_acked": f.bytes_acked,
                "rate_bps": round(rate),
                "ended": f.ended,
            }
        )
    return rows


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip().replace("-", "")[:12]
    except OSError:
        return "noboot"


def _boot_epoch_ns() -> int:
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("btime "):
            return int(line.split()[1]) * 1_000_000_000
    return time.time_ns() - time.monotonic_ns()


def _cos(theta: int, omega: Decimal) -> str:
    from paccp.common.cos import classify

    return classify(theta, omega)


def usage_records(tenant: str, include_open: bool = False) -> list[Any]:
    """Usage records (shared schema, source "datapath"), one per (flow or VM, pair) slice.

    Each record names the VM of the flow's socket (its cgroup, or the VM cgroup above it) and that VM's
    tenant (``vm set --tenant``; ``tenant`` for VMs registered without one). Flows of sockets in no VM are
    attributed to tenant ``(host)``, VM ``outside-vm:<cgroup>``. A removed VM's last slice is closed at
    removal (cgroup_rmdir tracepoint), so its final record is here.

    Closed slices have stable record ids ``dp:<boot>:<flow|vm>:<id>:<start_ns>``. With ``include_open``
    the still-open slice of each flow/VM is added up to now, with ``:open:<end_ns>`` in its id (a snapshot:
    its id changes at each export, so do not ingest open records from two exports).
    """
    from paccp.common.usage import UsageRecord

    if not tenant:
        raise UserError("--tenant is required")
    boot = _boot_id()
    # monotonic (BPF clock, ns since boot) -> Unix epoch via the boot time (stable across exports; the
    # boot time has 1 s resolution, so absolute times may be off by < 1 s, durations are exact)
    offset = _boot_epoch_ns()
    paths = cgroups.cgroup_paths()
    known = cgroups.known_cgroups()
    recs: list[UsageRecord] = []
    with Maps() as m:
        vms.reap(m)
        flows = {f.flow_id: f for f in list_flows(m)}
        vm_cfg = {v.cgid: v for v in list_vms(m)}
        slices = list_slices(m)
        states = list_vm_states(m)
    now = time.monotonic_ns()

    def owner(kind: int, ident: int) -> Owner:
        if kind == KIND_VM:
            return attribute(ident, 0, paths, known, tenant)
        f = flows.get(ident)
        if f is None:  # evicted from the LRU flow table: the slice outlived its flow record
            return Owner("(unknown)", "unknown")
        return attribute(f.vmid, f.cgid, paths, known, tenant)

    def flow_cos(f: FlowRec | None, theta: int, omega: Decimal) -> str:
        if f is not None and f.source == "vm" and f.vmid in vm_cfg:
            v = vm_cfg[f.vmid]
            return _cos(v.theta_bps, Decimal(str(v.omega)))
        return _cos(theta, omega)

    def add(kind: int, ident: int, theta: int, omq: int, start: int, end: int, nbytes: int, tag: str) -> None:
        omega = q20_to_omega(omq)
        f = flows.get(ident) if kind == KIND_FLOW else None
        cos = flow_cos(f, theta, omega) if kind == KIND_FLOW else _cos(theta, omega)
        if cos in ("be", "ds"):
            theta = 0  # schema: be/ds carry no theta (cannot happen for a consistent pair)
        kname = "flow" if kind == KIND_FLOW else "vm"
        who = owner(kind, ident)
        recs.append(
            UsageRecord(
                record_id=f"dp:{boot}:{kname}:{ident}:{start}{tag}",
                source="datapath",
                tenant=who.tenant,
                vm=who.vm,
                flow_id=f"dp:{boot}:{ident}" if kind == KIND_FLOW else None,
                cos=cos,  # type: ignore[arg-type]
                theta_bps=theta,
                omega=omega,
                start_ns=start + offset,
                end_ns=end + offset,
                bytes=max(0, nbytes),
            )
        )

    for s in sorted(slices, key=lambda s: (s.kind, s.id, s.start_ns)):
        add(s.kind, s.id, s.theta_bps, s.omega_q20, s.start_ns, s.start_ns + s.ns, s.nbytes, "")
    if include_open:
        for f in flows.values():
            if not f.ended and f.omega_q20:
                add(
                    KIND_FLOW,
                    f.flow_id,
                    f.theta_bps,
                    f.omega_q20,
                    f.pair_since_ns,
                    f.last_ns,
                    f.bytes_acked - f.pair_bytes0,
                    f":open:{f.last_ns}",
                )
        for st in states:
            if st.pair_omega_q20:
                add(
                    KIND_VM,
                    st.cgid,
                    st.pair_theta,
                    st.pair_omega_q20,
                    st.pair_since_ns,
                    now,
                    st.bytes_acked - st.pair_bytes0,
                    f":open:{now}",
                )
    return recs
