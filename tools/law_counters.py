"""What paccp-host's law saw of each VM at a comparison file's gaming point: the signal and the rates.

    .venv/bin/python tools/law_counters.py scenarios/compare-clos-mapreduce.toml --k 16
    .venv/bin/python tools/law_counters.py scenarios/heldout/compare-unseen-6host.toml --k 8 --seed 2

One run of the file's gaming point (its VMs on one bottleneck, the gamer with k connections) under a
``paccp_host`` scheme (``paccp-host`` or one of its ablations / variants), and per VM, from the engine's
``host_law`` output: the share of the law's time marked (queueing delay beyond the host above its
threshold) and, of its unmarked time, the share with the window not in use (the law holding, above the
guarantee); the mean queueing delay its ACKs met; its law's mean rate; what it delivered beside it.
The fabric gaming gains
below 1 (docs/host-scheme.md, "Not solved") show up here as a gamer marked in more of its time, or
delivering less of its law's rate, than the VMs beside it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from paccp.compare.schemes import parse_schemes
from paccp.compare.setup import gaming_setup
from paccp.compare.spec import load_spec
from paccp.errors import UserError
from paccp.sim import engine
from paccp.sim.sweep import Point, resolve


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("file", type=Path, help="a comparison file with a [compare.gaming] table")
    ap.add_argument("--k", type=int, required=True, help="the gamer's connections")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--scheme", default="paccp-host", help="a paccp_host scheme of paccp compare")
    a = ap.parse_args()
    spec = load_spec(a.file)
    g = spec.cfg.gaming
    if g is None:
        raise SystemExit(f"{a.file}: no [compare.gaming] table")
    try:
        (scheme,) = parse_schemes(a.scheme)
    except (UserError, ValueError) as e:
        raise SystemExit(f"--scheme {a.scheme!r}: one paccp_host scheme of paccp compare ({e})") from None
    setup = gaming_setup(g, a.k, a.seed, spec.cfg.window, spec.base.get("transport"))
    resolved = resolve(Point(scenario=scheme.build(setup), params={}), where=str(a.file)).resolved
    assert resolved is not None
    res = engine.run(resolved.engine)
    if res.host_law is None:
        raise SystemExit(f"{a.scheme}: no host_law in the output (not a paccp_host scheme with its window)")
    law = {str(r["vm"]): r for r in res.host_law.to_pylist()}
    mss_bits = (resolved.scenario.transport.mtu - resolved.scenario.transport.header) * 8
    s = res.samples
    warm = int(resolved.scenario.run.warmup)
    k0 = -(-warm // s.interval_ns)
    row_of = {fid: i for i, fid in enumerate(s.flow_ids)}
    got: dict[str, float] = {}
    for f in res.flows.to_pylist():
        if f["id"] in row_of:
            vm = str(f["vm"])
            got[vm] = got.get(vm, 0.0) + float(np.sum(s.acked_bytes[row_of[f["id"]], k0:]))
    span_ms = (s.acked_bytes.shape[1] - k0) * s.interval_ns / 1e6
    head = f"{a.file.stem}, {a.scheme}, k = {a.k}, seed {a.seed}"
    print(f"{head} (rates over the {span_ms:.0f} ms after warm-up)")
    print("vm      marked  unused  delay us  law seg/ms  delivered seg/ms  delivered/law")
    for vm, r in law.items():
        t = r["marked_ns"] + r["unmarked_ns"] + r["unused_ns"]
        unmarked = r["unmarked_ns"] + r["unused_ns"]
        rate = r["law_segments"] / (r["law_ns"] / 1e6) if r["law_ns"] else float("nan")
        dlv = got.get(vm, 0.0) * 8 / mss_bits / span_ms
        tag = " (gamer)" if vm == setup.gamer else ""
        print(
            f"{vm:<7} {r['marked_ns'] / t if t else float('nan'):6.3f}  "
            f"{r['unused_ns'] / unmarked if unmarked else float('nan'):6.3f}  "
            f"{r['delay_ns'] / max(r['samples'], 1) / 1e3:8.1f}  {rate:10.2f}  {dlv:16.2f}  "
            f"{dlv / rate if rate else float('nan'):13.2f}{tag}"
        )


if __name__ == "__main__":
    main()
