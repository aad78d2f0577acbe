"""Sensitivity of ``mptcp-fair``'s policy runs to host timing and the testbed's RTT
(docs/explanation/mptcp.md, "Host timing and the testbed's RTT"): one run of
:func:`~paccp.experiments.mptcp_bgwc.fair_scenario` with the receivers' ACK delay, every link's delay or the
whole transport changed, printed as one JSON line (S1's WC over S3's and S4's, and per server its WC
subflows' mean window, loss rate and timeouts from a 2 s diagnosis rerun, and the WC subflows' srtt).

    python -m paccp.experiments.mptcp_sens --n-c 5 --queue red --link-delay 50us --ack-delay 30us
    python -m paccp.experiments.mptcp_sens --n-c 5 --queue drop_tail --transport linux   # the kernel twins'

Not an experiment of ``paccp reproduce`` (the experiment keeps :data:`~.mptcp_bgwc.HOST_TRANSPORT` and
10 us links); a tool for the sensitivity table of docs/explanation/mptcp.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import numpy as np

from paccp.errors import UserError
from paccp.experiments import mptcp_bgwc as mb
from paccp.experiments.mptcp_measure import loss_sync, measure, rerun_sampled


def sens_spec(
    n_c: int,
    queue: str,
    *,
    link_delay: str = "10us",
    ack_delay: str | None = None,
    linux: bool = False,
    seed: int = 1,
    seconds: float = mb.FULL_S,
) -> dict[str, Any]:
    """The policy run of ``mptcp-fair`` with every link's delay set, and the transport replaced by
    ``{ack_delay}`` (None: the engine's default, no delay) or, with ``linux``, by the kernel twins' whole
    transport (``paccp.datapath.paccp.fig7.SIM_TRANSPORT``)."""
    spec = mb.fair_scenario(n_c, policy=True, seed=seed, switch_queue=queue)
    spec["run"].update({"duration": f"{seconds:g}s", "warmup": f"{seconds / 10:g}s"})
    for link in spec["topology"]["links"]:
        link["delay"] = link_delay
    if linux:
        from paccp.datapath.paccp.fig7 import SIM_TRANSPORT

        spec["transport"] = dict(SIM_TRANSPORT)
    else:
        spec["transport"] = {"ack_delay": ack_delay} if ack_delay else {}
    return spec


def _srtt_us(spec: dict[str, Any], seconds: float) -> dict[str, tuple[float, float]]:
    """Per WC subflow: (min, mean) srtt in us over the last 4/5 of a ``seconds`` rerun."""
    smp = rerun_sampled(spec, seconds=seconds, description="srtt").samples
    out: dict[str, tuple[float, float]] = {}
    if smp.srtt_us is None:
        return out
    first = smp.srtt_us.shape[1] // 5
    for i, fid in enumerate(smp.flow_ids):
        v = smp.srtt_us[i][first:]
        v = v[v > 0]
        if "/wc" in fid and v.size:
            out[fid] = (round(float(v.min()), 1), round(float(v.mean()), 1))
    return out


def run(spec: dict[str, Any], *, diag_seconds: float = 2.0) -> dict[str, Any]:
    """Measure ``spec``: WC rates, S1's ratios, per server its WC subflows' window / loss / timeouts."""
    m = measure(spec, description="mptcp-fair sensitivity")
    wc = {f"S{i}": m.rate(f"vm{i}", "wc") for i in (1, 3, 4)}
    sub = loss_sync(spec, description="sensitivity diagnosis", seconds=diag_seconds).get("subflows", {})

    def per_server(prefix: str) -> dict[str, float]:
        xs = [v for k, v in sub.items() if k.startswith(prefix)]
        if not xs:
            return {}
        return {
            "subflows": len(xs),
            "mean_cwnd_pkts": round(float(np.mean([x["mean_cwnd_pkts"] for x in xs])), 2),
            "loss_pct": round(float(np.mean([x["loss_rate"] for x in xs])) * 100, 2),
            "timeouts": round(float(np.mean([x["timeouts"] for x in xs])), 1),
        }

    return {
        "wc_mbps": {k: round(v, 1) for k, v in wc.items()},
        "s1_over_s3": round(wc["S1"] / wc["S3"], 3) if wc["S3"] > 0 else None,
        "s1_over_s4": round(wc["S1"] / wc["S4"], 3) if wc["S4"] > 0 else None,
        "per_server": {"S1": per_server("f1-"), "S3": per_server("f3/"), "S4": per_server("f4/")},
        "wc_srtt_us_min_mean": _srtt_us(spec, min(1.0, diag_seconds)),
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        prog="python -m paccp.experiments.mptcp_sens", description=__doc__.split("\n")[0]
    )
    p.add_argument("--n-c", type=int, default=5, choices=(3, 5))
    p.add_argument("--queue", default="red", choices=tuple(mb.QUEUE_MODELS))
    p.add_argument("--link-delay", default="10us")
    p.add_argument("--ack-delay", default="30us", help="receivers' mean ACK delay; 0 for none")
    p.add_argument("--transport", default="engine", choices=("engine", "linux"))
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--seconds", type=float, default=mb.FULL_S)
    a = p.parse_args(argv)
    spec = sens_spec(
        a.n_c,
        a.queue,
        link_delay=a.link_delay,
        ack_delay=None if a.ack_delay in ("0", "0us") else a.ack_delay,
        linux=a.transport == "linux",
        seed=a.seed,
        seconds=a.seconds,
    )
    try:
        out = {"args": vars(a), **run(spec, diag_seconds=min(2.0, a.seconds))}
    except UserError as exc:
        print(f"mptcp_sens: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    print(json.dumps(out, sort_keys=True))


if __name__ == "__main__":
    main()
