"""Golden-output regression test (htsim style): whole runs must stay byte-identical.

Runs ``paccp run scenarios/dumbbell.toml``, ``paccp reproduce fig4a fig4c fig5 --quick`` and
``paccp reproduce fig8 --quick`` through the CLI and compares a digest of every file of their run
directories with ``tests/golden/run_digests.json``. Normalised before hashing:

- wall-clock fields (``wall_s``, ``wall_s_points``) are removed from JSON files;
- floats in JSON files are rounded to 9 significant digits: the optimum and the normalised utilities go
  through numpy/OpenBLAS, whose kernels are chosen by the CPU (the same run gave 3250000000.000002 with
  OpenBLAS's SkylakeX kernels and 3250000000.0 with its Zen ones); the engine's own outputs (CSV/Parquet,
  counts) are compared to the bit;
- the sweep cache's file names (they hash the engine's source, which changes with every edit) are
  replaced by the digests of their contents;
- PNG plots are left out: their bytes depend on the matplotlib/freetype build, not on the engine, and
  the data they draw is in the digested CSV/Parquet/JSON files.

A deliberate change of the results regenerates the file with
``.venv/bin/python tests/test_golden_runs.py --write`` (say why in the commit).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden" / "run_digests.json"
WALL_CLOCK_KEYS = frozenset({"wall_s", "wall_s_points"})
RUNS: dict[str, list[str]] = {
    "dumbbell": ["run", "scenarios/dumbbell.toml"],
    "longlived": ["reproduce", "fig4a", "fig4c", "fig5", "--quick"],
    "fig8": ["reproduce", "fig8", "--quick"],
}


def _strip_wall_clock(doc: Any) -> Any:
    if isinstance(doc, dict):
        return {k: _strip_wall_clock(v) for k, v in doc.items() if k not in WALL_CLOCK_KEYS}
    if isinstance(doc, list):
        return [_strip_wall_clock(v) for v in doc]
    return doc


def _round_floats(doc: Any) -> Any:
    if isinstance(doc, float):
        return float(f"{doc:.9g}")
    if isinstance(doc, dict):
        return {k: _round_floats(v) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_round_floats(v) for v in doc]
    return doc


def file_digest(path: Path) -> str:
    """sha256 of a file; JSON without wall-clock fields, floats to 9 significant digits (canonical form)."""
    data = path.read_bytes()
    if path.suffix == ".json":
        doc = _round_floats(_strip_wall_clock(json.loads(data)))
        data = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(data).hexdigest()


def dir_digests(run_dir: Path) -> dict[str, str]:
    """Digest of every file under ``run_dir`` (relative path -> sha256), normalised as documented."""
    out: dict[str, str] = {}
    cache: list[str] = []
    for p in sorted(run_dir.rglob("*")):
        if not p.is_file() or p.suffix == ".png":
            continue
        rel = p.relative_to(run_dir).as_posix()
        if p.parent.name == "cache":
            cache.append(file_digest(p))
            continue
        out[rel] = file_digest(p)
    for i, d in enumerate(sorted(cache)):
        out[f"cache[{i}]"] = d
    return out


def compute(work: Path) -> dict[str, dict[str, str]]:
    """Run every golden command into ``work/<name>`` and return the digests."""
    paccp = Path(sys.executable).with_name("paccp")
    env = {**os.environ, "COLUMNS": "120"}
    result: dict[str, dict[str, str]] = {}
    for name, args in RUNS.items():
        out = work / name
        proc = subprocess.run(
            [str(paccp), *args, "--out", str(out)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        assert proc.returncode == 0, f"{name}: {proc.stderr[-2000:]}"
        result[name] = dir_digests(out)
    return result


def test_runs_are_byte_identical_to_the_golden_digests(tmp_path: Path) -> None:
    if not GOLDEN.exists():
        pytest.fail(f"{GOLDEN} missing: run `.venv/bin/python tests/test_golden_runs.py --write`")
    want = json.loads(GOLDEN.read_text(encoding="utf-8"))
    got = compute(tmp_path)
    for name in RUNS:
        w, g = want[name], got[name]
        assert sorted(g) == sorted(w), f"{name}: file set differs: {sorted(set(g) ^ set(w))}"
        changed = [f for f in w if w[f] != g[f]]
        assert not changed, f"{name}: files differ from the golden run: {changed}"


if __name__ == "__main__":
    import tempfile

    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: tests/test_golden_runs.py --write")
    with tempfile.TemporaryDirectory() as d:
        digests = compute(Path(d))
    GOLDEN.parent.mkdir(parents=True, exist_ok=True)
    GOLDEN.write_text(json.dumps(digests, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {GOLDEN}")
