"""Import circles between modules: of the engine crate (``crate::`` / ``super::`` paths between its source
files) and of the Python package (the import graph grimp builds, as import-linter does).

    python tools/module_cycles.py [crates/paccp-sim/src] [paccp]

prints every circle (one line each: ``a -> b -> a``) and exits 1 when there is one. ``make lint`` runs it;
tests/test_module_cycles.py checks that it finds circles it is given.

Engine: a module is a source file (``net/qdisc.rs`` is ``net::qdisc``, ``host/mod.rs`` is ``host``); an edge
``a -> b`` is a path ``crate::b::...`` or ``super::...`` naming ``b`` (or an item of it) anywhere in ``a``'s
code outside comments, strings and ``#[cfg(test)]`` modules. A module and its own submodules (``host`` and
``host::shaper``) are one unit in Rust and their mutual paths are no circle; a submodule's tests are no
edge either.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

_COMMENT_OR_STRING = re.compile(
    r"//[^\n]*|/\*.*?\*/|b?r(#*)\".*?\"\1|b?\"(?:\\.|[^\"\\])*\"|b?'(?:\\.|[^'\\])'", re.S
)
_TEST_MOD = re.compile(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*([;{])")
_PATH = re.compile(r"\b(crate|super)((?:::\s*(?:\w+|\{))+)")


def _strip(src: str) -> str:
    """The code without comments and string literals (kept as blanks of the same line count)."""
    return _COMMENT_OR_STRING.sub(lambda m: "\n" * m.group(0).count("\n") + " ", src)


def _without_test_mods(code: str) -> tuple[str, set[str]]:
    """The code without inline ``#[cfg(test)] mod x { ... }`` bodies, and the names of ``#[cfg(test)] mod x;``
    (test modules in their own files)."""
    out, files, pos = [], set(), 0
    for m in _TEST_MOD.finditer(code):
        if m.start() < pos:
            continue
        if m.group(2) == ";":
            files.add(m.group(1))
            continue
        depth, i = 1, m.end()
        while depth and i < len(code):
            depth += {"{": 1, "}": -1}.get(code[i], 0)
            i += 1
        out.append(code[pos : m.start()])
        pos = i
    out.append(code[pos:])
    return "".join(out), files


def _expand(tail: str, code: str, start: int) -> list[list[str]]:
    """Every path of a ``crate::``/``super::`` prefix: ``::a::b`` or a group ``::{a::b, c}`` (a nested
    group counts as the path up to it: ``{a::{b, c}}`` is ``a``)."""
    segs = [s for s in re.split(r"\s*::\s*", tail.strip()) if s]
    if not segs or segs[-1] != "{":
        return [segs]
    prefix = segs[:-1]
    depth, i = 1, start
    while depth and i < len(code):
        depth += {"{": 1, "}": -1}.get(code[i], 0)
        i += 1
    body = code[start : i - 1]
    items, depth, cur = [], 0, ""
    for ch in body:
        if ch == "," and depth == 0:
            items.append(cur)
            cur = ""
            continue
        depth += {"{": 1, "}": -1}.get(ch, 0)
        cur += ch
    items.append(cur)
    paths = []
    for it in items:
        it = re.split(r"\s+as\s+", it.strip())[0]
        segs_it = [x for x in re.split(r"\s*::\s*", it.split("{")[0]) if x]
        if segs_it == ["self"]:
            paths.append(prefix)
        elif segs_it:
            paths.append([*prefix, *segs_it])
    return paths


def engine_graph(src: Path) -> dict[str, set[str]]:
    """Module -> modules it names (module paths without ``crate::``; the crate root is ``""``)."""
    files: dict[str, Path] = {}
    for f in sorted(src.rglob("*.rs")):
        rel = f.relative_to(src).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] in ("mod", "lib", "main"):
            parts = parts[:-1]
        files["::".join(parts)] = f
    codes: dict[str, str] = {}
    test_files: set[str] = set()
    for mod, f in files.items():
        code, tests = _without_test_mods(_strip(f.read_text()))
        codes[mod] = code
        test_files |= {f"{mod}::{t}" if mod else t for t in tests}
    mods = {m for m in files if not any(m == t or m.startswith(t + "::") for t in test_files)}

    def resolve(path: list[str]) -> str | None:
        for n in range(len(path), -1, -1):
            cand = "::".join(path[:n])
            if cand in mods:
                return cand
        return None

    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod in mods:
        code = codes[mod]
        here = mod.split("::") if mod else []
        # a file module's `super` is its parent module
        for m in _PATH.finditer(code):
            for segs in _expand(m.group(2), code, m.end()):
                if m.group(1) == "crate":
                    path = segs
                else:
                    up = here[:-1]
                    while segs and segs[0] == "super":
                        up, segs = up[:-1], segs[1:]
                    path = up + segs
                target = resolve(path)
                if target is None or target == mod:
                    continue
                if _related(mod, target):
                    continue
                graph[mod].add(target)
    return graph


def _related(a: str, b: str) -> bool:
    """True when one is the other's ancestor (the crate root is everyone's)."""
    return a == "" or b == "" or a.startswith(b + "::") or b.startswith(a + "::")


def cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """One circle (``[a, b, ..., a]``) per strongly connected component with more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    comps: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:  # Tarjan; graphs here are a few hundred nodes deep at most
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(comp)

    sys.setrecursionlimit(max(10_000, sys.getrecursionlimit()))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [_circle(graph, set(c)) for c in comps]


def _circle(graph: Mapping[str, Iterable[str]], comp: set[str]) -> list[str]:
    """A shortest circle through the smallest module of a component (breadth-first back to it)."""
    start = min(comp)
    prev: dict[str, str] = {}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(graph.get(v, ())):
            if w not in comp:
                continue
            if w == start:
                path = [v]
                while path[-1] != start:
                    path.append(prev[path[-1]])
                return [start, *reversed(path[:-1]), start] if v != start else [start, start]
            if w not in prev:
                prev[w] = v
                queue.append(w)
    return sorted(comp)


def python_graph(package: str) -> dict[str, set[str]]:
    """Module -> modules it imports (grimp, the graph import-linter checks; no TYPE_CHECKING imports)."""
    import grimp

    g = grimp.build_graph(package, exclude_type_checking_imports=True)
    return {m: set(g.find_modules_directly_imported_by(m)) for m in g.modules}


def main(argv: list[str]) -> int:
    src = Path(argv[0]) if argv else Path(__file__).resolve().parents[1] / "crates/paccp-sim/src"
    package = argv[1] if len(argv) > 1 else "paccp"
    found = 0
    for what, graph in (("engine", engine_graph(src)), ("python", python_graph(package))):
        circles = cycles(graph)
        for c in circles:
            print(f"{what}: import circle: {' -> '.join(c or ['crate'])}")
        found += len(circles)
        print(f"{what}: {len(graph)} modules, {len(circles)} circles")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
