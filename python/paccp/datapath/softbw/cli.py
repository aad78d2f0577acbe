"""``paccp datapath softbw ...`` and ``paccp testbed softbw-share``: SoftBW at a host's egress port."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from paccp.common.outdir import shown_path, staged_command
from paccp.errors import UserError

softbw_app = typer.Typer(help="SoftBW at a host port: per-VM lag in BPF, unsatisfied/satisfied htb classes.")


@softbw_app.command("load")
def load_cmd() -> None:
    """Build (first use) and pin the tc program and its maps."""
    from paccp.datapath.softbw import control as softbw

    print("softbw loaded" if softbw.load() else "softbw already loaded", f"(maps in {softbw.PIN_DIR})")


@softbw_app.command("unload")
def unload_cmd() -> None:
    """Remove the pins (ports that still use the program keep it until they are removed)."""
    from paccp.datapath.core import env
    from paccp.datapath.softbw import control as softbw

    env.require_env()
    print("softbw unloaded" if softbw.unload() else "softbw was not loaded")


@softbw_app.command("status")
def status_cmd() -> None:
    """Per VM address: guarantee, classes, current lag dT and bytes steered to each class (JSON)."""
    from paccp.datapath.core import env
    from paccp.datapath.softbw import control as softbw

    env.require_env()
    print(json.dumps(softbw.status(), indent=1, sort_keys=True))


@softbw_app.command("vm")
def vm_cmd(
    addr: str = typer.Option(..., "--addr", help="the VM's IPv4 source address"),
    index: int = typer.Option(1, "--index", help="the VM's classes on the port: 1:(100+i), 1:(200+i)"),
    guarantee: str = typer.Option("0", "--guarantee", help="B, e.g. 450Mbit"),
    clear: bool = typer.Option(False, help="remove the VM instead"),
) -> None:
    """Set a VM's guarantee B at run time (over-commitment: the sum may exceed the port)."""
    from paccp.datapath.core import env
    from paccp.datapath.softbw import control as softbw
    from paccp.units import parse_rate_bps

    env.require_env()
    if clear:
        print("cleared" if softbw.vm_clear(addr) else "no such VM")
        return
    softbw.vm_set(addr, index, parse_rate_bps(guarantee))
    print(f"{addr}: B {guarantee}, classes {softbw.unsat_class(index)} / {softbw.sat_class(index)}")


def softbw_share_cmd(
    rate: str = typer.Option("100Mbit", help="host port rate (paper: 1 Gbit/s; 100Mbit is driven here)"),
    duration: str = typer.Option("10s", help="measured window per run (after 2 s of warm-up)"),
    out: Path = typer.Option(Path("out/softbw-share"), "--out", help="output directory"),
    cases: str = typer.Option("1/4,1/4/8", help="flows per VM, one case per comma (2 and 3 VMs)"),
) -> None:
    """Slides' bandwidth allocation: 2 and 3 VMs x 0.45 of the port, different flow counts, vs best effort."""
    from paccp.datapath.core.summary import checks_table
    from paccp.datapath.softbw import testbed as softbw_testbed
    from paccp.units import parse_duration_ns, parse_rate_bps

    rate_bps = parse_rate_bps(rate)
    dur = parse_duration_ns(duration) / 1e9
    if not 1_000_000 <= rate_bps <= 10_000_000_000 or dur < 2:
        raise UserError("--rate must be in 1Mbit..10Gbit and --duration at least 2s")
    try:
        parsed = tuple(tuple(int(x) for x in c.split("/")) for c in cases.split(","))
    except ValueError:
        raise UserError(f"--cases must look like 1/4,1/4/8, got {cases!r}") from None
    softbw_testbed.require_tools()
    summary = softbw_testbed.exp_share(rate_bps, dur, out, parsed)
    checks_table(summary)
    print(f"idle connect time (us): {summary['idle_connect_us']}")
    print(f"summary -> {shown_path(out / 'summary.json')}")


def softbw_short_cmd(
    rate: str = typer.Option("100Mbit", help="host port rate (paper: 1 Gbit/s; 100Mbit is driven here)"),
    duration: str = typer.Option("10s", help="how long VM 1 opens short flows, per scheme"),
    size: str = typer.Option("50KB", help="bytes per short flow"),
    out: Path = typer.Option(Path("out/softbw-short"), "--out", help="output directory"),
    simulate: bool = typer.Option(True, help="also run the simulator's SoftBW and FIFO on the same setup"),
) -> None:
    """Slides' short flows: VM 1's short flows next to two bulk VMs; SoftBW vs 50 ms rate limiter vs FIFO."""
    from paccp.datapath.core.summary import checks_table, sim_seconds
    from paccp.datapath.softbw import short as softbw_short
    from paccp.datapath.softbw import testbed as softbw_testbed
    from paccp.units import parse_duration_ns, parse_rate_bps, parse_size_bytes

    rate_bps = parse_rate_bps(rate)
    dur = parse_duration_ns(duration) / 1e9
    if not 1_000_000 <= rate_bps <= 10_000_000_000 or dur < 1:
        raise UserError("--rate must be in 1Mbit..10Gbit and --duration at least 1s")
    softbw_testbed.require_tools()
    s = softbw_short.exp_short(rate_bps, dur, out, parse_size_bytes(size), sim_seconds(simulate))
    checks_table(s)
    for name, r in s["runs"].items():  # the rate limiter's own under-use of the port is its result
        if name != "ratelimit" and not r["link"]["driven"]:
            print(f"paccp: {r['link']['line']}")
            break
    print(f"summary -> {shown_path(out / 'summary.json')}")


def softbw_overhead_cmd(
    out: Path = typer.Option(Path("out/softbw-overhead"), "--out", help="output directory"),
    rounds: int = typer.Option(4, help="alternating RTT measurements with and without the program"),
) -> None:
    """SoftBW's cost: the program's run time per packet (BPF stats) and the idle RTT with / without it."""
    from paccp.datapath.core.summary import checks_table
    from paccp.datapath.softbw import short as softbw_short
    from paccp.datapath.softbw import testbed as softbw_testbed

    if not 1 <= rounds <= 50:
        raise UserError("--rounds must be in 1..50")
    softbw_testbed.require_tools()
    s = softbw_short.exp_overhead(out, rounds=rounds)
    checks_table(s)
    print(f"summary -> {shown_path(out / 'summary.json')}")


def register(datapath_app: typer.Typer, testbed_app: typer.Typer) -> None:
    datapath_app.add_typer(softbw_app, name="softbw")
    testbed_app.command("softbw-share")(staged_command(softbw_share_cmd))
    testbed_app.command("softbw-short")(staged_command(softbw_short_cmd))
    testbed_app.command("softbw-overhead")(staged_command(softbw_overhead_cmd))
