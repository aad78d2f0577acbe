"""A packet-by-packet reference of SoftBW's fulfilment rule at one port, for the tests (not used at run time).

Per VM: a queue fed at a constant rate d (or always backlogged, d = inf), a guarantee B and a lag dT. The port
sends one packet at a time; after each departure of VM v: dT_v += tau - P/B_v (tau = time since v's
previous departure), dT >= 0 -> tts = 0; dT < 0 -> tts = now + P/B; crossing from >= 0 to < 0 ->
tts = now + P/B - dT. Selection: round robin over the backlogged VMs whose tts is 0 or has passed; if there
is none (work conserving), round robin over all backlogged VMs, with a pointer of its own (one shared pointer
would favour the VM after the last due one). Positive lag (credit banked by
a VM sending below B) is capped at ``max_credit`` seconds. Best effort (B = 0) is never due.

``stamp`` says which instant counts as a packet's departure: ``"end"`` of its serialisation (default) or
its ``"start"`` (when the engine's selector sees it leave the queue). The two agree on everything that is
owed (guarantees, over-commitment) but share the spare capacity among VMs above their guarantees
differently: 450/200/100 Mb/s backlogged on 1 Gb/s gives 450/275/275 with "end", 500/250/250 with "start".
"""

from __future__ import annotations

import math


def port_rates(
    cap: float,
    guarantees: list[float],
    demands: list[float],
    *,
    duration: float = 0.2,
    warmup: float = 0.05,
    packet_bits: float = 12_000.0,
    max_credit: float = 1e-3,
    stamp: str = "end",
) -> list[float]:
    """Mean rate of each VM over [warmup, duration) in bit/s."""
    n = len(guarantees)
    gap = [packet_bits / d if d > 0 else math.inf for d in demands]
    next_arr = [i * 1e-9 if d > 0 else math.inf for i, d in enumerate(demands)]
    queue = [0] * n
    lag = [0.0] * n
    last_dep: list[float | None] = [None] * n
    tts: list[float | None] = [None] * n
    sent = [0.0] * n
    now, last, last_fb = 0.0, n - 1, n - 1
    tx = packet_bits / cap
    while now < duration:
        for i in range(n):
            while next_arr[i] <= now:
                queue[i] += 1
                next_arr[i] = math.inf if math.isinf(demands[i]) else next_arr[i] + gap[i]
        back = [queue[i] > 0 or math.isinf(demands[i]) for i in range(n)]
        due = [back[i] and guarantees[i] > 0 and (tts[i] is None or tts[i] <= now) for i in range(n)]  # type: ignore[operator]
        pick = next((j for k in range(1, n + 1) if due[j := (last + k) % n]), None)
        if pick is not None:
            last = pick
        else:
            pick = next((j for k in range(1, n + 1) if back[j := (last_fb + k) % n]), None)
            if pick is None:
                now = min(next_arr)
                continue
            last_fb = pick
        i = pick
        start = now
        now += tx
        dep = now if stamp == "end" else start
        queue[i] = max(queue[i] - 1, 0)
        if now > warmup:
            sent[i] += packet_bits
        if guarantees[i] <= 0:
            continue
        ideal = packet_bits / guarantees[i]
        prev = last_dep[i]
        tau = ideal if prev is None else dep - prev
        before = lag[i]
        lag[i] = min(lag[i] + tau - ideal, max_credit)
        last_dep[i] = dep
        if lag[i] >= 0:
            tts[i] = None
        elif before >= 0:
            tts[i] = dep + ideal - lag[i]
        else:
            tts[i] = dep + ideal
    return [s / (duration - warmup) for s in sent]
