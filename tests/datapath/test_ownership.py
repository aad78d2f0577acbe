"""Issue 18: rules scoped to an owner cgroup, attribution by the socket's cgroup, metering lifecycle.

The unprivileged process is ``nobody`` (runuser) in the same namespace as the owner, connecting to the same
ruled port with the paccp congestion control (selectable by every user); only the owner's socket may get
the rule's pair.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

from paccp.datapath.core import cgroups
from paccp.datapath.paccp import lifecycle, maps, metering, rules, testbed, vms
from paccp.datapath.paccp.testbed import FlowSpec

PACCP = str(Path(sys.executable).with_name("paccp"))

# a paccp client sending about 100 Mbit/s until stdin closes (run in the owner's cgroup, or as nobody)
CLIENT = textwrap.dedent(
    """
    import select, socket, sys
    s = socket.socket()
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, b"paccp")
    s.connect(("127.0.0.1", int(sys.argv[1])))
    print(s.getsockname()[1], flush=True)
    buf = b"x" * 65536
    while not select.select([sys.stdin], [], [], 0.005)[0]:
        s.sendall(buf)
    """
)
SINK = textwrap.dedent(
    """
    import socket, sys, threading
    srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", int(sys.argv[1]))); srv.listen(8)
    print("ready", flush=True)
    def drain(c):
        while c.recv(1 << 16):
            pass
    while True:
        c, _ = srv.accept()
        threading.Thread(target=drain, args=(c,), daemon=True).start()
    """
)


def _flow_from(sport: int, after: int = 100_000) -> dict:
    """The datapath's row of the paccp flow from local port ``sport`` once it has ``after`` bytes acked."""
    for _ in range(50):
        rows = [r for r in metering.flows_table(sample_s=0) if r["src"].endswith(f":{sport}")]
        if rows and rows[0]["bytes_acked"] > after:
            return rows[0]
        time.sleep(0.1)
    raise AssertionError(f"no paccp flow from port {sport}: {metering.flows_table(sample_s=0)}")


def test_rule_only_for_its_owner(loaded: None) -> None:
    port = 5303
    with testbed.testbed() as net:
        net.add_node("h")
        owner = net.cgroup("owner")
        rules.rule_set(port, "900Mbit", 5.0, cgroup=str(owner), tenant="acme")
        sink = net.spawn("h", [sys.executable, "-c", SINK, str(port)])
        assert sink.stderr is not None
        time.sleep(0.5)
        ns = ["ip", "netns", "exec", net.ns("h")]
        procs = {
            "owner": subprocess.Popen(
                ["sh", "-c", f'echo $$ > "{owner}/cgroup.procs" && exec "$@"', "sh", *ns,
                 "python3", "-c", CLIENT, str(port)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            ),
            "nobody": subprocess.Popen(
                [*ns, "runuser", "-u", "nobody", "--", "python3", "-c", CLIENT, str(port)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            ),
        }  # fmt: skip
        try:
            rows, sports = {}, {}
            for who, p in procs.items():
                assert p.stdout is not None
                sports[who] = int(p.stdout.readline())
                rows[who] = _flow_from(sports[who])
            own, other = rows["owner"], rows["nobody"]
            assert (own["source"], own["theta_bps"], own["omega"]) == ("rule", 900_000_000, 5.0), own
            assert (other["source"], other["theta_bps"], other["omega"]) == ("default", 0, 1.0), other
            # attribution: by the socket's own cgroup, never by the rule's owner
            assert own["cgroup"] == cgroups.resolve_cgroup(str(owner)).rel, own
            assert other["cgroup"] != own["cgroup"] and other["vm"].startswith("outside-vm"), other
            assert other["tenant"] == metering.HOST_TENANT, other
            # an explicit host-wide rule reaches the outsider (the owner keeps its own rule); clearing it
            # puts the outsider back to (0, 1), at run time
            rules.rule_set(port, "10Mbit", 2.0, host_wide=True)
            other = _flow_from(sports["nobody"], other["bytes_acked"] + 1_000_000)
            assert (other["source"], other["theta_bps"], other["omega"]) == ("rule", 10_000_000, 2.0), other
            own = _flow_from(sports["owner"], own["bytes_acked"] + 1_000_000)
            assert (own["theta_bps"], own["omega"]) == (900_000_000, 5.0), own
            rules.rule_clear(port, host_wide=True)
            other = _flow_from(sports["nobody"], other["bytes_acked"] + 1_000_000)
            assert (other["source"], other["theta_bps"], other["omega"]) == ("default", 0, 1.0), other
        finally:
            for p in procs.values():
                p.kill()
                p.wait()
        rules.rule_clear(port, host_wide=True)
        assert rules.rule_clear(port, cgroup=str(owner))
        with maps.Maps() as m:
            assert not [r for r in rules.list_rules(m) if r["port"] == port]


def test_rule_without_owner_refused(loaded: None) -> None:
    res = subprocess.run(
        [PACCP, "datapath", "flow", "set", "--port", "5304", "--omega", "2"], capture_output=True, text=True
    )
    assert res.returncode == 2 and "owner" in res.stderr, res.stderr
    res = subprocess.run(
        [PACCP, "datapath", "flow", "set", "--port", "5304", "--omega", "2", "--host-wide"],
        capture_output=True,
        text=True,
    )
    try:
        assert res.returncode == 0 and "warning: host-wide" in res.stderr, res.stderr
        with maps.Maps() as m:
            assert {"port": 5304, "owner": "host-wide"}.items() <= next(
                r for r in rules.list_rules(m) if r["port"] == 5304
            ).items()
    finally:
        rules.rule_clear(5304, host_wide=True)


def test_removed_vms_leave_export_with_closing_records(loaded: None, tmp_path: Path) -> None:
    """After a testbed run: no exporter series of its (removed) cgroups; each VM's last slice is a record."""
    from paccp.common.usage import read_usage

    res = testbed.run_dumbbell([FlowSpec("MRG", 20_000_000, 2.0), FlowSpec("BE", 0, 1.0)], 100_000_000, 2,
                               tmp_path)  # fmt: skip
    run_vms = {r["cgroup"] for r in res["datapath_flows_midrun"]}
    assert len(run_vms) == 2, res["datapath_flows_midrun"]
    out = subprocess.run(
        [PACCP, "datapath", "export", "--once", "--interval", "0.2"], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert "paccp_vm_bytes_acked_total" in out.stdout or "paccp_cos_bytes_acked_total" in out.stdout
    for vm in run_vms:
        assert f'vm="{vm}"' not in out.stdout, (vm, out.stdout)
    status = lifecycle.status()
    assert run_vms <= {g["cgroup"] for g in status["vms_removed"]}, status["vms_removed"]
    usage = tmp_path / "usage.jsonl"
    cli = subprocess.run(
        [PACCP, "datapath", "usage", "--tenant", "t18", "--out", str(usage)], capture_output=True, text=True
    )
    assert cli.returncode == 0, cli.stderr
    recs = list(read_usage(usage))
    for vm in run_vms:
        vm_recs = [r for r in recs if r.vm == vm and r.flow_id is None]
        # one VM-level slice from `vm set` to the cgroup's removal, with the bytes of its flows
        assert len(vm_recs) == 1 and vm_recs[0].tenant == "t18", vm_recs
        flows = [r for r in recs if r.vm == vm and r.flow_id is not None]
        assert flows and vm_recs[0].bytes >= 0.95 * sum(r.bytes for r in flows), (vm_recs, flows)
    with maps.Maps() as m:
        live = {cgroups.cgroup_paths().get(s.cgid) for s in metering.list_vm_states(m)}
    assert not (live & run_vms), live


GUARD = textwrap.dedent(
    """
    import socket
    out = []
    for cc in (b"bbr", b"reno", b"paccp"):
        s = socket.socket()
        try:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc)
            out.append(cc.decode() + ":ok")
        except PermissionError:
            out.append(cc.decode() + ":denied")
    print(" ".join(out))
    """
)


def test_vm_cannot_switch_away_from_paccp(loaded: None) -> None:
    """A VM's processes (even root in it) cannot setsockopt another congestion control; others can."""
    with testbed.testbed() as net:
        vm = net.cgroup("vm")
        vms.vm_set(str(vm), "10Mbit", 2.0)
        inside = subprocess.run(
            ["sh", "-c", f'echo $$ > "{vm}/cgroup.procs" && exec python3 -c "$0"', GUARD],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        outside = subprocess.run(["python3", "-c", GUARD], capture_output=True, text=True, check=True)
    assert inside.stdout.split() == ["bbr:denied", "reno:denied", "paccp:ok"], inside
    assert outside.stdout.split() == ["bbr:ok", "reno:ok", "paccp:ok"], outside
