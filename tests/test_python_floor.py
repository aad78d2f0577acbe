"""One Python floor: the package needs 3.11 (tomllib, datetime.UTC), and every tool that assumes a version
says the same (pip's requires-python, ruff's target, mypy's version, the extension's stable ABI)."""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_tool_assumes_the_same_python() -> None:
    py = tomllib.loads((ROOT / "pyproject.toml").read_text())
    floor = re.fullmatch(r">=(\d+)\.(\d+)", py["project"]["requires-python"])
    assert floor, py["project"]["requires-python"]
    major, minor = int(floor.group(1)), int(floor.group(2))
    assert (major, minor) >= (3, 11), "tomllib and datetime.UTC are imported without fallback"
    assert py["tool"]["ruff"]["target-version"] == f"py{major}{minor}"
    assert py["tool"]["mypy"]["python_version"] == f"{major}.{minor}"
    cargo = (ROOT / "crates/paccp-py/Cargo.toml").read_text()
    assert f'"abi3-py{major}{minor}"' in cargo
    assert sys.version_info >= (major, minor)
