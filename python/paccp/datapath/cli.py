"""``paccp datapath``, ``paccp testbed`` and ``paccp bench datapath``."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from paccp import limits
from paccp.common import console as cons
from paccp.common.outdir import shown_path, staged_command
from paccp.errors import UserError
from paccp.units import format_rate

datapath_app = typer.Typer(help="PACCP in the Linux kernel: BPF struct_ops CC, parameters, metering.")
vm_app = typer.Typer(help="Per-VM (cgroup) parameters, split over the VM's flows (VBP).")
flow_app = typer.Typer(help="Per-flow parameters: per socket of a running process, or a rule by port.")
testbed_app = typer.Typer(help="Network-namespace testbeds running the real kernel datapath.")
datapath_app.add_typer(vm_app, name="vm")
datapath_app.add_typer(flow_app, name="flow")


def _say(line: str) -> None:
    cons.echo(line)


def _print_json(obj: object) -> None:
    print(json.dumps(obj, indent=1, sort_keys=True, default=str))


@datapath_app.command("load")
def load_cmd(rcos: float = typer.Option(3.0, help="rcos design constant (>= 1)")) -> None:
    """Build (first use) and register the paccp congestion control; pin its maps."""
    from paccp.datapath.paccp import lifecycle, params
    from paccp.datapath.paccp.maps import PIN_DIR

    fresh = lifecycle.load(rcos=params.check_rcos(rcos))
    print("paccp loaded" if fresh else "paccp already loaded", f"(maps in {PIN_DIR})")


@datapath_app.command("unload")
def unload_cmd() -> None:
    """Detach from all cgroups, unregister paccp and remove the pinned maps."""
    from paccp.datapath.paccp import lifecycle

    print("paccp unloaded" if lifecycle.unload() else "paccp was not loaded")


@datapath_app.command("status")
def status_cmd(as_json: bool = typer.Option(False, "--json", help="print JSON")) -> None:
    """Is paccp loaded; configured VMs, rules and flow counts."""
    from paccp.datapath.core import env
    from paccp.datapath.paccp import lifecycle

    env.require_env()
    st = lifecycle.status()
    if as_json or not st["loaded"]:
        _print_json(st)
        return
    _say(f"paccp loaded, maps in {st['pin_dir']}, rcos {st['rcos']:g}")
    _say(f"flows: {st['flows_live']} live, {st['flows_ended']} ended (metered)")
    for v in st["vms"]:
        _say(
            f"vm {v['cgroup']}: theta {format_rate(v['theta_bps'])} omega {v['omega']:g} "
            f"active flows {v['active_flows']} bytes {v['bytes_acked']}"
        )
    for r in st["rules"]:
        _say(
            f"rule port {r['port']} owner {r['owner']}: "
            f"theta {format_rate(r['theta_bps'])} omega {r['omega']:g}"
        )
    for g in st.get("vms_removed", []):
        _say(f"removed vm {g['cgroup']} (metering closed)")
    _say(f"sockops attached to: {', '.join(st['sockops_cgroups']) or '(none)'}")


@vm_app.command("set")
def vm_set_cmd(
    cgroup: str = typer.Option("", "--cgroup", help="cgroup v2 path (absolute, or relative to the v2 root)"),
    theta: str = typer.Option("0", "--theta", help="minimum rate, e.g. 400Mbit (0 = none)"),
    omega: float = typer.Option(1.0, "--omega", help="weight > 0"),
    tenant: str = typer.Option("", "--tenant", help="tenant owning the VM (named in usage records, metrics)"),
    host_wide: bool = typer.Option(False, "--host-wide", help="allow --cgroup / (every process on the host)"),
) -> None:
    """Set a VM's (theta, omega); its TCP connections use paccp (sockops on the cgroup)."""
    import sys

    from paccp.datapath.core import env
    from paccp.datapath.paccp import params, vms

    theta_bps, om = params.check_pair(theta, omega)  # every argument before anything touches the kernel
    params.check_tenant(tenant or None)
    if not cgroup:
        raise UserError("--cgroup is required")
    env.require_env()
    cg = vms.vm_set(cgroup, theta_bps, om, tenant=tenant or None, host_wide=host_wide)
    if cg.rel == "/":
        print("paccp: warning: --host-wide: the VM is every process on this host", file=sys.stderr)
    print(f"vm {cg.rel} (cgroup id {cg.cgid}): theta {format_rate(theta_bps)} omega {om:g}")


@vm_app.command("clear")
def vm_clear_cmd(
    cgroup: str = typer.Option("", "--cgroup", help="cgroup v2 path"),
    host_wide: bool = typer.Option(False, "--host-wide", help="allow --cgroup / (every process on the host)"),
) -> None:
    """Remove a VM's pair (flows fall back to BE) and detach sockops from its cgroup."""
    from paccp.datapath.core import env
    from paccp.datapath.paccp import vms

    if not cgroup:
        raise UserError("--cgroup is required")
    env.require_env()
    existed = vms.vm_clear(cgroup, host_wide=host_wide)
    print("cleared" if existed else "no pair was set; sockops detached")


@flow_app.command("set")
def flow_set_cmd(
    pid: int = typer.Option(0, "--pid", help="process owning the socket (with --fd)"),
    fd: int = typer.Option(-1, "--fd", help="socket file descriptor in that process"),
    port: int = typer.Option(0, "--port", help="rule: paccp sockets with this destination (or local) port"),
    cgroup: str = typer.Option("", "--cgroup", help="rule owner: only this cgroup's sockets get the pair"),
    host_wide: bool = typer.Option(False, "--host-wide", help="rule for every process on the host (warns)"),
    tenant: str = typer.Option("", "--tenant", help="tenant of the owner cgroup (usage records, metrics)"),
    theta: str = typer.Option("0", "--theta", help="minimum rate, e.g. 200Mbit"),
    omega: float = typer.Option(1.0, "--omega", help="weight > 0"),
) -> None:
    """Per-socket parameters of a running process (pidfd_getfd) or a flow rule by port and owner."""
    import sys

    from paccp.datapath.core import env
    from paccp.datapath.paccp import params, rules, sockets

    theta_bps, om = params.check_pair(theta, omega)  # every argument before anything touches the kernel
    if (pid > 0) == (port > 0):
        raise UserError("give either --pid PID --fd FD or --port N")
    if port:
        params.check_port(port)
        params.check_tenant(tenant or None)
        if not cgroup or host_wide:
            rules.rule_owner(cgroup or None, host_wide)  # raises without an owner, or with both
        env.require_env()
        owner = rules.rule_set(port, theta_bps, om, cgroup=cgroup or None, host_wide=host_wide,
                              tenant=tenant or None)  # fmt: skip
        if host_wide:
            print(
                f"paccp: warning: host-wide rule: every process on this host that connects to port {port} "
                "with the paccp congestion control gets this pair",
                file=sys.stderr,
            )
        print(f"rule port {port} owner {owner}: theta {format_rate(theta_bps)} omega {om:g}")
        return
    if fd < 0:
        raise UserError("--fd is required with --pid")
    limits.check_int(pid, "--pid", 1, 2**22)
    limits.check_int(fd, "--fd", 0, 2**31 - 1)
    env.require_env()
    sockets.set_flow_pid(pid, fd, theta_bps, om)
    print(f"pid {pid} fd {fd}: theta {format_rate(theta_bps)} omega {om:g}")


@flow_app.command("clear")
def flow_clear_cmd(
    port: int = typer.Option(0, "--port", help="the rule's port"),
    cgroup: str = typer.Option("", "--cgroup", help="the rule's owner"),
    host_wide: bool = typer.Option(False, "--host-wide", help="the host-wide rule"),
) -> None:
    """Remove a flow rule."""
    from paccp.datapath.core import env
    from paccp.datapath.paccp import rules

    env.require_env()
    print("cleared" if rules.rule_clear(port, cgroup=cgroup or None, host_wide=host_wide) else "no such rule")


@datapath_app.command("flows")
def flows_cmd(
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
    sample: float = typer.Option(
        0.5, help="seconds between the two snapshots that give the rate (0 = average)"
    ),
    ended: bool = typer.Option(False, help="also list ended (metered) flows"),
) -> None:
    """Live paccp flows: cgroup, theta, omega, cwnd, Wmin, srtt, bytes acked, rate."""
    from paccp.datapath.core import env
    from paccp.datapath.paccp import metering

    env.require_env()
    if sample < 0:
        raise UserError("--sample must be >= 0")
    rows = metering.flows_table(sample_s=sample, include_ended=ended)
    if as_json:
        _print_json(rows)
        return
    t = cons.table(
        "id", "cgroup", "src -> dst", "src", "theta", "omega", "cwnd", "Wmin", "srtt", "bytes", "rate"
    )
    for r in rows:
        cons.add_row(
            t,
            str(r["flow_id"]),
            r["cgroup"] or "-",
            f"{r['src']} -> {r['dst']}",
            r["source"],
            format_rate(r["theta_bps"]),
            f"{r['omega']:g}" if r["omega"] else "-",
            str(r["cwnd"]),
            f"{r['wmin']:g}",
            f"{r['srtt_us']}us",
            str(r["bytes_acked"]),
            format_rate(r["rate_bps"]),
        )
    cons.print_table(t)


@datapath_app.command("usage")
def usage_cmd(
    tenant: str = typer.Option(
        "unassigned", "--tenant", help="tenant of VMs registered without one (vm set --tenant)"
    ),
    out: Path = typer.Option(..., "--out", help="output .jsonl or .parquet"),
    include_open: bool = typer.Option(False, help="add snapshot records of still-open slices"),
) -> None:
    """Write usage records (schema paccp.common.usage, source "datapath"): one per (flow or VM, pair) slice.

    Each names the tenant and VM of the flow's socket cgroup; flows outside any VM: tenant "(host)"."""
    from paccp.common.usage import write_usage
    from paccp.datapath.core import env
    from paccp.datapath.paccp import metering

    if not tenant:
        raise UserError("--tenant must not be empty")
    env.require_env()
    n = write_usage(metering.usage_records(tenant, include_open=include_open), out)
    print(f"{n} usage records -> {out}")


@datapath_app.command("export")
def export_cmd(
    port: int = typer.Option(9464, "--port", help="TCP port of the Prometheus endpoint"),
    addr: str = typer.Option("127.0.0.1", "--addr", help="bind address"),
    interval: float = typer.Option(2.0, help="seconds between map scans"),
    once: bool = typer.Option(False, help="print the metrics once (text format) and exit"),
) -> None:
    """Prometheus exporter: per-VM and per-CoS bytes and rates from the metering maps."""
    from paccp.datapath.paccp import exporter

    if not 1 <= port <= 65535:
        raise UserError(f"--port must be in 1..65535, got {port}")
    if interval <= 0:
        raise UserError("--interval must be > 0")
    exporter.run(port=port, addr=addr, interval=interval, once=once)


@testbed_app.command("fig7")
@staged_command
def fig7_cmd(
    rate: str = typer.Option(
        "auto",
        help="rate of every leaf-spine link; auto: start from a guess for this machine's cores and step "
        "down while the machine cannot drive the links",
    ),
    duration: str = typer.Option("30s", help="measurement duration"),
    out: Path = typer.Option(..., "--out", help="output directory (summary.json, iperf3 JSON)"),
    gso: bool = typer.Option(False, help="keep veth GSO on (cheaper per byte; bursty drops at the bfifo)"),
    simulate: bool = typer.Option(True, help="also run the simulator on the same topology"),
) -> None:
    """Paper Fig. 7: 3 leaves x 1 spine, 9 VMs (BE/DS/MRG), iperf3 flows VM i -> VM i+3.

    A run whose links stay below 0.85 utilisation while the flows demand more did not measure the scheme:
    with --rate auto the next lower rate is tried; with a given --rate the command says so and exits 3.
    """
    import sys

    from paccp.datapath.core import drive
    from paccp.datapath.paccp import fig7

    dur = limits.check_duration(duration, "--duration") / 1e9
    auto = rate.strip().lower() == "auto"
    rate_bps: int | None = (
        drive.first_auto_rate() if auto else limits.check_rate(rate, "--rate", positive=True)
    )
    while rate_bps is not None:
        summary = fig7.run_fig7(rate_bps, dur, out, simulate=simulate, gso=gso)
        if summary["driven"]:
            break
        print(f"paccp: {summary['not_driven_because']}", file=sys.stderr)
        if not auto:
            print(f"summary (not a reproduction) -> {shown_path(out / 'summary.json')}", file=sys.stderr)
            raise typer.Exit(3)
        rate_bps = drive.lower_rate(rate_bps)
        if rate_bps is None:
            raise typer.Exit(3)
        print(f"paccp: trying --rate {rate_bps / 1e6:g}Mbit", file=sys.stderr)
    print(f"rate {summary['rate_bps'] / 1e6:g} Mbit/s (driven: utilisation >= 0.85 on every uplink)")
    _print_json(summary["classes"])
    print(f"summary -> {shown_path(out / 'summary.json')}")


@testbed_app.command("dumbbell")
@staged_command
def dumbbell_cmd(
    flows: str = typer.Option(
        "be,be,ds,mrg:200Mbit:2", help='flows: "be", "ds[:omega]", "mrg:THETA[:omega]"'
    ),
    rate: str = typer.Option("1Gbit", help="bottleneck rate"),
    duration: str = typer.Option("10s", help="measurement duration"),
    out: Path = typer.Option(Path("out/dumbbell"), "--out", help="output directory"),
    gso: bool = typer.Option(False, help="keep veth GSO on"),
) -> None:
    """A dumbbell: one sender VM (cgroup) per flow, one shaped bottleneck, iperf3 per flow."""
    from paccp.datapath.paccp import testbed

    specs = testbed.parse_flow_specs(flows)
    rate_bps = limits.check_rate(rate, "--rate", positive=True)
    res = testbed.run_dumbbell(
        specs, rate_bps, limits.check_duration(duration, "--duration") / 1e9, out, gso=gso
    )
    _print_json(res)


def bench_datapath_cmd(
    duration: str = typer.Option("5s", help="duration of each iperf3 run"),
    out: str = typer.Option("", help="also write the JSON to this file"),
    gso: bool = typer.Option(
        True, help="--no-gso: one ACK per MSS-sized packet (worst case for per-ACK cost)"
    ),
    repeats: int = typer.Option(3, help="runs per CC (alternating); medians and best-of are reported"),
) -> None:
    """paccp (BE) vs the kernel's reno: one bulk iperf3 flow over veth, throughput and CPU per GB."""
    from paccp.datapath.paccp import bench
    from paccp.units import parse_duration_ns

    if not 1 <= repeats <= 20:
        raise UserError("--repeats must be in 1..20")
    res = bench.run(parse_duration_ns(duration) / 1e9, repeats=repeats, gso=gso)
    text = json.dumps(res, indent=1, sort_keys=True)
    print(text)
    if out:
        Path(out).write_text(text + "\n")


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    """Add ``datapath`` and ``testbed`` to the root app and ``datapath`` to ``bench``."""
    from paccp.datapath.mptcp import cli as mptcp_cli
    from paccp.datapath.softbw import cli as softbw_cli

    mptcp_cli.register(datapath_app, testbed_app)
    softbw_cli.register(datapath_app, testbed_app)
    app.add_typer(datapath_app, name="datapath")
    app.add_typer(testbed_app, name="testbed")
    bench_app.command("datapath")(bench_datapath_cmd)
