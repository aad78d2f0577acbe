"""A comparison file's bars (``[compare.bars]``): what one scheme is held to on that file, as checks.

The shipped comparison files state issue 25's bars for ``paccp-host`` (docs/host-scheme.md): guarantee
failures over the windows in which the guarantee was feasible (at every link where the file is scored
so, else at the sender's NIC), every VM near its optimum share, best effort's small-flow tail and the
utilisation against plain TCP's, the MapReduce shuffle time, and the gaming gain. Each is one
``{statement, paper, ours, holds}`` of the comparison's ``checks`` (``paper`` says the bar), on the
means over the run's seeds; a bar with nothing to score (no feasible window, plain TCP not run) gives
no check rather than a vacuous one.
"""

from __future__ import annotations

from typing import Any

from paccp.sim.metrics import mean_of


def _check(statement: str, bar: str, ours: str, holds: bool) -> dict[str, Any]:
    return {"statement": statement, "paper": f"{bar} (issue 25)", "ours": ours, "holds": bool(holds)}


def _point_checks(doc: dict[str, Any], bars: dict[str, Any], point: str) -> list[dict[str, Any]]:
    """The bars of one point (module docstring)."""
    name = bars["scheme"]
    res = doc["results"].get(point, {})
    r = res.get(name)
    if r is None:
        return []
    tcp = res.get("tcp")
    out = []
    guaranteed = [p["name"] for p in doc["purchases"] if p["guarantee"] > 0]
    for c in guaranteed:
        cl = r["classes"].get(c, {})
        fabric = mean_of(cl.get("fail_share_fabric"))
        fail = fabric if fabric is not None else mean_of(cl.get("fail_share_feasible"))
        if fail is None:
            continue
        where = "every link" if fabric is not None else "the sender's NIC"
        out.append(
            _check(
                f"{point}: {name} fails class {c}'s guarantee in at most {100 * bars['fail']:g} % of the "
                f"windows it was feasible in (at {where})",
                f"<= {100 * bars['fail']:g} %",
                f"{100 * fail:.1f} %",
                fail <= bars["fail"],
            )
        )
    below = mean_of(r.get("distance_vms_below"))
    if bars["per_vm"] and below is not None:
        out.append(
            _check(
                f"{point}: every VM under {name} is within 10 % of its optimum share in >= 95 % of its "
                "windows",
                "no VM below",
                f"{below:.2f} of {r.get('distance_vms', 0)} VMs below (mean over seeds)",
                below == 0,
            )
        )
    if tcp is None:
        return out
    be = next((p["name"] for p in doc["purchases"] if p["guarantee"] == 0), None)
    if bars["be_p99"] is not None and be is not None:
        ours = mean_of(r["classes"].get(be, {}).get("fct", {}).get("small", {}).get("p99_ms"))
        ref = mean_of(tcp["classes"].get(be, {}).get("fct", {}).get("small", {}).get("p99_ms"))
        if ours is not None and ref:
            out.append(
                _check(
                    f"{point}: {name}'s best-effort small-flow FCT p99 is at most {bars['be_p99']:g}x "
                    "plain TCP's",
                    f"<= {bars['be_p99']:g}x",
                    f"{ours:.2f} vs {ref:.2f} ms ({ours / ref:.2f}x)",
                    ours <= bars["be_p99"] * ref,
                )
            )
    ours, ref = mean_of(r.get("utilisation")), mean_of(tcp.get("utilisation"))
    if bars["util_points"] is not None and ours is not None and ref is not None:
        out.append(
            _check(
                f"{point}: {name}'s utilisation is within {bars['util_points']:g} points of plain TCP's",
                f"<= {bars['util_points']:g} points below",
                f"{100 * ours:.1f} vs {100 * ref:.1f} %",
                100 * (ref - ours) <= bars["util_points"],
            )
        )
    ours = mean_of((r.get("shuffle") or {}).get("all"))
    ref = mean_of((tcp.get("shuffle") or {}).get("all"))
    if bars["shuffle"] and ours is not None and ref is not None:
        out.append(
            _check(
                f"{point}: {name}'s mean shuffle time is no worse than plain TCP's",
                "<= TCP's",
                f"{1e3 * ours:.1f} vs {1e3 * ref:.1f} ms",
                ours <= ref,
            )
        )
    return out


def bar_checks(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The checks of ``doc["bars"]`` (compare.json; none without bars)."""
    bars = doc.get("bars")
    if not bars:
        return []
    out = [c for p in bars.get("points") or doc["points"] for c in _point_checks(doc, bars, p)]
    rows = doc.get("gaming", {}).get("results", {}).get(bars["scheme"])
    if bars["gain"] is not None and rows:
        for k in sorted(rows, key=int):
            gain = mean_of(rows[k]["gain"])
            if gain is None:
                continue
            out.append(
                _check(
                    f"{bars['scheme']} gains nothing from opening flows ({doc['gaming']['where']} "
                    f"bottleneck): with {k} flow{'' if k == '1' else 's'} a VM gets at most "
                    f"{bars['gain']:g}x the rate of a VM with one",
                    f"<= {bars['gain']:g}x",
                    f"{gain:.2f}x",
                    gain <= bars["gain"],
                )
            )
    return out
