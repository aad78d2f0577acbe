"""Load, unload and status of the PACCP datapath (struct_ops ``paccp``, its maps and cgroup programs)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from paccp.datapath.core import bpfsys, cgroups, env
from paccp.datapath.paccp import metering, params, rules, vms
from paccp.datapath.paccp.maps import CC_NAME, CGROUP_PROGS, GLOBAL, PIN_DIR, PINS, Q20, U32, U64, Maps
from paccp.errors import EnvironmentUnsupported


def is_loaded() -> bool:
    """True when the struct_ops is registered and its maps are pinned."""
    avail = Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split()
    return CC_NAME in avail and Path(PIN_DIR, "paccp_ops").exists()


def is_current() -> bool:
    """True when what is pinned has this version's layout (every pin of :data:`PINS` exists)."""
    return all(Path(PIN_DIR, name).exists() for name in PINS)


def load(rcos: float = 3.0) -> bool:
    """Build if needed, register ``paccp`` and pin its maps; return False when it was already loaded."""
    rcos = params.check_rcos(rcos)  # before anything is loaded (nan passed a `< 1` check)
    env.require_env()
    with env.lock():
        return _load(rcos)


def _load(rcos: float) -> bool:
    env.ensure_bpffs()
    if is_loaded():
        if not is_current():
            raise EnvironmentUnsupported(
                f"paccp is loaded with another map layout (an older version; {PIN_DIR} lacks some of "
                f"{', '.join(PINS)}): run `paccp datapath unload` first"
            )
        return False
    avail = Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split()
    if CC_NAME in avail:
        raise EnvironmentUnsupported(
            f"a congestion control named {CC_NAME!r} is registered but {PIN_DIR} is missing "
            "(loaded by someone else?); unregister it with `bpftool struct_ops unregister name paccp_ops`"
        )
    env.load_pinned("paccp.bpf.o", PIN_DIR, "paccp")
    with Maps() as m:
        cur = bpfsys.lookup(m.fd("paccp_global"), U32.pack(0), GLOBAL.size) or GLOBAL.pack(0, 0)
        _r, nxt = GLOBAL.unpack(cur)
        bpfsys.update(m.fd("paccp_global"), U32.pack(0), GLOBAL.pack(round(rcos * Q20), nxt))
    return True


def unload() -> bool:
    """Detach the sockops program everywhere, unregister ``paccp`` and remove the pins.

    Live connections that use paccp keep running it until they close (the kernel holds a reference).
    Returns False when nothing was loaded.
    """
    env.require_env()
    with env.lock():
        return _unload()


def _unload() -> bool:
    if not Path(PIN_DIR).exists():
        return False
    for cg, at, name in cgroups.attached_cgroups(CGROUP_PROGS):
        cgroups.detach_cgroup_prog(cg, at, Path(PIN_DIR, name))
    if Path(PIN_DIR, "paccp_ops").exists():
        env.run([env.loader(), "unload", PIN_DIR, "paccp_ops"], "unregistering paccp")
    shutil.rmtree(PIN_DIR, ignore_errors=True)
    return True


def status() -> dict[str, Any]:
    """A summary: loaded or not, pin dir, attached cgroups, configured VMs and rules, live flows."""
    avail = Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split()
    st: dict[str, Any] = {"loaded": False, "registered": CC_NAME in avail, "pin_dir": PIN_DIR}
    if not is_loaded():
        return st
    st["loaded"] = True
    with Maps() as m:
        st["rcos"] = float(
            GLOBAL.unpack(m.lookup("paccp_global", U32.pack(0), GLOBAL.size) or bytes(GLOBAL.size))[0] / Q20
        )
        vms.reap(m)
        st["vms"] = [v.__dict__ for v in metering.list_vms(m)]
        st["rules"] = rules.list_rules(m)
        fl = metering.list_flows(m)
        st["flows_live"] = sum(1 for f in fl if not f.ended)
        st["flows_ended"] = sum(1 for f in fl if f.ended)
        paths = cgroups.cgroup_paths()
        st["vms_removed"] = [
            {
                "cgroup": paths.get(U64.unpack(k)[0], f"cgroup:{U64.unpack(k)[0]}"),
                "removed_ns": U64.unpack(v)[0],
            }
            for k, v in bpfsys.items(m.fd("paccp_gone"), 8, 8)
        ]
    st["sockops_cgroups"] = sorted({cg for cg, _at, _n in cgroups.attached_cgroups(CGROUP_PROGS)})
    return st
