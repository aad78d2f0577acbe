"""``paccp crosscheck``: the engine side by side with ns-3 and the Linux kernel (``make crosscheck``)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import typer

from paccp.crosscheck import scenarios
from paccp.errors import EnvironmentUnsupported, UserError


def _kernel(out: Path, duration_s: int, log: Any) -> dict[str, Any]:
    """3 Reno flows, 200 Mbit HTB + bfifo: kernel vs the engine twin; Fig. 7 (kernel datapath) vs engine."""
    from paccp.crosscheck import kernel_side
    from paccp.crosscheck.run import compare, format_table

    res: dict[str, Any] = {}
    kr = kernel_side.run_kernel_dumbbell(3, 200_000_000, duration_s, 2, out / "kernel-dumbbell")
    er = kernel_side.run_engine_dumbbell(3, 200_000_000, duration_s, 2)
    km: dict[str, Any] = {f"goodput_mbps[f{i}]": f["goodput_mbps"] for i, f in enumerate(kr["flows"])}
    km |= {"drops": kr["drops"], "retransmits": sum(f["retransmits"] for f in kr["flows"])}
    km["loss_events"] = sum(f["nstat"].get("TcpExtTCPSackRecovery", 0) for f in kr["flows"])
    em: dict[str, Any] = {f"goodput_mbps[f{i}]": f["goodput_mbps"] for i, f in enumerate(er["flows"])}
    em |= {"drops": er["drops"], "retransmits": sum(f["retransmits"] for f in er["flows"])}
    em["loss_events"] = sum(f["loss_events"] or 0 for f in er["flows"])
    for m in (km, em):
        m["drops_per_loss_event"] = m["drops"] / m["loss_events"] if m["loss_events"] else None
    res["kernel-dumbbell-reno"] = {"compare": compare(em, km), "kernel": kr, "engine": er}
    log(format_table("kernel-dumbbell-reno (200 Mbit, 3 Reno flows)", res["kernel-dumbbell-reno"]["compare"],
                     "kernel"))  # fmt: skip
    try:
        from paccp.datapath import testbed

        os.environ["PACCP_NETNS_PREFIX"] = "fx"  # the testbed's namespaces: fx<hex>-<node>
        f7 = testbed.run_fig7(200_000_000, float(duration_s), out / "fig7", omit_s=2, simulate=True)
        cmp = compare(
            {f"{c}_mbps": v["simulator_mbps"] for c, v in f7["classes"].items()},
            {f"{c}_mbps": v["measured_mbps"] for c, v in f7["classes"].items()},
        )
        res["fig7"] = {"compare": cmp}
        log(format_table("fig7 (200 Mbit, PACCP datapath)", cmp, "kernel"))
    except EnvironmentUnsupported as exc:
        res["fig7"] = {"skipped": str(exc)}
        log(f"fig7 skipped: {exc}")
    res["checks"] = kernel_side.checks(res["kernel-dumbbell-reno"]["compare"], res["fig7"].get("compare"))
    verdict = {True: "holds", False: "FAILS", None: "not judged"}
    for c in res["checks"]:
        log(f"[{verdict[c['holds']]}] {c['statement']}: {c['ours']}")
    return res


def register(app: typer.Typer) -> None:
    """Add ``paccp crosscheck`` to the CLI."""

    @app.command("crosscheck")
    def crosscheck(
        out: Path = typer.Option(Path("out/crosscheck"), help="output directory (crosscheck.json)"),
        only: str = typer.Option(
            ",".join(scenarios.NS3_SCENARIOS), help="comma-separated ns-3 scenarios ('' for none)"
        ),
        kernel: bool = typer.Option(True, help="also the kernel side (root, network namespaces)"),
        kernel_duration: int = typer.Option(20, help="kernel runs: seconds measured (after 2 s)"),
    ) -> None:
        """Engine vs ns-3 3.44 (and vs the Linux kernel): FCT, goodput, utilisation, drops, retransmits."""
        from paccp.crosscheck.run import ns3_checks

        names = [n for n in only.split(",") if n]
        bad = [n for n in names if n not in scenarios.NS3_SCENARIOS]
        if bad:
            known = ", ".join(scenarios.NS3_SCENARIOS)
            raise UserError(f"--only: unknown scenario {bad[0]!r} (known: {known})")
        out.mkdir(parents=True, exist_ok=True)
        result: dict[str, Any] = {"ns3": {}, "kernel": {}}
        if names:
            try:
                import ns3  # noqa: F401
            except ImportError:
                raise UserError("the ns3 wheel is not installed: pip install 'ns3==3.44.post0'") from None
            result["ns3"] = ns3_checks(names, None, lambda s: typer.echo(s), cache=out / "ns3-cache")
        if kernel:
            if os.geteuid() != 0:
                result["kernel"] = {"skipped": "needs root"}
                typer.echo("kernel side skipped: needs root")
            else:
                result["kernel"] = _kernel(out, kernel_duration, lambda s: typer.echo(s))
        (out / "crosscheck.json").write_text(json.dumps(result, indent=1) + "\n")
        typer.echo(f"wrote {out / 'crosscheck.json'}")
