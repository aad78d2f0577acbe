"""Per-socket (theta, omega) (sk_storage keyed by the socket's fd), for this process or another one."""

from __future__ import annotations

import os
import socket

from paccp.datapath.core import bpfsys
from paccp.datapath.paccp import params
from paccp.datapath.paccp.maps import I32, Maps, pack_params
from paccp.errors import UserError


def _set_sk(m: Maps, fd: int, theta_bps: int, omega: float) -> None:
    try:
        bpfsys.update(m.fd("paccp_sk_par"), I32.pack(fd), pack_params(theta_bps, omega))
    except OSError as exc:
        raise UserError(f"cannot set per-socket parameters (fd {fd}): {exc.strerror}") from None


def set_flow(sock: socket.socket | int, theta_bps: int | str = 0, omega: float = 1.0) -> None:
    """Per-socket (theta, omega) for a TCP socket of this process (sk_storage keyed by its fd).

    Overrides flow rules and the VM pair; takes effect at the next ACK. The socket must use the
    ``paccp`` congestion control (``setsockopt(TCP_CONGESTION, b"paccp")`` or a VM cgroup) to be affected.
    """
    theta, om = params.check_pair(theta_bps, omega)
    fd = sock if isinstance(sock, int) else sock.fileno()
    with Maps() as m:
        _set_sk(m, fd, theta, om)


def set_flow_pid(pid: int, fd: int, theta: str | int, omega: float) -> None:
    """Per-socket parameters for socket ``fd`` of a running process (via pidfd_getfd)."""
    theta_bps, om = params.check_pair(theta, omega)
    try:
        local = bpfsys.pidfd_getfd(pid, fd)
    except OSError as exc:
        raise UserError(f"cannot get fd {fd} of pid {pid}: {exc.strerror}") from None
    try:
        with Maps() as m:
            _set_sk(m, local, theta_bps, om)
    finally:
        os.close(local)
