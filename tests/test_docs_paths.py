"""Every repository path, file name and ``paccp.`` module the docs name exists, and every docs page the code
names exists (issue 28: the layout moved modules; the README's sections moved to the docs site).

Checked in every hand-written page of docs/ (the generated results pages are not: they name the run's own
files): paths under the repository's top-level folders (``python/paccp/...``, ``crates/...``,
``scenarios/...``, ``tools/...``, ...; a ``*`` must match something, a placeholder such as ``<name>`` or
``NAME`` is skipped, and so are git-ignored build outputs and a path introduced as a "New file"), bare
backticked source file names (```prr.rs```, ```netns.py```: some tracked file ends so) and dotted
``paccp.x.y`` names (a module, or an attribute of one). In the code (python/, crates/, tools/, tests/):
every ``docs/....md`` it points readers to.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import subprocess
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TOP = (
    "python",
    "crates",
    "scenarios",
    "tools",
    "tests",
    "docs",
    "bpf",
    "deploy",
    "data",
    "sweeps",
    "pricebooks",
)
_PATH = re.compile(r"(?<![\w./~-])((?:" + "|".join(TOP) + r")/[\w./*<>{}-]*[\w*/>}])")
_NEW_FILE = re.compile(r"[Nn]ew file\**\s+`$")
_BARE_FILE = re.compile(r"`(\w[\w/-]*\.(?:rs|py|sh|c))`")
_MODULE = re.compile(r"(?<![\w./-])(paccp(?:\.[A-Za-z_]\w*)+)")
_FROM_IMPORT = re.compile(r"^\s*from (paccp[\w.]*) import ([\w, ]+(?: as \w+)?)$", flags=re.M)
_NOT_MODULE = (".toml", ".json", ".md", ".py", ".rs", ".c", ".sh", ".service", ".bpf", ".lock", ".log")


def generated_pages() -> set[str]:
    """The pages mkdocs-gen-files writes at build time (tools/gen_docs_reference.py), not in the tree."""
    spec = importlib.util.spec_from_file_location(
        "gen_docs_reference", REPO / "tools" / "gen_docs_reference.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return {f"docs/reference/{name}.md" for name in mod.PAGES}


def hand_written_pages() -> list[Path]:
    return [p for p in sorted((REPO / "docs").rglob("*.md")) if "results" not in p.relative_to(REPO).parts]


@cache
def tracked() -> tuple[str, ...]:
    out = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    return tuple(out.split())


def _ignored(path: str) -> bool:
    return subprocess.run(["git", "check-ignore", "-q", path], cwd=REPO).returncode == 0


def missing_paths(text: str, root: Path = REPO) -> list[str]:
    """The repository paths named in ``text`` that do not exist under ``root``."""
    bad = []
    for m in _PATH.finditer(text):
        path = m.group(1).rstrip(".")
        if re.search(r"[<>{}]|NAME|\bID\b|\bN\b", path) or _NEW_FILE.search(text[: m.start()]):
            continue
        exists = any(root.glob(path)) if "*" in path else (root / path).exists()
        if not exists and not _ignored(path):
            bad.append(path)
    return bad


def missing_file_names(text: str) -> list[str]:
    """Backticked bare file names (``prr.rs``) that no tracked file ends with."""
    bad = []
    for name in set(_BARE_FILE.findall(text)):
        if name.startswith(TOP):
            continue  # a repository path, checked by missing_paths
        if not any(f == name or f.endswith("/" + name) for f in tracked()):
            bad.append(name)
    return bad


def resolves(dotted: str) -> bool:
    """``paccp.a.b`` is a module, or an attribute of the longest importable prefix."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def test_every_repository_path_in_the_docs_exists() -> None:
    bad = {p.relative_to(REPO).as_posix(): missing_paths(p.read_text()) for p in hand_written_pages()}
    assert not {k: v for k, v in bad.items() if v}, bad


def test_every_source_file_name_in_the_docs_is_tracked() -> None:
    bad = {p.relative_to(REPO).as_posix(): missing_file_names(p.read_text()) for p in hand_written_pages()}
    assert not {k: v for k, v in bad.items() if v}, bad


def paccp_names(text: str) -> list[str]:
    """Dotted ``paccp.`` names in ``text``, and every name a ``from paccp... import a, b`` line imports."""
    names = [n.rstrip(".") for n in _MODULE.findall(text)]
    for mod, imported in _FROM_IMPORT.findall(text):
        names += [f"{mod}.{n.split(' as ')[0].strip()}" for n in imported.split(",") if n.strip()]
    return names


def test_every_paccp_module_in_the_docs_resolves() -> None:
    bad: dict[str, set[str]] = {}
    for page in hand_written_pages():
        for name in paccp_names(page.read_text()):
            if not name.endswith(_NOT_MODULE) and not resolves(name):
                bad.setdefault(page.relative_to(REPO).as_posix(), set()).add(name)
    assert not bad, bad


def test_every_docs_page_the_code_names_exists() -> None:
    bad, generated = [], generated_pages()
    for f in tracked():
        if f.startswith(("python/", "crates/", "tools/", "tests/")) and f.endswith((".py", ".rs")):
            for page in re.findall(r"\bdocs/\w[\w/.-]*?\.md\b", (REPO / f).read_text()):
                if not (REPO / page).exists() and page not in generated:
                    bad.append(f"{f}: {page}")
    assert not bad, bad


def test_the_checks_fail_on_stale_names(tmp_path: Path) -> None:
    """A moved module, file or path is caught (the checks above can fail)."""
    (tmp_path / "python").mkdir()
    (tmp_path / "python" / "here.py").write_text("")
    text = "see `python/here.py`, `python/gone.py` and `python/*.py`; New file `python/mine.py`:"
    assert missing_paths(text, root=tmp_path) == ["python/gone.py"]
    assert missing_file_names("`prr.rs` and `simcli.py`") == ["simcli.py"]
    assert resolves("paccp.sim.engine.run") and not resolves("paccp.simcli")
    assert paccp_names("from paccp import mapreduce as mr") == ["paccp.mapreduce"]
    assert not resolves("paccp.mapreduce") and resolves("paccp.traffic.mapreduce")
