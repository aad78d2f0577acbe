"""``paccp datapath mptcp ...`` and ``paccp testbed mptcp-*``: MPTCP BG/WC on the kernel's own MPTCP."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from paccp.common.outdir import shown_path, staged_command
from paccp.datapath.core.summary import SIM_HELP, checks_table, sim_seconds
from paccp.errors import UserError

mptcp_app = typer.Typer(help="MPTCP BG/WC: subflow classes, (A_l/K)^2 WC congestion control, status.")


@mptcp_app.command("load")
def load_cmd() -> None:
    """Build (first use), register bgwc_wc / bgwc_bg and pin the maps and the sockops program."""
    from paccp.datapath.mptcp import control as mptcp

    print("bgwc loaded" if mptcp.load() else "bgwc already loaded", f"(maps in {mptcp.PIN_DIR})")


@mptcp_app.command("unload")
def unload_cmd() -> None:
    """Detach from all cgroups, unregister the congestion controls, remove the pins."""
    from paccp.datapath.core import env
    from paccp.datapath.mptcp import control as mptcp

    env.require_env()
    print("bgwc unloaded" if mptcp.unload() else "bgwc was not loaded")


@mptcp_app.command("status")
def status_cmd() -> None:
    """What is loaded: classified addresses, VMs (A_l, K, live WC subflows), attached cgroups (JSON)."""
    from paccp.datapath.core import env
    from paccp.datapath.mptcp import control as mptcp

    env.require_env()
    print(json.dumps(mptcp.status(), indent=1, sort_keys=True))


@mptcp_app.command("addr")
def addr_cmd(
    addr: str = typer.Option(..., "--addr", help="a local IPv4 address of a VM"),
    cls: str = typer.Option(..., "--class", help="bg or wc: the class of subflows opened from it"),
    clear: bool = typer.Option(False, help="remove the address instead"),
) -> None:
    """Classify subflows by their local address (the BG address and the WC `subflow` endpoint of a VM)."""
    from paccp.datapath.core import env
    from paccp.datapath.mptcp import control as mptcp

    env.require_env()
    if clear:
        print("cleared" if mptcp.addr_clear(addr) else "no such address")
        return
    mptcp.addr_set(addr, cls.lower())
    print(f"{addr}: {cls.lower()}")


@mptcp_app.command("vm")
def vm_cmd(
    cgroup: str = typer.Option(..., "--cgroup", help="the VM's cgroup v2 path"),
    level: int = typer.Option(1, "--level", help="WC competition level A_l (>= 1)"),
    k: int = typer.Option(0, "--k", help="K, WC subflows of the VM (0: count the live ones)"),
    policy: bool = typer.Option(True, help="--no-policy: WC subflows use plain Reno increase"),
    clear: bool = typer.Option(False, help="remove the VM instead"),
) -> None:
    """Set a VM's A_l and K (WC additive increase (A_l/K)^2 per RTT) and attach the sockops program."""
    from paccp.datapath.core import env
    from paccp.datapath.mptcp import control as mptcp

    env.require_env()
    if clear:
        print("cleared" if mptcp.vm_clear(cgroup) else "no such VM")
        return
    cg = mptcp.vm_set(cgroup, level, k, policy)
    print(f"vm {cg.rel}: A_l {level}, K {k or 'counted'}, policy {'on' if policy else 'off'}")


def _common(rate: str, duration: str) -> tuple[int, float]:
    from paccp.datapath.mptcp.testbed import require_mptcp
    from paccp.units import parse_duration_ns, parse_rate_bps

    rate_bps = parse_rate_bps(rate)
    dur = parse_duration_ns(duration) / 1e9
    if not 1_000_000 <= rate_bps <= 10_000_000_000:
        raise UserError("--rate must be in 1Mbit..10Gbit")
    if dur < 2:
        raise UserError("--duration must be at least 2s")
    require_mptcp()
    return rate_bps, dur


def _report(summary: dict[str, Any], out: Path) -> None:
    import sys

    checks_table(summary)
    links = (
        [summary["link"]]
        if "link" in summary
        else [r["link"] for r in summary.get("rows", summary.get("runs", []))]
    )
    for ln in links:
        if not ln["driven"]:
            print(f"paccp: {ln['line']}", file=sys.stderr)
            break
    print(f"summary -> {shown_path(out / 'summary.json')}")


RATE_HELP = "shared link rate (every link); paper rates are scaled by rate / 1 Gbit/s. 100Mbit is driven here"


def mptcp_prio_cmd(
    rate: str = typer.Option("100Mbit", help=RATE_HELP),
    duration: str = typer.Option("6s", help="measured window (after 2 s of warm-up)"),
    out: Path = typer.Option(Path("out/mptcp-prio"), "--out", help="output directory"),
) -> None:
    """Is the htb priority strict? BG wanting the whole link vs a WC-only sender: WC's share."""
    from paccp.datapath.mptcp import testbed as mt

    r, d = _common(rate, duration)
    _report(mt.exp_prio(r, d, out), out)


def mptcp_bg_cmd(
    rate: str = typer.Option("100Mbit", help=RATE_HELP),
    duration: str = typer.Option("10s", help="measured window (after 2 s of warm-up)"),
    out: Path = typer.Option(Path("out/mptcp-bg"), "--out", help="output directory"),
    references: bool = typer.Option(True, help="also run the untuned scheduler and BG-only connections"),
    simulate: bool = typer.Option(True, help=SIM_HELP),
) -> None:
    """Paper Fig. 12: four servers with guarantees 350/250/200/100 (scaled); BG holds, WC takes the spare."""
    from paccp.datapath.mptcp import testbed as mt

    r, d = _common(rate, duration)
    _report(mt.exp_bg(r, d, out, references=references, sim_s=sim_seconds(simulate)), out)


def mptcp_wc_cmd(
    rate: str = typer.Option("100Mbit", help=RATE_HELP),
    duration: str = typer.Option("8s", help="each of the three windows: before, during, after S2's pause"),
    out: Path = typer.Option(Path("out/mptcp-wc"), "--out", help="output directory"),
) -> None:
    """Paper Fig. 13: as mptcp-bg, S2 pauses; the others' WC takes its share, S2 regains its guarantee."""
    from paccp.datapath.mptcp import testbed as mt

    r, d = _common(rate, duration)
    _report(mt.exp_wc(r, d, out), out)


def mptcp_table3_cmd(
    rate: str = typer.Option("100Mbit", help=RATE_HELP),
    duration: str = typer.Option("10s", help="measured window per row"),
    out: Path = typer.Option(Path("out/mptcp-table3"), "--out", help="output directory"),
    rows: str = typer.Option("1,2,3,4", help="rows of Table 3 to run"),
    simulate: bool = typer.Option(True, help=SIM_HELP),
) -> None:
    """Paper Table 3: three servers; WC shares proportional to their competition levels A_l."""
    from paccp.datapath.mptcp import testbed as mt

    r, d = _common(rate, duration)
    try:
        idx = tuple(int(x) - 1 for x in rows.split(","))
    except ValueError:
        raise UserError(f"--rows must be numbers 1..4, got {rows!r}") from None
    if not idx or any(not 0 <= i < len(mt.TABLE3) for i in idx):
        raise UserError("--rows must be in 1..4")
    _report(mt.exp_table3(r, d, out, idx, sim_s=sim_seconds(simulate)), out)


def mptcp_fair_cmd(
    rate: str = typer.Option("100Mbit", help=RATE_HELP),
    duration: str = typer.Option("10s", help="measured window per run"),
    out: Path = typer.Option(Path("out/mptcp-fair"), "--out", help="output directory"),
    conns: str = typer.Option("3,5", help="S1's connection counts N_c"),
    simulate: bool = typer.Option(True, help=SIM_HELP),
) -> None:
    """Paper Figs 14-15: S2 idle, S1 with N_c connections vs S3, S4 with one; policy 1:1:1 vs none."""
    from paccp.datapath.mptcp import testbed as mt

    r, d = _common(rate, duration)
    try:
        ncs = tuple(int(x) for x in conns.split(","))
    except ValueError:
        raise UserError(f"--conns must be numbers, got {conns!r}") from None
    if not ncs or any(not 1 <= n <= 8 for n in ncs):
        raise UserError("--conns must be in 1..8")
    _report(mt.exp_fair(r, d, out, ncs, sim_s=sim_seconds(simulate)), out)


def register(datapath_app: typer.Typer, testbed_app: typer.Typer) -> None:
    datapath_app.add_typer(mptcp_app, name="mptcp")
    testbed_app.command("mptcp-prio")(staged_command(mptcp_prio_cmd))
    testbed_app.command("mptcp-bg")(staged_command(mptcp_bg_cmd))
    testbed_app.command("mptcp-wc")(staged_command(mptcp_wc_cmd))
    testbed_app.command("mptcp-table3")(staged_command(mptcp_table3_cmd))
    testbed_app.command("mptcp-fair")(staged_command(mptcp_fair_cmd))
