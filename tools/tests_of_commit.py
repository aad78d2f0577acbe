"""The tests of today's suite that a commit's suite already had: to time them against that commit's suite.

    .venv/bin/python tools/tests_of_commit.py e972cff > /tmp/old-tests.txt
    .venv/bin/pytest -q -m 'not serial' -n auto --dist worksteal $(cat /tmp/old-tests.txt)
    .venv/bin/pytest -q -m serial $(cat /tmp/old-tests.txt)

A test is one of them when a test function of that name was defined in ``tests/`` at the commit (so a
test renamed since counts as new, one whose body grew counts as old). Prints ``file::function`` node ids of
the current suite, one per line (every parametrisation of a function runs), and on stderr how many tests
the current suite has and how many of them were kept.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEF = re.compile(r"^\s*(?:async\s+)?def\s+(test_\w+)", re.M)


def names_at(rev: str) -> set[str]:
    """Names of the test functions defined under tests/ at ``rev``."""
    files = subprocess.run(
        ["git", "-C", str(ROOT), "ls-tree", "-r", "--name-only", rev, "tests"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    names: set[str] = set()
    for f in files:
        if f.endswith(".py"):
            text = subprocess.run(
                ["git", "-C", str(ROOT), "show", f"{rev}:{f}"], capture_output=True, text=True, check=True
            ).stdout
            names |= set(DEF.findall(text))
    return names


def current_ids() -> list[str]:
    """Node ids of today's suite (``pytest --collect-only``)."""
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [line.strip() for line in out.splitlines() if "::" in line]


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit("usage: tools/tests_of_commit.py REV")
    old = names_at(sys.argv[1])
    ids = current_ids()
    kept = [i for i in ids if re.sub(r"\[.*$", "", i.split("::")[-1], flags=re.S) in old]
    functions = sorted({re.sub(r"\[.*$", "", i, flags=re.S) for i in kept})
    print("\n".join(functions))
    print(
        f"{len(ids)} tests today, {len(kept)} of them in {len(functions)} functions defined at {sys.argv[1]}",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
