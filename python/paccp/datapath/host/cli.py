"""``paccp testbed host-share | host-cheat | host-fabric | host-overhead``: PACCP enforced by the host."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from paccp.common.outdir import shown_path, staged_command
from paccp.errors import UserError

RATE_HELP = "host port rate, or auto: the highest testbed rate this machine drives and measures"
DUR_HELP = "measured window per run (after 2 s of warm-up)"


def _duration(text: str) -> float:
    from paccp.units import parse_duration_ns

    dur = parse_duration_ns(text) / 1e9
    if not 1 <= dur <= 600:
        raise UserError("--duration must be in 1s..600s")
    return dur


def _runs(n: int) -> int:
    if not 1 <= n <= 20:
        raise UserError("--runs must be in 1..20")
    return n


def _done(summary: dict[str, Any], out: Path) -> None:
    from paccp.datapath.core.summary import checks_table

    checks_table(summary)
    print(f"summary -> {shown_path(out / 'summary.json')}")


def _series_cmd(name: str, doc: str, rate_help: str = RATE_HELP) -> Callable[..., None]:
    """A command running ``testbed.exp_<name>`` (enforced runs, then one FIFO run)."""

    def cmd(
        rate: str = typer.Option("auto", help=rate_help),
        duration: str = typer.Option("10s", help=DUR_HELP),
        runs: int = typer.Option(3, help="enforced runs (then one without enforcement)"),
        out: Path = typer.Option(Path(f"out/host-{name}"), "--out", help="output directory"),
    ) -> None:
        from paccp.datapath.host import testbed

        d, n = _duration(duration), _runs(runs)
        _done(getattr(testbed, f"exp_{name}")(rate, d, n, out), out)

    cmd.__doc__ = doc
    return cmd


host_share_cmd = _series_cmd(
    "share", "Over-committed (2x) host port, 4 guests (cubic/reno, 1/8/24 connections, UDP) vs the optimum."
)
host_fabric_cmd = _series_cmd(
    "fabric",
    "Two hosts share a fabric link: each host shapes its VMs by PACCP's law on the fabric's delay.",
    RATE_HELP + " (ports and fabric link)",
)


def host_cheat_cmd(
    rate: str = typer.Option("auto", help=RATE_HELP),
    duration: str = typer.Option("10s", help=DUR_HELP),
    out: Path = typer.Option(Path("out/host-cheat"), "--out", help="output directory"),
) -> None:
    """A cheating guest (24 connections; its own law with omega 8): its gain, with and without enforcement."""
    from paccp.datapath.host import cheat

    _done(cheat.exp_cheat(rate, _duration(duration), out), out)


def host_overhead_cmd(
    rate: str = typer.Option("auto", help=RATE_HELP),
    duration: str = typer.Option("4s", help=DUR_HELP),
    rounds: int = typer.Option(3, help="alternating rounds with and without enforcement"),
    out: Path = typer.Option(Path("out/host-overhead"), "--out", help="output directory"),
) -> None:
    """The host programs' run time per packet (BPF statistics); one VM alone with / without enforcement."""
    from paccp.datapath.host import overhead

    d, n = _duration(duration), _runs(rounds)
    _done(overhead.exp_overhead(rate, d, n, out), out)


def enforce_cmd(
    port: str = typer.Option(..., help="the host's port (interface towards the fabric)"),
    rate: str = typer.Option(..., help="the port's rate, e.g. 1Gbit"),
    vm: list[str] = typer.Option(..., help="NAME=IFNAME:THETA:OMEGA, e.g. vm1=tap0:100Mbit:1 (repeat)"),
    netns: str = typer.Option("", help="the host's network namespace (default: this one)"),
    metrics_port: int = typer.Option(0, help="serve Prometheus series on 127.0.0.1:PORT (0: none)"),
    duration: str = typer.Option("0s", help="stop after this long (0s: until Ctrl-C)"),
) -> None:
    """Enforce PACCP at a host's port for VMs given by their host-side interfaces (veth or tap)."""
    import json
    import time

    from paccp.datapath.host.enforcer import HostEnforcer
    from paccp.datapath.host.metering import serve
    from paccp.units import parse_duration_ns, parse_rate_bps

    enf = HostEnforcer(port, parse_rate_bps(rate), netns or None)
    for spec in vm:
        name, _, rest = spec.partition("=")
        bits = rest.split(":")
        if not name or len(bits) != 3:
            raise UserError(f"--vm must look like vm1=tap0:100Mbit:1, got {spec!r}")
        try:
            omega = float(bits[2])
        except ValueError:
            raise UserError(f"--vm {spec!r}: omega must be a number") from None
        enf.add_vm(name, bits[0], parse_rate_bps(bits[1]) if bits[1] != "0" else 0, omega)
    until = parse_duration_ns(duration) / 1e9
    if not 0 <= metrics_port <= 65535:
        raise UserError("--metrics-port must be in 0..65535")
    with enf:
        enf.apply()
        if metrics_port:
            serve([enf], metrics_port)
        t0 = time.monotonic()
        try:
            while not until or time.monotonic() - t0 < until:
                time.sleep(1.0)
                use = {
                    n: {"rate_bps": round(u.rate_bps), "alloc_bps": round(u.alloc_bps), "drops": u.drops}
                    for n, u in enf.usage().items()
                }
                print(json.dumps(use), flush=True)
        except KeyboardInterrupt:
            pass


def register(datapath_app: typer.Typer, testbed_app: typer.Typer) -> None:
    datapath_app.command("host-enforce")(enforce_cmd)
    testbed_app.command("host-share")(staged_command(host_share_cmd))
    testbed_app.command("host-cheat")(staged_command(host_cheat_cmd))
    testbed_app.command("host-fabric")(staged_command(host_fabric_cmd))
    testbed_app.command("host-overhead")(staged_command(host_overhead_cmd))
