"""Distance to the optimum of a scheme against an ideal scheduler in whole segments (docs/host-scheme.md,
"Shares below a segment per millisecond"): per class, the share of VM-windows within 10 % of the optimum
share for the scheme's run and for a VM that delivers exactly its optimum share in whole segments
(:func:`paccp.compare.distance.whole_segment_bound`). Runs each seed of one point at full size.

    .venv/bin/python tools/whole_segment_bound.py scenarios/heldout/compare-unseen-6host.toml 3.3x
    .venv/bin/python tools/whole_segment_bound.py FILE POINT --scheme paccp-host --seeds 1,2,3
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

from paccp.compare.distance import PER_VM_BAR, score_series, whole_segment_series, window_shares
from paccp.compare.measure import evaluate
from paccp.compare.run import load_spec, plan
from paccp.compare.schemes import SCHEMES


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file", type=Path)
    ap.add_argument("point")
    ap.add_argument("--scheme", default="paccp-host", choices=sorted(SCHEMES))
    ap.add_argument("--seeds", default=None, help="comma-separated (default: the file's)")
    a = ap.parse_args()
    spec = load_spec(a.file)
    seeds = [int(s) for s in a.seeds.split(",")] if a.seeds else list(spec.cfg.seeds)
    jobs, _ = plan(spec, [SCHEMES[a.scheme]])
    got: dict[str, list[float]] = defaultdict(list)
    ideal: dict[str, list[float]] = defaultdict(list)
    below: list[tuple[int, int, int]] = []  # per seed: VMs, below the per-VM bar (scheme), below (ideal)
    for seed in seeds:
        job = next(j for j in jobs if j.seed == seed and j.kind == "main" and j.point == a.point)
        raw = evaluate(job.sweep_point)
        series = window_shares(raw, job.setup) or {}  # the optima, solved once for both scores
        run = score_series(series, job.setup)
        perfect = score_series(whole_segment_series(series, raw), job.setup)
        below.append((run["vms"], run["vms_below"], perfect["vms_below"]))
        for out, d in ((got, run), (ideal, perfect)):
            for c, v in d["classes"].items():
                if v["within"] is not None:
                    out[c].append(v["within"])
    print(f"{a.file.name} {a.point}, seeds {seeds}: VM-windows within 10 % of the optimum share")
    print(f"{'class':<10} {a.scheme:>12} {'ideal, whole segments':>22}")
    for c in sorted(got):
        ours, best = 100 * sum(got[c]) / len(got[c]), 100 * sum(ideal[c]) / len(ideal[c])
        print(f"{c:<10} {ours:11.1f} % {best:21.1f} %")
    print(
        f"VMs within 10 % in fewer than {PER_VM_BAR:.0%} of their windows (the issue's per-VM bar), per seed:"
    )
    for seed, (n, ours_n, best_n) in zip(seeds, below, strict=True):
        print(f"  seed {seed}: {a.scheme} {ours_n} of {n}, ideal in whole segments {best_n} of {n}")


if __name__ == "__main__":
    main()
