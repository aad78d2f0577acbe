"""``paccp testbed kvm-guest``: a QEMU guest with its own kernel competing at a host port."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from paccp import limits
from paccp.common.outdir import shown_path, staged_command
from paccp.errors import UserError

if TYPE_CHECKING:
    from paccp.datapath.guest.experiment import Vm


def _vm(name: str, text: str, what: str) -> Vm:
    from paccp.datapath.guest.experiment import TRANSPORTS, Vm

    bits = text.split(":")
    if len(bits) != 3 or bits[0] not in TRANSPORTS:
        raise UserError(
            f"{what} must look like CC:CONNECTIONS:OMEGA with CC in {', '.join(TRANSPORTS)}, got {text!r}"
        )
    try:
        conns, omega = int(bits[1]), float(bits[2])
    except ValueError:
        raise UserError(f"{what}: connections must be an integer and omega a number, got {text!r}") from None
    if not 1 <= conns <= 64 or not 0.1 <= omega <= 64:
        raise UserError(f"{what}: connections must be in 1..64 and omega in 0.1..64")
    return Vm(name, 0, omega, conns, bits[0])


def kvm_guest_cmd(
    rate: str = typer.Option(
        "auto",
        help="host port rate; auto: the highest of 100/50/20/10/5/2 Mbit/s at most half of what the guest "
        "alone pushes in >= 90 % of 100 ms windows (measured first; a given rate is checked the same way) "
        "and with every VM's optimum >= 20 frames per window",
    ),
    duration: str = typer.Option("10s", help="measured window per phase (after 2 s of warm-up)"),
    guest: str = typer.Option(
        "cubic:8:1", help="the QEMU guest: its own CC (cubic, reno; udp: a blaster) : connections : omega"
    ),
    ns: str = typer.Option("reno:1:2", help="the namespace guest: its own CC (or udp) : connections : omega"),
    accel: str = typer.Option("tcg", help="tcg (software emulation) or kvm (see docs/kvm-guest.md)"),
    enforce: bool = typer.Option(True, help="--no-enforce: only the FIFO baseline"),
    out: Path = typer.Option(Path("out/kvm-guest"), "--out", help="output directory"),
) -> None:
    """A real guest kernel (QEMU, own congestion control) vs a namespace guest at one host port.

    Phases: the guest alone (what the emulator lets it push), both VMs at a FIFO port, both VMs under the
    host enforcer. Checks against PACCP's optimum share in 100 ms windows, measured on the host side.
    """
    from paccp.datapath.core.summary import checks_table
    from paccp.datapath.guest import experiment

    rate_bps = None if rate.strip().lower() == "auto" else limits.check_rate(rate, "--rate", positive=True)
    if rate_bps is not None and not 1_000_000 <= rate_bps <= 1_000_000_000:
        raise UserError("--rate must be in 1Mbit..1Gbit or auto")
    dur = limits.check_duration(duration, "--duration") / 1e9
    if not 3 <= dur <= 300:
        raise UserError("--duration must be in 3s..300s")
    gvm = _vm("guest", guest, "--guest")
    nvm = _vm("ns", ns, "--ns")
    if accel not in ("tcg", "kvm"):
        raise UserError(f"--accel must be tcg or kvm, got {accel!r}")
    phases = experiment.PHASES if enforce else ("alone", "fifo")
    summary = experiment.run(rate_bps, dur, out, gvm, nvm, accel=accel, phases_run=phases)
    checks_table(summary)
    print(f"summary -> {shown_path(out / 'summary.json')}")


def register(testbed_app: typer.Typer) -> None:
    testbed_app.command("kvm-guest")(staged_command(kvm_guest_cmd))
