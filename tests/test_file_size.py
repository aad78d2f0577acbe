"""No Python file of the package or the tools above 600 lines (issue 28: a file that grows past it is split
by what it does, as ``datapath/host/{testbed,cheat,overhead}.py`` were)."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MAX_LINES = 600


def oversized(*roots: Path) -> dict[str, int]:
    """Every ``*.py`` under ``roots`` with more than :data:`MAX_LINES` lines, and its line count."""
    out = {}
    for root in roots:
        for p in sorted(root.rglob("*.py")):
            n = len(p.read_text(encoding="utf-8").splitlines())
            if n > MAX_LINES:
                out[str(p.relative_to(root.parent))] = n
    return out


def test_no_python_file_above_600_lines() -> None:
    assert oversized(REPO / "python", REPO / "tools") == {}


def test_the_rule_sees_a_long_file(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "short.py").write_text("x = 1\n" * MAX_LINES)
    (pkg / "long.py").write_text("x = 1\n" * (MAX_LINES + 1))
    assert oversized(pkg) == {"pkg/long.py": MAX_LINES + 1}
