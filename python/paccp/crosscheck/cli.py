"""``paccp crosscheck``: the engine side by side with ns-3 and the Linux kernel (``make crosscheck``)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import typer

from paccp import limits
from paccp.common.outdir import check_out_dir, staged_dir
from paccp.crosscheck import scenarios
from paccp.crosscheck.ns3_run import NS3_RECOVERIES
from paccp.errors import EnvironmentUnsupported, UserError


def _kernel(out: Path, duration_s: int, log: Any) -> dict[str, Any]:
    """3 Reno flows, 200 Mbit HTB + bfifo: kernel vs the engine twin; Fig. 7 and PACCP one-/two-way
    dumbbells (kernel datapath) vs the engine."""
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
        from paccp.datapath.paccp import fig7

        os.environ["PACCP_NETNS_PREFIX"] = "fx"  # the testbed's namespaces: fx<hex>-<node>
        f7 = fig7.run_fig7(200_000_000, float(duration_s), out / "fig7", omit_s=2, simulate=True)
        cmp = compare(
            {f"{c}_mbps": v["simulator_mbps"] for c, v in f7["classes"].items()},
            {f"{c}_mbps": v["measured_mbps"] for c, v in f7["classes"].items()},
        )
        res["fig7"] = {
            "compare": cmp,
            "cpu_busy": f7["cpu_busy"],
            "min_uplink_utilisation": min(f7["bottleneck_utilisation"].values(), default=None),
        }
        log(format_table("fig7 (200 Mbit, PACCP datapath)", cmp, "kernel"))
    except EnvironmentUnsupported as exc:
        res["fig7"] = {"skipped": str(exc)}
        log(f"fig7 skipped: {exc}")
    res |= _paccp_dumbbells(out, duration_s, log)
    res["checks"] = kernel_side.checks(res["kernel-dumbbell-reno"]["compare"], res["fig7"].get("compare"))
    res["checks"].append(
        kernel_side.cpu_check(res["fig7"].get("cpu_busy"), res["fig7"].get("min_uplink_utilisation"))
    )
    res["checks"] += [
        kernel_side.class_check(f"PACCP dumbbell, {way}", res[f"kernel-dumbbell-paccp-{way}"].get("compare"))
        for way in ("one-way", "two-way")
    ]
    verdict = {True: "holds", False: "FAILS", None: "not judged"}
    for c in res["checks"]:
        log(f"[{verdict[c['holds']]}] {c['statement']}: {c['ours']}")
    return res


def _paccp_dumbbells(out: Path, duration_s: int, log: Any) -> dict[str, Any]:
    """BE / DS / MRG on a dumbbell, one-way and two-way (kernel datapath vs the engine twin)."""
    from paccp.crosscheck import kernel_paccp
    from paccp.crosscheck.run import compare, format_table

    res: dict[str, Any] = {}
    for two_way in (False, True):
        way = "two-way" if two_way else "one-way"
        name = f"kernel-dumbbell-paccp-{way}"
        try:
            k = kernel_paccp.run_kernel(200_000_000, duration_s, 2, out / name, two_way)
        except EnvironmentUnsupported as exc:
            res[name] = {"skipped": str(exc)}
            log(f"{name} skipped: {exc}")
            continue
        e = kernel_paccp.run_engine(200_000_000, float(min(duration_s, 10)), two_way)
        cmp = compare(kernel_paccp.compare_metrics(e, two_way), kernel_paccp.compare_metrics(k, two_way))
        res[name] = {"compare": cmp, "kernel": k, "engine": e}
        log(format_table(f"{name} (200 Mbit, PACCP datapath)", cmp, "kernel"))
    return res


def _finite_seeds(n: int, names: list[str]) -> list[int]:
    """The seeds of ``--seeds n`` (1 .. n); more than one needs ``finite`` among the scenarios."""
    from paccp.crosscheck.seeds import seed_list

    seeds = seed_list(n)
    if len(seeds) > 1 and "finite" not in names:
        raise UserError("--seeds: only the finite scenario runs over seeds; add finite to --only")
    return seeds


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
        duration_ms: int | None = typer.Option(None, help="ns-3 scenarios: run this long (both sides)"),
        warmup_ms: int | None = typer.Option(None, help="ns-3 scenarios: measure goodput after this"),
        min_rto_ms: float | None = typer.Option(None, help="ns-3 scenarios: minimum RTO (both sides)"),
        ns3_recovery: str | None = typer.Option(
            None,
            help="ns-3 recovery: prr-fixed (FxPrr; NewReno default), prr (3.44; SACK default), classic",
        ),
        tcp: str = typer.Option("newreno,sack", help="ns-3 scenarios: comma-separated TCP variants"),
        seeds: int = typer.Option(1, help="finite: run seeds 1..N on both sides, pool the flows (seeds.py)"),
        rack: bool = typer.Option(
            False, "--rack", help="engine side: Linux's RACK loss marking in SACK recoveries (transport.rack)"
        ),
    ) -> None:
        """Engine vs ns-3 3.44 (and vs the Linux kernel): FCT, goodput, utilisation, drops, retransmits."""
        check_out_dir(out, replace=True)
        names = [n for n in only.split(",") if n]
        bad = [n for n in names if n not in scenarios.NS3_SCENARIOS]
        if bad:
            known = ", ".join(scenarios.NS3_SCENARIOS)
            raise UserError(f"--only: unknown scenario {bad[0]!r} (known: {known})")
        variants = {"newreno": False, "sack": True}
        tcps = [t for t in tcp.split(",") if t]
        if not tcps or any(t not in variants for t in tcps):
            raise UserError(f"--tcp: {tcp!r} is not a comma-separated list of newreno, sack")
        sacks = tuple(variants[t] for t in dict.fromkeys(tcps))
        # --seeds N > 1: finite runs over seeds 1..N (paccp.crosscheck.seeds), not in the one-seed loop
        seed_list = _finite_seeds(seeds, names)
        pooled = ["finite"] if len(seed_list) > 1 else []
        overrides: dict[str, Any] = {}
        max_ms = limits.MAX_TIME_NS / 1e6
        for key, val in (("duration_ns", duration_ms), ("warmup_ns", warmup_ms), ("min_rto_ns", min_rto_ms)):
            if val is not None:  # finite, within the limit of a time; only the warm-up may be 0
                option = f"--{key[:-3].replace('_', '-')}-ms"
                ms = limits.check_number(val, option, 0, max_ms, lo_open=key != "warmup_ns")
                overrides[key] = round(ms * 1_000_000)
        limits.check_int(kernel_duration, "--kernel-duration", 1, MAX_KERNEL_DURATION_S)
        if rack:
            overrides["engine_rack"] = True
        if ns3_recovery is not None:
            if ns3_recovery not in NS3_RECOVERIES:
                raise UserError(f"--ns3-recovery: {ns3_recovery!r} is not one of {', '.join(NS3_RECOVERIES)}")
            overrides["ns3_recovery"] = ns3_recovery
        if names:
            try:
                import ns3  # noqa: F401
            except ImportError:
                raise UserError("the ns3 wheel is not installed: pip install 'ns3==3.44.post0'") from None
        with staged_dir(out) as tmp:  # built beside --out, moved into place when complete
            _carry_cache(out / NS3_CACHE, tmp / NS3_CACHE)
            _run(tmp, names, pooled, seed_list, sacks, overrides, kernel, kernel_duration)
        typer.echo(f"wrote {out / 'crosscheck.json'}")


NS3_CACHE = "ns3-cache"  # ns-3 results by the hash of their spec (paccp.crosscheck.run.run_ns3)
MAX_KERNEL_DURATION_S = 3600


def _carry_cache(old: Path, new: Path) -> None:
    """Link the previous run's ns-3 results into the staged directory (each file is complete: the
    cache is reused across runs while the directory itself is replaced as a whole)."""
    if not old.is_dir():
        return
    new.mkdir(parents=True, exist_ok=True)
    for f in old.glob("*.json"):
        try:
            os.link(f, new / f.name)
        except OSError:
            shutil.copy2(f, new / f.name)


def _run(
    out: Path,
    names: list[str],
    pooled: list[str],
    seed_list: list[int],
    sacks: tuple[bool, ...],
    overrides: dict[str, Any],
    kernel: bool,
    kernel_duration: int,
) -> None:
    """The crosscheck's work, writing into ``out`` (the staged directory)."""
    from paccp.crosscheck.run import ns3_checks

    result: dict[str, Any] = {"ns3": {}, "kernel": {}}
    if names:
        result["ns3"] = ns3_checks(
            [n for n in names if n not in pooled],
            None,
            lambda s: typer.echo(s),
            sacks=sacks,
            cache=out / NS3_CACHE,
            overrides=overrides,
        )
    if pooled:
        from paccp.crosscheck.seeds import run_finite_seeds

        result["finite_seeds"] = run_finite_seeds(
            seed_list, lambda s: typer.echo(s), cache=out / NS3_CACHE, overrides=overrides, sacks=sacks
        )
    if kernel:
        if os.geteuid() != 0:
            result["kernel"] = {"skipped": "needs root"}
            typer.echo("kernel side skipped: needs root")
        else:
            result["kernel"] = _kernel(out, kernel_duration, lambda s: typer.echo(s))
    (out / "crosscheck.json").write_text(json.dumps(result, indent=1) + "\n")
