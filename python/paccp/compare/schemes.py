"""The schemes of a comparison: how a purchase becomes each scheme's parameters, and what it costs there.

A purchase is stated once (:class:`paccp.compare.spec.Purchase`: a guarantee G >= 0 and a weight W >= 1).
One mapping function per scheme turns the scheme-independent :class:`~paccp.compare.setup.Setup` into a
scenario of :mod:`paccp.scenario`, and one pricing function prices a VM by the scheme's own price-book
section, reusing :mod:`paccp.pricing.quote`. The rules (also in docs/howto/compare.md):

==============  ==================================================  =========================================
scheme          parameters from (G, W)                              price per VM-hour (book section)
==============  ==================================================  =========================================
``paccp-vbp``   VM pair (theta, omega) = (G, W), split over the     ``[vbp]``: P0 + P1 (W-1) + P2 G, class by
                VM's active flows (VBP); PACCP congestion control   :func:`paccp.common.cos.classify`
``paccp-fbp``   every flow carries (G, W) itself (FBP upgrade of    ``[vbp]`` P0 (the VM price that includes
                each flow); in the gaming runs the k-1 extra flows  BE) + ``[fbp]`` add-on P0s + P1s (W-1) +
                stay BE (0, 1), i.e. cost nothing extra             P2s G per upgraded flow-hour
``softbw``      G > 0: strict B = G; G = 0, W > 1: fair share;      ``[softbw]`` usage-based at the VM's
                else best effort; Reno; over-commitment N = the     achieved rate r (strict r(1+B/C)P0 with
                host's sum of B / port (at least 1)                 excess as fair share; fair r(r/C)P1; BE 0)
``mptcp-bgwc``  variant ours: B_g = G (G = 0: one bandwidth unit U,   ``[mptcp_bgwc]``: P0 + P1 (A_l-1) +
                at most the host port / its VMs, :func:`mptcp_b_g`); P2 G (the VBP form on (G, A_l))
                A_l = max(1, round(W)); uncoupled Reno + fair WC
``ratelimit``   ElasticSwitch-style per-VM-pair rate limiters       ``[ratelimit]``: P0 + P2 G (the VBP form
                (scheme ``elasticswitch``): hose guarantee B = G    without a weight: the limiter has none)
                (G = 0: the host port / its VMs, as SoftBW's
                fair kind); W has no counterpart; Reno
``tcp``         nothing: Reno, every flow alone                     ``[vbp]`` P0: plain TCP can only sell BE
``paccp-host``  VM pair (theta, omega) = (G, W) enforced by its    ``[vbp]``: P0 + P1 (W-1) + P2 G, as
                host (:mod:`paccp.compare.host_scheme`); Reno      ``paccp-vbp`` (the same pair)
==============  ==================================================  =========================================

Adding a scheme is one :class:`Scheme` entry in ``SCHEMES``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from paccp.common.cos import classify
from paccp.compare import host_scheme as _host
from paccp.compare.setup import Setup, SetupVm
from paccp.compare.spec import Purchase
from paccp.errors import UserError
from paccp.pricing.book import PriceBook, SoftBWBook, VBPBook
from paccp.pricing.quote import CTX, linear_terms, softbw_terms

#: The smallest hose guarantee :func:`hose_b` gives (the schemes need B > 0).
MIN_GUARANTEE_BPS = 1_000


@dataclass(frozen=True)
class VmUse:
    """What a VM used in a run: its mean delivered rate and its flows' (start, end, is-extra) times."""

    rate_bps: float
    flow_hours: float  # sum over its flows of their active time, in hours
    extra_flow_hours: float  # of which gaming extra flows (FBP keeps them BE)
    run_hours: float


@dataclass(frozen=True)
class Scheme:
    """One scheme of the comparison."""

    name: str
    description: str
    build: Callable[[Setup], dict[str, Any]]
    params: Callable[[Purchase], dict[str, Any]]
    price: Callable[[PriceBook, SetupVm, VmUse], Decimal]  # per hour


def _per_hour(terms: list[tuple[str, str, Decimal]]) -> Decimal:
    return sum((p for _n, _f, p in terms), Decimal(0))


def _section(book: PriceBook, name: str) -> Any:
    sec = getattr(book, name, None)
    if sec is None:
        raise UserError(f"price book {book.name!r} has no [{name}] section (needed by the comparison)")
    return sec


def _scenario(setup: Setup, vms: list[dict[str, Any]], flows: list[dict[str, Any]]) -> dict[str, Any]:
    sc = copy.deepcopy(setup.base)
    sc["vms"] = vms
    sc["flows"] = flows
    return sc


def _vm(v: SetupVm, theta: int = 0, omega: float = 1.0) -> dict[str, Any]:
    return {"id": v.id, "host": v.host, "label": v.id, "theta": theta, "omega": omega}


def _flow(f: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {**f, "label": f["vm"], **extra}


# ------------------------------------------------------------------------------------------------ paccp


def paccp_vbp_build(setup: Setup) -> dict[str, Any]:
    """VBP: the VM's pair (G, W), split by the engine over the VM's active flows."""
    sc = _scenario(
        setup,
        [_vm(v, v.purchase.guarantee, v.purchase.weight) for v in setup.vms],
        [_flow(f) for f in setup.flows],
    )
    sc["cc"] = {"kind": "paccp"}
    return sc


def paccp_vbp_price(book: PriceBook, vm: SetupVm, use: VmUse) -> Decimal:
    """[vbp] P0 + P1 (W-1) + P2 G per VM-hour."""
    p = vm.purchase
    return _per_hour(linear_terms(_section(book, "vbp"), p.cos, p.guarantee, Decimal(str(p.weight))))


def paccp_fbp_build(setup: Setup) -> dict[str, Any]:
    """FBP: each flow carries (G, W) itself; a gaming VM's extra flows (index >= 1) are BE."""
    vm_of = {v.id: v for v in setup.vms}
    flows = []
    for f in setup.flows:
        p = vm_of[f["vm"]].purchase
        extra = setup.gamer is not None and f["vm"] == setup.gamer and not f["id"].endswith(".0")
        theta, omega = (0, 1.0) if extra else (p.guarantee, p.weight)
        g = {k: v for k, v in f.items() if k != "vm"}
        flows.append({**g, "label": f["vm"], "theta": theta, "omega": omega})
    sc = _scenario(setup, [_vm(v) for v in setup.vms], flows)
    sc["cc"] = {"kind": "paccp"}
    return sc


def paccp_fbp_price(book: PriceBook, vm: SetupVm, use: VmUse) -> Decimal:
    """[vbp] P0 per VM-hour + [fbp] add-on per upgraded flow-hour (gaming extra flows are BE: free)."""
    p = vm.purchase
    base = _section(book, "vbp").p0
    addon = _per_hour(linear_terms(_section(book, "fbp"), p.cos, p.guarantee, Decimal(str(p.weight))))
    upgraded_h = Decimal(str(max(0.0, use.flow_hours - use.extra_flow_hours)))
    run_h = Decimal(str(use.run_hours)) if use.run_hours > 0 else Decimal(1)
    return base + CTX.divide(CTX.multiply(addon, upgraded_h), run_h)


def paccp_params(p: Purchase) -> dict[str, Any]:
    """(theta, omega) = (G, W)."""
    return {"theta_bps": p.guarantee, "omega": p.weight, "cos": p.cos}


# ------------------------------------------------------------------------------------------------ softbw


def softbw_kind(p: Purchase) -> str:
    """strict (G > 0), fair (G = 0, W > 1) or best_effort."""
    if p.guarantee > 0:
        return "strict"
    return "fair" if p.weight > 1 else "best_effort"


def softbw_build(setup: Setup) -> dict[str, Any]:
    """SoftBW: a guarantee of the purchase's kind per VM, Reno senders, N = the host's sum of B / port."""
    from paccp.compare.setup import _topology
    from paccp.scenario import access_rate_bps

    topo = _topology(setup.base, "comparison")
    sold: dict[str, int] = {}
    guarantees = []
    for v in setup.vms:
        kind = softbw_kind(v.purchase)
        g: dict[str, Any] = {"vm": v.id, "kind": kind}
        if kind == "strict":
            g["rate"] = v.purchase.guarantee
            sold[v.host] = sold.get(v.host, 0) + v.purchase.guarantee
        guarantees.append(g)
    over = max([1.0] + [s / access_rate_bps(topo, h) for h, s in sold.items()])
    sc = _scenario(setup, [_vm(v) for v in setup.vms], [_flow(f) for f in setup.flows])
    sc["cc"] = {"kind": "reno"}
    sc["softbw"] = {"overcommit": round(over * 1.000001 + 1e-9, 6), "guarantees": guarantees}
    return sc


def softbw_price(book: PriceBook, vm: SetupVm, use: VmUse) -> Decimal:
    """[softbw] usage-based price at the VM's mean achieved rate."""
    sec: SoftBWBook = _section(book, "softbw")
    kind = {"strict": "strict", "fair": "fair", "best_effort": "none"}[softbw_kind(vm.purchase)]
    r = Decimal(str(round(max(use.rate_bps, 0.0))))
    return _per_hour(softbw_terms(sec, kind, r, vm.purchase.guarantee))


def softbw_params(p: Purchase) -> dict[str, Any]:
    """Guarantee kind and B."""
    kind = softbw_kind(p)
    return {"kind": kind, "B_bps": p.guarantee if kind == "strict" else None}


# ------------------------------------------------------------------------------------------------ mptcp


def competition_level(p: Purchase) -> int:
    """A_l = max(1, round(W))."""
    return max(1, round(p.weight))


def mptcp_b_g(setup: Setup, v: SetupVm) -> int:
    """A VM's BG guarantee B_g: G, or without a guarantee one bandwidth unit U (the paper's 75 Mb/s, the
    granularity its A_l policy sells guarantees in), at most the host port's fair share (:func:`hose_b`).

    Why not the port share alone (what this mapping did first): with one VM per host that is the whole
    port, so a VM that bought nothing held a larger high-priority guarantee than a paying one (10 Gb/s
    vs MRG's 5 Gb/s on the leaf-spine, 1 Gb/s vs gold's 800 Mb/s on the Clos). Measured (seed 1): 96 %
    of BE bytes then travelled at BG priority next to the paying class; on the Clos, gold's small
    shuffle flows had a p99 of 93 ms (5,499 BG timeouts in the reducers' incast) and 14.6 ms with U.
    Why not B_g near 0: :func:`hose_b`.
    """
    from paccp.scenario.schemes.mptcp_bgwc import UNIT_DEFAULT_BPS

    if v.purchase.guarantee > 0:
        return v.purchase.guarantee
    return min(UNIT_DEFAULT_BPS, hose_b(setup, v))


def mptcp_build(setup: Setup, shared_buffer: bool = False) -> dict[str, Any]:
    """MPTCP BG/WC, variant ours: B_g (:func:`mptcp_b_g`), A_l = max(1, round(W)).

    Its switch ports' two priority levels each have the port's whole buffer, as the scheme's
    reproduction has them (``mptcp-bgwc``); ``shared_buffer`` puts both within that one buffer, the
    switch memory every other scheme has (``mptcp-bgwc-shared``, run only when named).
    """
    vms = [_vm(v, mptcp_b_g(setup, v)) for v in setup.vms]
    sc = _scenario(setup, vms, [_flow(f) for f in setup.flows])
    sc["scheme"] = {
        "kind": "mptcp_bgwc",
        "variant": "ours",
        "competition_levels": {v.id: competition_level(v.purchase) for v in setup.vms},
        "shared_buffer": shared_buffer,
    }
    return sc


def mptcp_shared_build(setup: Setup) -> dict[str, Any]:
    """:func:`mptcp_build` with its two levels sharing the port's one buffer."""
    return mptcp_build(setup, shared_buffer=True)


def mptcp_price(book: PriceBook, vm: SetupVm, use: VmUse) -> Decimal:
    """[mptcp_bgwc] P0 + P1 (A_l - 1) + P2 B_g per VM-hour."""
    sec: VBPBook = _section(book, "mptcp_bgwc")
    p = vm.purchase
    a_l = competition_level(p)
    return _per_hour(linear_terms(sec, classify(p.guarantee, a_l), p.guarantee, Decimal(a_l)))


def mptcp_params(p: Purchase) -> dict[str, Any]:
    """B_g (without a guarantee: ``"U"``, one bandwidth unit, at most the host port's fair share) and A_l."""
    return {"B_g_bps": p.guarantee if p.guarantee > 0 else "U", "A_l": competition_level(p)}


# ------------------------------------------------------------------------------------------------ ratelimit


def hose_b(setup: Setup, v: SetupVm) -> int:
    """A VM's hose guarantee where the scheme needs one for every VM (the rate limiter; MPTCP BG/WC's cap):
    G, or without a guarantee its host port's fair share (port / VMs on the host), as SoftBW's ``fair`` kind.

    Measured with a B near 0 (1 kb/s): the rate limiter capped every flow *into* such a VM near 0 (its
    receiver-side hose guarantee; BE VMs at 5 Mb/s on the leaf-spine), and MPTCP's BG-first scheduler handed
    each connection's first bytes to a BG subflow shaped to nothing, so the connection stalled behind them
    (231 of 307 WebSearch connections unfinished in a 25 ms run).
    """
    if v.purchase.guarantee > 0:
        return v.purchase.guarantee
    from paccp.compare.setup import _topology
    from paccp.scenario import access_rate_bps

    n = sum(1 for u in setup.vms if u.host == v.host)
    return max(MIN_GUARANTEE_BPS, access_rate_bps(_topology(setup.base, "comparison"), v.host) // n)


def ratelimit_build(setup: Setup) -> dict[str, Any]:
    """ElasticSwitch-style limiters: hose guarantee B (:func:`hose_b`) per VM, Reno senders."""
    sc = _scenario(setup, [_vm(v) for v in setup.vms], [_flow(f) for f in setup.flows])
    sc["cc"] = {"kind": "reno"}
    sc["scheme"] = {"kind": "elasticswitch", "guarantees": {v.id: hose_b(setup, v) for v in setup.vms}}
    return sc


def ratelimit_price(book: PriceBook, vm: SetupVm, use: VmUse) -> Decimal:
    """[ratelimit] P0 + P2 B per VM-hour (no weight)."""
    p = vm.purchase
    return _per_hour(
        linear_terms(_section(book, "ratelimit"), classify(p.guarantee, 1), p.guarantee, Decimal(1))
    )


def ratelimit_params(p: Purchase) -> dict[str, Any]:
    """B (None: the host port's fair share)."""
    return {"B_bps": p.guarantee if p.guarantee > 0 else None}


# ------------------------------------------------------------------------------------------------ tcp


def tcp_build(setup: Setup) -> dict[str, Any]:
    """Plain Reno: the purchase changes nothing."""
    sc = _scenario(setup, [_vm(v) for v in setup.vms], [_flow(f) for f in setup.flows])
    sc["cc"] = {"kind": "reno"}
    return sc


def tcp_price(book: PriceBook, vm: SetupVm, use: VmUse) -> Decimal:
    """[vbp] P0: plain TCP can only sell best effort."""
    return Decimal(_section(book, "vbp").p0)


def tcp_params(p: Purchase) -> dict[str, Any]:
    """Nothing."""
    return {}


SCHEMES: dict[str, Scheme] = {
    s.name: s
    for s in (
        Scheme("paccp-vbp", "PACCP, VM-based pricing", paccp_vbp_build, paccp_params, paccp_vbp_price),
        Scheme("paccp-fbp", "PACCP, flow-based pricing", paccp_fbp_build, paccp_params, paccp_fbp_price),
        Scheme("softbw", "SoftBW host fulfilment scheduler", softbw_build, softbw_params, softbw_price),
        Scheme("mptcp-bgwc", "MPTCP BG/WC (ours variant)", mptcp_build, mptcp_params, mptcp_price),
        Scheme(
            "mptcp-bgwc-shared",
            "MPTCP BG/WC, levels sharing one buffer",
            mptcp_shared_build,
            mptcp_params,
            mptcp_price,
        ),
        Scheme(
            "ratelimit",
            "ElasticSwitch-style rate limiters",
            ratelimit_build,
            ratelimit_params,
            ratelimit_price,
        ),
        Scheme("tcp", "plain TCP Reno", tcp_build, tcp_params, tcp_price),
        Scheme("paccp-host", "PACCP enforced at the host", _host.build_with(), _host.params, _host.price),
        *(
            Scheme(f"paccp-host-{n}", f"ablation {n}", _host.build_with(**sw), _host.params, _host.price)
            for n, sw in _host.ABLATIONS.items()
        ),
        *(
            Scheme(f"paccp-host-{n}", f"variant {n}", _host.build_with(**sw), _host.params, _host.price)
            for n, sw in _host.VARIANTS.items()
        ),
    )
}


DIAGNOSTICS: tuple[str, ...] = ("mptcp-bgwc-shared",)
"""Schemes that answer a question about another (here: MPTCP BG/WC's switch memory); run only when named."""


SCHEME_SETS: dict[str, tuple[str, ...]] = {
    "ablations": ("paccp-host", *(f"paccp-host-{n}" for n in _host.ABLATIONS)),
}
"""Names ``--schemes`` takes for several schemes at once: ``ablations`` is paccp-host and every ablation of
it (one part off each), the runs ``paccp reproduce ablation`` makes."""


def parse_schemes(text: str) -> list[Scheme]:
    """``paccp-vbp,softbw,...`` to schemes, a set of :data:`SCHEME_SETS` standing for its members
    (UserError naming an unknown one)."""
    names = [s.strip() for s in text.split(",") if s.strip()]
    names = [m for n in names for m in SCHEME_SETS.get(n, (n,))]
    if not names:
        raise UserError("--schemes: give at least one scheme")
    out = []
    for n in names:
        if n not in SCHEMES:
            known = ", ".join([*SCHEMES, *SCHEME_SETS])
            raise UserError(f"--schemes: unknown scheme {n!r} (known: {known})")
        if SCHEMES[n] in out:
            raise UserError(f"--schemes: {n!r} given twice")
        out.append(SCHEMES[n])
    return out
