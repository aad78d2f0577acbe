#!/usr/bin/env python3
"""Generate tests/vectors/paccp_law.json: conformance vectors for the PACCP control law (SPEC section 3).

This script is the oracle: a literal transcription of the paper's Eqs. 14-18 in double precision, kept
separate from both product implementations (the engine's `cc::paccp` and `bpf/paccp_law.h`), which are
checked against its output. Re-run it only when the law's specification changes:

    python3 tools/gen_law_vectors.py > tests/vectors/paccp_law.json

Semantics of a case (all windows in segments, fractional):
- state: phase ("ss" = slow start, ssthresh infinite; "ca" = congestion avoidance, ssthresh <= cwnd),
  cwnd, wmin, omega, rcos; event "ack" (cg = 0 for a whole RTT) or "loss" (cg = 1, one loss event).
- per_rtt.cwnd: the per-RTT rule applied once, the regime (below/above Wmin) taken at the start.
- per_ack.cwnd (event "ack"): the per-ACK translation applied for `acks` = max(1, floor(cwnd)) ACKs of one
  segment each, re-evaluating the regime (cwnd < wmin) before every ACK, as an implementation does:
  a multiplicative per-RTT factor g adds (g - 1) per ACK, a per-RTT increment a adds a / cwnd per ACK.
- loss: cwnd' = the decrease rule, ssthresh' = cwnd' (same for per_rtt and per_ack).
- every result is floored at `min_cwnd` (1 segment).
"""

from __future__ import annotations

import json
import math
import sys

MIN_CWND = 1.0


def ss_factor_below(omega: float, rcos: float) -> float:
    return (3 * rcos - 3 ** (1 - omega)) / 2 + 1


def ss_factor_above(omega: float) -> float:
    return (3 - 3 ** (1 - omega)) / 2 + 1


def ss_factor_loss(omega: float) -> float:
    return 1 - 3 ** (1 - omega) / 2


def per_rtt(phase: str, cwnd: float, wmin: float, omega: float, rcos: float, loss: bool) -> float:
    if phase == "ss":
        if loss:
            w = ss_factor_loss(omega) * cwnd
        elif cwnd < wmin:
            w = ss_factor_below(omega, rcos) * cwnd
        else:
            w = ss_factor_above(omega) * cwnd
    else:
        if loss:
            w = cwnd / 2 + (omega - 1)
        elif cwnd < wmin:
            w = (rcos + 1) * cwnd / 2 + (rcos - 1 + omega)
        else:
            w = cwnd + omega
    return max(w, MIN_CWND)


def per_ack_rtt(phase: str, cwnd: float, wmin: float, omega: float, rcos: float) -> tuple[int, float]:
    acks = max(1, math.floor(cwnd))
    w = cwnd
    for _ in range(acks):
        if phase == "ss":
            g = ss_factor_below(omega, rcos) if w < wmin else ss_factor_above(omega)
            w += g - 1
        elif w < wmin:
            w += ((rcos + 1) / 2 - 1) + (rcos - 1 + omega) / w
        else:
            w += omega / w
        w = max(w, MIN_CWND)
    return acks, w


def main() -> None:
    cases = []
    for phase in ("ss", "ca"):
        for cwnd in (1.0, 2.5, 10.0, 37.3, 100.0, 400.0):
            for wmin in (0.0, 5.0, 50.0):
                for omega in (0.5, 1.0, 2.0, 3.5):
                    for rcos in (1.5, 3.0):
                        for event in ("ack", "loss"):
                            case: dict[str, object] = {
                                "id": f"{phase}-w{cwnd:g}-m{wmin:g}-o{omega:g}-r{rcos:g}-{event}",
                                "phase": phase,
                                "cwnd": cwnd,
                                "wmin": wmin,
                                "omega": omega,
                                "rcos": rcos,
                                "event": event,
                            }
                            loss = event == "loss"
                            new = per_rtt(phase, cwnd, wmin, omega, rcos, loss)
                            case["per_rtt"] = {"cwnd": new, "ssthresh": new if loss else None}
                            if loss:
                                case["per_ack"] = {"acks": 0, "cwnd": new, "ssthresh": new}
                            else:
                                acks, w = per_ack_rtt(phase, cwnd, wmin, omega, rcos)
                                case["per_ack"] = {"acks": acks, "cwnd": w, "ssthresh": None}
                            cases.append(case)
    wmin_cases = []
    for theta in (0, 400_000_000, 2_000_000_000, 7_000_000_000):
        for srtt_ns in (20_000, 100_000, 1_000_000):
            for mss in (1448, 1460):
                wmin_cases.append(
                    {
                        "theta_bps": theta,
                        "srtt_ns": srtt_ns,
                        "mss_bytes": mss,
                        "wmin": theta * srtt_ns / (8 * mss * 1e9),
                    }
                )
    doc = {
        "description": "PACCP control-law conformance vectors (SPEC section 3); see tools/gen_law_vectors.py",
        "min_cwnd": MIN_CWND,
        "float_tolerance_rel": 1e-9,
        "cases": cases,
        "wmin_cases": wmin_cases,
    }
    json.dump(doc, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
