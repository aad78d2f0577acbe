"""The gaming points of comparison files alone, for a quick look at one scheme's gains (seconds, not minutes).

    .venv/bin/python tools/gaming_gains.py paccp-host,paccp-host-no-fluid scenarios/compare-clos-*.toml
    .venv/bin/python tools/gaming_gains.py paccp-host scenarios/compare-*.toml scenarios/heldout/*.toml

For each file and scheme: the gain of the many-connection VM at each of the file's k, as ``paccp compare``
computes it (its rate at k over the mean of every VM's rate at k = 1, seed by seed, then the mean over the
seeds), from the file's seeds (``--seeds 1,2,3`` to choose). Nothing is cached and nothing else of the file
runs; ``paccp compare`` gives the same numbers with their CIs.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from paccp.compare.measure import evaluate, gaming_gains, gaming_rates
from paccp.compare.schemes import Scheme, parse_schemes
from paccp.compare.setup import gaming_setup
from paccp.compare.spec import load_spec
from paccp.sim.sweep import Point, resolve


def gains(path: Path, s: Scheme, seeds: list[int] | None) -> tuple[str, list[int], list[float]]:
    """(where, the file's k, the mean gain at each k) of scheme ``s`` on ``path``'s gaming point."""
    spec = load_spec(path)
    g = spec.cfg.gaming
    if g is None:
        raise SystemExit(f"{path}: no [compare.gaming] table")
    seeds = seeds or list(spec.cfg.seeds)
    rates = {}
    for k in g.k:
        for seed in seeds:
            setup = gaming_setup(g, k, seed, spec.cfg.window, spec.base.get("transport"))
            point = resolve(Point(scenario=s.build(setup), params={}), where=f"{path} k={k} seed {seed}")
            rates[(k, seed)] = gaming_rates(evaluate(point), setup)
    ref = {sd: rates[(1, sd)] for sd in seeds}
    means = [float(np.mean(gaming_gains(ref, {sd: rates[(k, sd)] for sd in seeds}))) for k in g.k]
    return g.where, list(g.k), means


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("schemes", help="comma-separated scheme names or sets, as paccp compare --schemes")
    ap.add_argument("files", nargs="+", type=Path, help="comparison files with a [compare.gaming] table")
    ap.add_argument("--seeds", help="comma-separated seeds (default: the file's)")
    a = ap.parse_args()
    seeds = [int(x) for x in a.seeds.split(",")] if a.seeds else None
    for f in a.files:
        for s in parse_schemes(a.schemes):
            where, ks, means = gains(f, s, seeds)
            cells = " ".join(f"k={k}:{m:.2f}" for k, m in zip(ks, means, strict=True))
            print(f"{f.stem} {where} {s.name} {cells}", flush=True)


if __name__ == "__main__":
    main()
