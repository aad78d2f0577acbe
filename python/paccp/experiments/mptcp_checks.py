"""The ``checks`` of the MPTCP BG/WC experiments: the issue's "done when" targets over measured rates.

Every check is ``{statement, paper, ours, holds}`` (the shape every experiment's ``summary.json`` uses).
Rates are in Mb/s; a VM's *BG* rate is its BG subflows' delivered rate, *WC* its WC subflows', *total* both
plus its UDP. The functions only compare numbers; running the experiments is :mod:`.mptcp_bgwc`'s job.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from paccp.experiments import check

BG_TOLERANCE = 0.05  # mptcp-bg: each BG subflow within 5 % of its guarantee
SHARE_TOLERANCE = 0.15  # table3 / fair: WC shares within 15 % of the target
PAPER_RANKING = ("ours", "wc_only", "free_competition", "bg_only")  # mptcp-clos, best first


def checks_bg(
    guarantee: Mapping[str, float],
    bg: Mapping[str, float],
    wc: Mapping[str, float],
    total: Mapping[str, float],
    *,
    link_mbps: float,
    udp_mbps: float = 0.0,
) -> list[dict[str, Any]]:
    """mptcp-bg: BG at the guarantee (minus the VM's UDP, which shares the shaper), totals at or above the
    guarantee, and the spare (link - BG and UDP as delivered) taken by the WC subflows (>= 80 % of it)."""
    out = []
    for vm, g in guarantee.items():
        target = g - udp_mbps
        err = abs(bg[vm] - target) / target
        out.append(
            check(
                f"{vm}: BG subflow within {BG_TOLERANCE:.0%} of {target:g} Mb/s"
                + (f" (guarantee {g:g} - UDP {udp_mbps:g})" if udp_mbps else ""),
                f"{target:g}",
                f"{bg[vm]:.1f} ({err:.1%} off)",
                err <= BG_TOLERANCE,
            )
        )
        out.append(
            check(f"{vm}: total at or above the guarantee", f">= {g:g}", f"{total[vm]:.1f}", total[vm] >= g)
        )
    # what BG and UDP delivered (a VM's total minus its WC), not the UDP's nominal rate: UDP shares the
    # shaper and loses packets, so the spare left to WC is larger than link - BG - nominal UDP
    others = sum(total[vm] - wc[vm] for vm in guarantee)
    spare = link_mbps - others
    taken = sum(wc.values())
    out.append(
        check(
            "the spare capacity is taken by the WC subflows (>= 80 % of it)",
            "30 Mb/s shared",
            f"{taken:.1f} of {spare:.1f} Mb/s spare ({link_mbps:.1f} link - {others:.1f} BG+UDP delivered)",
            spare <= 0 or taken >= 0.8 * spare,
        )
    )
    return out


def proportional_shares(wc: Sequence[float], levels: Sequence[float]) -> list[tuple[float, float]]:
    """(measured share, target share) per VM: share = WC / sum WC, target = A_l / sum A_l."""
    tw, tl = sum(wc), sum(levels)
    return [(w / tw if tw > 0 else 0.0, a / tl) for w, a in zip(wc, levels, strict=True)]


def checks_table3(
    rows: Sequence[Mapping[str, Any]],
) -> list[dict[str, Any]]:
    """mptcp-table3: per row, every VM's WC share within 15 % (relative) of A_l / sum A_l, and every BG at
    or above 95 % of its guarantee. A row is ``{"name", "levels", "wc", "paper_wc", "bg", "guarantee"}``;
    with ``spare_mbps`` (the link's payload rate minus the BG rates) also: the WC subflows take >= 80 % of
    it (shares alone would hide WC subflows that stall together)."""
    out = []
    for r in rows:
        shares = proportional_shares(r["wc"], r["levels"])
        worst = max(abs(s / t - 1) for s, t in shares)
        out.append(
            check(
                f"{r['name']}: WC shares proportional to A_l = {tuple(r['levels'])} within "
                f"{SHARE_TOLERANCE:.0%}",
                " / ".join(f"{w:g}" for w in r["paper_wc"]),
                " / ".join(f"{w:.0f}" for w in r["wc"]) + f" (worst {worst:.1%} off)",
                worst <= SHARE_TOLERANCE,
            )
        )
        low = [b / g for b, g in zip(r["bg"], r["guarantee"], strict=True)]
        out.append(
            check(
                f"{r['name']}: guarantees held (BG >= 95 % of B_g)",
                "held",
                " / ".join(f"{b:.0f}" for b in r["bg"]),
                min(low) >= 1 - BG_TOLERANCE,
            )
        )
        if "spare_mbps" in r:
            taken, spare = sum(r["wc"]), float(r["spare_mbps"])
            out.append(
                check(
                    f"{r['name']}: the spare capacity is taken by the WC subflows (>= 80 % of it)",
                    "taken",
                    f"{taken:.0f} of {spare:.0f} Mb/s",
                    spare <= 0 or taken >= 0.8 * spare,
                )
            )
    return out


def checks_fair(n_c: int, policy: bool, wc: Mapping[str, float]) -> list[dict[str, Any]]:
    """mptcp-fair: S1 (``n_c`` connections) vs S3 and S4 (one each). With the policy S1's WC within 15 % of
    each other's; without it about ``n_c`` times (between n_c / 1.5 and n_c * 1.5)."""
    s1, others = wc["S1"], [wc["S3"], wc["S4"]]
    ratios = [s1 / o if o > 0 else float("inf") for o in others]
    if policy:
        worst = max(abs(r - 1) for r in ratios)
        return [
            check(
                f"N_c = {n_c}, policy 1:1:1: S1's WC within {SHARE_TOLERANCE:.0%} of S3's and S4's",
                "equal",
                " / ".join(f"{r:.2f}x" for r in ratios),
                worst <= SHARE_TOLERANCE,
            )
        ]
    return [
        check(
            f"N_c = {n_c}, no policy: S1's WC about {n_c}x S3's and S4's",
            f"{n_c}x",
            " / ".join(f"{r:.2f}x" for r in ratios),
            all(n_c / 1.5 <= r <= n_c * 1.5 for r in ratios),
        )
    ]


def checks_sched(first_second_bg: Mapping[str, float], guarantee_a: float) -> list[dict[str, Any]]:
    """mptcp-sched: A's BG rate over the first (compressed) second per scheduler. BG-first must be within
    5 % of A's guarantee; LeastRTT is reported against the paper's ~200 Mb/s with no pass bar of its own."""
    bgf = first_second_bg["bg_first"]
    out = [
        check(
            "BG-first: A's BG subflow at its guarantee from the first second",
            f"{guarantee_a:g}",
            f"{bgf:.1f}",
            abs(bgf - guarantee_a) / guarantee_a <= BG_TOLERANCE,
        )
    ]
    if "least_rtt" in first_second_bg:
        lr = first_second_bg["least_rtt"]
        out.append(
            check(
                "LeastRTT: A's BG subflow below its guarantee at first (the paper's ~200 Mb/s)",
                "about 200",
                f"{lr:.1f}",
                lr < (1 - BG_TOLERANCE) * guarantee_a,
            )
        )
    return out


def ranking(mean_s: Mapping[str, float]) -> list[str]:
    """Variants ordered by mean large-job shuffle time, best (smallest) first."""
    return sorted(mean_s, key=lambda v: mean_s[v])


def checks_clos(mean_large_s: Mapping[str, float]) -> list[dict[str, Any]]:
    """mptcp-clos: the ranking of the four variants by mean large-job shuffle time vs the paper's."""
    ours = ranking(mean_large_s)
    return [
        check(
            "ranking by mean large-job shuffle time (best first)",
            " < ".join(PAPER_RANKING),
            " < ".join(f"{v} ({mean_large_s[v]:.3g} s)" for v in ours),
            tuple(ours) == PAPER_RANKING,
        ),
        check(
            "ours is the fastest",
            "ours",
            ours[0],
            ours[0] == "ours",
        ),
        check(
            "BG-only (rate limit, no work conservation) is the slowest",
            "bg_only",
            ours[-1],
            ours[-1] == "bg_only",
        ),
    ]


def checks_cc(cc: str, wc: Mapping[str, float], *, spare_mbps: float) -> list[dict[str, Any]]:
    """mptcp-cc (Fig. 3): the spare (link - BG) taken by the three WC subflows (>= 80 % of it), and how
    evenly: the paper finds Reno even and LIA / OLIA erratic. "Even" = every server's WC within 15 % of
    the servers' mean; for a coupled controller the check is that it is *not* even, as the paper reports."""
    vals = list(wc.values())
    mean = sum(vals) / len(vals)
    worst = max(abs(v / mean - 1) for v in vals) if mean > 0 else float("inf")
    even = worst <= SHARE_TOLERANCE
    ours = " / ".join(f"{v:.0f}" for v in vals) + f" Mb/s (worst {worst:.0%} off the mean)"
    taken = sum(vals)
    out = [
        check(
            f"{cc}: the spare capacity is taken by the WC subflows (>= 80 % of it)",
            "taken",
            f"{taken:.0f} of {spare_mbps:.0f} Mb/s",
            spare_mbps <= 0 or taken >= 0.8 * spare_mbps,
        )
    ]
    if cc == "reno":
        out.append(
            check(
                f"reno: idle shared evenly (each within {SHARE_TOLERANCE:.0%} of the mean)",
                "even",
                ours,
                even,
            )
        )
    else:
        out.append(
            check(
                f"{cc}: idle not shared evenly (some server > {SHARE_TOLERANCE:.0%} off the mean)",
                "erratic",
                ours,
                not even,
            )
        )
    return out
