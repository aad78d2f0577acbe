"""Run the cross-check scenarios on the engine and ns-3 (and the kernel), print and save the comparison."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from paccp.crosscheck import scenarios
from paccp.crosscheck.engine_side import ns3_spec, run_engine
from paccp.errors import EnvironmentUnsupported, UserError


def _pct(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


def metrics(sc: scenarios.Scenario, res: dict[str, Any]) -> dict[str, Any]:
    """Per size class median/p99 FCT (ms), unfinished; goodput (Mb/s); utilisation; drops (all, data,
    ACKs); retransmits."""
    out: dict[str, Any] = {}
    flows = res["flows"]
    sizes = sorted({f["size_bytes"] for f in flows if f["size_bytes"]})
    for sz in sizes:
        fct = [f["fct_ns"] / 1e6 for f in flows if f["size_bytes"] == sz and f["fct_ns"] is not None]
        unf = sum(1 for f in flows if f["size_bytes"] == sz and f["fct_ns"] is None)
        out[f"fct_med_ms[{sz // 1000}K]"] = statistics.median(fct) if fct else None
        out[f"fct_p99_ms[{sz // 1000}K]"] = _pct(fct, 0.99)
        if unf:
            out[f"unfinished[{sz // 1000}K]"] = unf
    ll = [f for f in flows if f["size_bytes"] is None]
    if ll:
        span = (sc.duration_ns - sc.warmup_ns) / 1e9
        gp = [f["acked_window_bytes"] * 8 / span / 1e6 for f in ll]
        out["goodput_mean_mbps"] = statistics.mean(gp)
        out["goodput_min_mbps"] = min(gp)
        # flows that delivered nothing in the window (waiting for a retransmission timeout throughout)
        out["flows_without_goodput"] = sum(1 for g in gp if g == 0)
        rate = {(ln.a, ln.b): ln.rate_bps for ln in sc.links}
        util = []
        for name, ch in res["channels"].items():
            a, b = name.split("->")
            if a in sc.switches and b in sc.switches:
                r = rate.get((a, b)) or rate[(b, a)]
                util.append(ch["tx_bytes"] * 8 / (r * sc.duration_ns / 1e9))
        # switch-to-switch channels that carry data (a direction with ACKs only is below 10 %)
        out["switch_link_util_mean"] = statistics.mean([u for u in util if u > 0.1] or [0.0])
    out["drops"] = sum(ch["drops"] for ch in res["channels"].values())
    # data segments and pure ACKs dropped (both sides record drops by kind; ns-3's also SYN / SYN-ACK)
    kinds = [ch["drops_by_kind"] for ch in res["channels"].values() if "drops_by_kind" in ch]
    if kinds:
        out["drops_data"] = sum(k.get("data", 0) for k in kinds)
        out["drops_ack"] = sum(k.get("ack", 0) for k in kinds)
    out["retransmits"] = sum(f["retransmits"] for f in flows)
    out["timeouts"] = sum(f["timeouts"] for f in flows)
    return out


def run_ns3(spec: dict[str, Any], cache: Path | None = None, python: str = sys.executable) -> dict[str, Any]:
    """Run :mod:`paccp.crosscheck.ns3_run` in a subprocess (ns-3 keeps global state; its import is slow).

    With ``cache``, results are kept in ``cache/<sha256 of the spec and the runner>.json`` and reused:
    the ns-3 side does not depend on the engine (the routes come from the engine's seeded ECMP).
    """
    key = hashlib.sha256(
        (json.dumps(spec, sort_keys=True) + Path(__file__).with_name("ns3_run.py").read_text()).encode()
    ).hexdigest()[:20]
    if cache is not None and (cache / f"{key}.json").exists():
        cached: dict[str, Any] = json.loads((cache / f"{key}.json").read_text())
        return cached
    out = _run_ns3(spec, python)
    if cache is not None:
        cache.mkdir(parents=True, exist_ok=True)
        (cache / f"{key}.json").write_text(json.dumps(out))
    return out


def _run_ns3(spec: dict[str, Any], python: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="fx-ns3-") as d:
        sp, op = Path(d) / "spec.json", Path(d) / "out.json"
        sp.write_text(json.dumps(spec))
        res = subprocess.run(
            [python, "-m", "paccp.crosscheck.ns3_run", str(sp), str(op)], capture_output=True, text=True
        )
        if res.returncode != 0 or not op.exists():
            tail = [ln for ln in res.stderr.splitlines() if "materialize" not in ln][-3:]
            raise EnvironmentUnsupported(f"ns-3 run failed: {' | '.join(tail)}")
        out: dict[str, Any] = json.loads(op.read_text())
        return out


def compare(eng: dict[str, Any], ref: dict[str, Any]) -> dict[str, Any]:
    """Side by side with the ratio engine / reference for every metric present in both."""
    rows = {}
    for k in eng.keys() | ref.keys():
        e, r = eng.get(k), ref.get(k)
        ratio = e / r if isinstance(e, int | float) and isinstance(r, int | float) and r else None
        rows[k] = {"engine": e, "ref": r, "ratio": ratio}
    return dict(sorted(rows.items()))


def ns3_checks(
    names: list[str],
    prr: bool | None,
    log: Callable[[str], None],
    sacks: tuple[bool, ...] = (False, True),
    cache: Path | None = None,
    overrides: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Every ns-3 scenario (NewReno and/or SACK): engine and ns-3 metrics and their comparison.

    ``overrides``: scenario fields set on both sides (``duration_ns``, ``warmup_ns``, ``min_rto_ns``).
    """
    out: dict[str, Any] = {}
    for name in names:
        for sack in sacks:
            sc = dataclasses.replace(scenarios.NS3_SCENARIOS[name](sack), **(overrides or {}))
            if not 0 <= sc.warmup_ns < sc.duration_ns:
                raise UserError(f"{sc.name}: the warm-up must be shorter than the duration")
            eres, paths = run_engine(sc, prr)
            em = metrics(sc, eres)
            log(f"{sc.name}: engine done, running ns-3 ...")
            nres = run_ns3(ns3_spec(sc, paths), cache)
            nm = metrics(sc, nres)
            out[sc.name] = {"what": sc.what, "compare": compare(em, nm), "ns3_flows": nres["flows"]}
            # ns-3's drops per queue and packet kind, its pure ACKs' wire sizes, any SYN / SYN-ACK dropped
            for k in ("channels", "ack_wire_sizes", "handshake_drops"):
                out[sc.name][f"ns3_{k}"] = nres.get(k)
            if overrides:
                out[sc.name]["overrides"] = overrides
            log(format_table(sc.name, out[sc.name]["compare"], "ns-3"))
    return out


def format_table(title: str, cmp: dict[str, Any], ref: str) -> str:
    """A plain-text table of one comparison."""
    lines = [f"== {title}", f"{'metric':28s} {'engine':>12s} {ref:>12s} {'ratio':>7s}"]

    def f(x: Any) -> str:
        return f"{x:.3f}" if isinstance(x, float) else ("-" if x is None else str(x))

    for k, row in cmp.items():
        lines.append(f"{k:28s} {f(row['engine']):>12s} {f(row['ref']):>12s} {f(row['ratio']):>7s}")
    return "\n".join(lines)
