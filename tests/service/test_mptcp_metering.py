"""An MPTCP BG/WC VM is metered: the bgwc datapath counts the bytes its subflows deliver (root, BPF).

On the MPTCP testbed (:mod:`paccp.datapath.mptcp.testbed`: a VM's BG and WC subflows behind a shared
bottleneck) the datapath's per-VM counter (``bgwc_bytes``, what the agent's :class:`MptcpDriver` reads)
must grow by what the subflows delivered in the window, as ``ss`` reports it (bytes acknowledged, BG + WC).
Before the counter existed the driver had none, and every MPTCP VM was billed 0 bytes.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from test_e2e_datapath import _datapath_lock, _missing

RATE = 40_000_000


def _mptcp_missing() -> str | None:
    why = _missing()
    if why is None and Path("/proc/sys/net/mptcp/enabled").read_text().strip() != "1":
        why = "MPTCP is disabled (sysctl net.mptcp.enabled=1)"
    if why is None and shutil.which("ss") is None:
        why = "ss is not installed"
    return why


@pytest.mark.root
@pytest.mark.timeout(180)
def test_the_bgwc_datapath_meters_what_an_mptcp_vm_delivers() -> None:
    why = _mptcp_missing()
    if why:
        pytest.skip(why)
    from paccp.datapath.mptcp import control, testbed

    servers = [testbed.Server("s1", RATE // 4, a_l=2), testbed.Server("s2", RATE // 4, a_l=1)]
    with _datapath_lock():
        if not control.is_loaded() and Path(control.PIN_DIR).exists():
            control.unload()  # an older layout
        fresh = control.load()
        try:
            res = testbed.run(servers, RATE, duration_s=3.0, omit_s=1.5)
        finally:
            if fresh:
                control.unload()
    for s in servers:
        delivered = res.bg_bps[s.name] + res.wc_bps[s.name]
        metered = res.metered_bps[s.name]
        assert delivered > RATE / 20, (s.name, delivered)  # the VM did send
        assert metered == pytest.approx(delivered, rel=0.1), (s.name, metered, delivered)
