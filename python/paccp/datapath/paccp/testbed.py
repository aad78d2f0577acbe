"""PACCP testbeds: flows with (theta, omega) on a dumbbell against the optimum, and the :func:`testbed`
that loads the PACCP datapath for them (the generic namespaces are :mod:`paccp.datapath.core.netns`)."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from paccp.datapath.core import netns
from paccp.datapath.core.netns import Net, build_dumbbell
from paccp.datapath.paccp import lifecycle, metering, params, vms
from paccp.datapath.paccp.maps import Maps
from paccp.errors import EnvironmentUnsupported, UserError
from paccp.units import parse_rate_bps


@contextlib.contextmanager
def testbed() -> Iterator[Net]:
    """A :func:`paccp.datapath.core.netns.testbed` with the PACCP datapath loaded (it stays loaded: other
    runs may use it; ``paccp datapath unload`` removes it); what removed cgroups left is reaped at the end."""
    with netns.testbed() as net:
        lifecycle.load()
        net.on_cleanup.append(_reap)
        yield net


def _reap() -> None:
    if lifecycle.is_loaded() and lifecycle.is_current():
        with Maps() as m:
            vms.reap(m)


IPERF_PORT = 5201


@dataclass
class FlowSpec:
    """A flow of a testbed scenario: its class label and the sender VM's pair."""

    label: str
    theta_bps: int
    omega: float


def parse_flow_specs(text: str, option: str = "--flows") -> list[FlowSpec]:
    """Parse ``"be,ds,mrg:200Mbit:2"``: be = (0,1); ds[:omega] (default 2); mrg:THETA[:omega] (omega 1).
    Errors are one line naming ``option``."""
    try:
        return _flow_specs(text)
    except UserError as exc:
        raise UserError(f"{option}: {exc.message}") from None


def _flow_specs(text: str) -> list[FlowSpec]:
    specs = []
    for raw in text.split(","):
        part = raw.strip()
        if not part:
            continue
        bits = part.split(":")
        kind = bits[0].lower()
        try:
            if kind == "be" and len(bits) == 1:
                specs.append(FlowSpec("BE", 0, 1.0))
            elif kind == "ds" and len(bits) <= 2:
                specs.append(FlowSpec("DS", 0, float(bits[1]) if len(bits) == 2 else 2.0))
            elif kind == "mrg" and 2 <= len(bits) <= 3:
                specs.append(
                    FlowSpec("MRG", parse_rate_bps(bits[1]), float(bits[2]) if len(bits) == 3 else 1.0)
                )
            else:
                raise UserError(f"bad flow spec {raw!r}: use be, ds[:omega] or mrg:THETA[:omega]")
        except ValueError:
            raise UserError(f"bad flow spec {raw!r}: omega must be a number") from None
        params.check_pair(specs[-1].theta_bps, specs[-1].omega)
    if not specs:
        raise UserError("no flows given")
    if len(specs) > 16:
        raise UserError("at most 16 flows")
    return specs


def _iperf_rate(path: Path) -> float:
    try:
        doc = json.loads(path.read_text())
        return float(doc["end"]["sum_received"]["bits_per_second"])
    except (OSError, ValueError, KeyError) as exc:
        raise EnvironmentUnsupported(f"iperf3 result {path} unreadable: {exc}") from None


def _run_flows(
    net: Net,
    pairs: list[tuple[str, str, str, Path]],
    duration_s: float,
    outdir: Path,
    omit_s: int,
    probe: Callable[[], dict[str, int]] | None = None,
    probed: dict[str, float] | None = None,
    snapshot: list[dict[str, Any]] | None = None,
) -> dict[str, float]:
    """One iperf3 server per destination, one client per (src, dst_addr, dst, cgroup); return rates."""
    servers = {}
    for i, (_src, _addr, dst, _cg) in enumerate(pairs):
        port = IPERF_PORT + i
        servers[i] = net.spawn(dst, ["iperf3", "-s", "-1", "-p", str(port)])
    for i, (_src, _addr, dst, _cg) in enumerate(pairs):
        net.wait_listening(dst, IPERF_PORT + i)
    clients = {}
    t_first = time.monotonic()
    for i, (src, addr, _dst, cg) in enumerate(pairs):
        cmd = [
            "iperf3",
            "-c",
            addr,
            "-p",
            str(IPERF_PORT + i),
            "-t",
            f"{duration_s:g}",
            "-O",
            str(omit_s),
            "-J",
        ]
        clients[i] = net.spawn(src, cmd, cgroup=cg, out=outdir / f"iperf-{src}.json")
        net.client_starts.append(time.monotonic() - t_first)
    deadline = time.monotonic() + duration_s + omit_s + 30
    from paccp.common.console import progress

    with progress() as prog:
        task = prog.add_task("iperf3 flows", total=duration_s + omit_s)
        t0 = time.monotonic()
        first: tuple[float, dict[str, int]] | None = None
        while any(c.poll() is None for c in clients.values()):
            now = time.monotonic()
            if now > deadline:
                raise EnvironmentUnsupported("iperf3 clients did not finish in time")
            prog.update(task, completed=min(duration_s + omit_s, now - t0))
            # bottleneck bytes over the measured window [omit, omit + duration - 0.3 s]
            if snapshot is not None and not snapshot and now - t0 >= omit_s + duration_s / 2:
                # the datapath's view mid-run (effective pair, cwnd, Wmin per flow): for diagnosis
                mine = f"/paccp-{net.run_id}/"
                snapshot.extend(
                    r for r in metering.flows_table(sample_s=0) if (r["cgroup"] or "").startswith(mine)
                )
            if probe is not None and probed is not None:
                if first is None and now - t0 >= omit_s + 0.3:
                    first = (now, probe())
                elif (
                    first is not None
                    and not probed
                    and (
                        now - t0 >= omit_s + duration_s - max(0.3, 0.1 * duration_s)
                        or any(c.poll() is not None for c in clients.values())  # late loop on a busy machine
                    )
                ):
                    _close_window(probe, probed, first, now)
            time.sleep(0.1)
        if probe is not None and probed is not None and first is not None and not probed:
            # every client ended between two turns of the loop (a busy machine): close the window now
            _close_window(probe, probed, first, time.monotonic())
    rates = {}
    for i, (src, _addr, _dst, _cg) in enumerate(pairs):
        if clients[i].returncode != 0:
            stream = clients[i].stderr
            err = (stream.read() if stream is not None else "").strip()
            raise EnvironmentUnsupported(f"iperf3 client in {src} failed: {err[-200:]}")
        rates[src] = _iperf_rate(outdir / f"iperf-{src}.json")
    return rates


def _close_window(
    probe: Callable[[], dict[str, int]],
    probed: dict[str, float],
    first: tuple[float, dict[str, int]],
    now: float,
) -> None:
    """Bottleneck rates (bit/s) over the window from the first probe to ``now``."""
    b = probe()
    for k, v in b.items():
        probed[k] = (v - first[1][k]) * 8 / (now - first[0])


def _weighted_optimum(cap: float, flows: list[FlowSpec]) -> list[float]:
    """Own small computation (one link): x_i = max(theta_i, omega_i * p) with sum x = cap (water-filling)."""
    lo, hi = 0.0, cap
    for _ in range(200):
        mid = (lo + hi) / 2
        tot = sum(max(f.theta_bps, f.omega * mid) for f in flows)
        lo, hi = (mid, hi) if tot < cap else (lo, mid)
    return [max(f.theta_bps, f.omega * lo) for f in flows]


def optimum_rates(cap_bps: float, flows: list[FlowSpec]) -> tuple[list[float], str]:
    """Optimum on one bottleneck shared by ``flows``: paccp.sim.optimum.solve when available."""
    try:
        from paccp.sim import optimum

        prob = optimum.Problem(
            links={"bottleneck": float(cap_bps)},
            flows=tuple(
                optimum.Flow(id=f"f{i}", route=("bottleneck",), theta_bps=float(f.theta_bps), omega=f.omega)
                for i, f in enumerate(flows)
            ),
        )
        sol = optimum.solve(prob)
        return [sol.rates_bps[f"f{i}"] for i in range(len(flows))], "paccp.sim.optimum.solve"
    except ImportError:
        return _weighted_optimum(cap_bps, flows), "own water-filling (paccp.sim.optimum unavailable)"


def run_dumbbell(
    specs: list[FlowSpec], rate_bps: int, duration_s: float, out: Path, omit_s: int = 1, gso: bool = False
) -> dict[str, Any]:
    """One sender VM (cgroup, own pair) per flow -> router L -(shaped)-> router R -> one receiver each."""
    if rate_bps <= 0:
        raise UserError("--rate must be > 0")
    if duration_s < 1:
        raise UserError("--duration must be at least 1s")
    out.mkdir(parents=True, exist_ok=True)
    with testbed() as net:
        net.gso = gso
        _l_if = build_dumbbell(net, rate_bps, len(specs))
        pairs = []
        for i, spec in enumerate(specs):
            cg = net.cgroup(f"vm{i}")
            vms.vm_set(str(cg), spec.theta_bps, spec.omega)
            pairs.append((f"s{i}", f"10.202.{i}.2", f"d{i}", cg))
        tx: dict[str, float] = {}
        snap: list[dict[str, Any]] = []
        rates = _run_flows(
            net, pairs, duration_s, out, omit_s, lambda: {"L": net.class_bytes("L", _l_if)}, tx, snap
        )
        util = tx.get("L", 0.0) / rate_bps
    opt, how = optimum_rates(rate_bps, specs)
    flows = [
        {
            "flow": i,
            "label": s.label,
            "theta_bps": s.theta_bps,
            "omega": s.omega,
            "measured_bps": round(rates[f"s{i}"]),
            "optimum_bps": round(opt[i]),
        }
        for i, s in enumerate(specs)
    ]
    res = {
        "datapath_flows_midrun": snap,
        "gso": gso,
        "rate_bps": rate_bps,
        "duration_s": duration_s,
        "flows": flows,
        "utilisation": round(util, 4),
        "optimum_by": how,
    }
    (out / "summary.json").write_text(json.dumps(res, indent=1) + "\n")
    return res
