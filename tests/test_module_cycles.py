"""No import circle between the engine's modules or the Python package's (tools/module_cycles.py), and the
checker finds the circles it is shown."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("module_cycles", ROOT / "tools" / "module_cycles.py")
assert _spec is not None and _spec.loader is not None
mc = importlib.util.module_from_spec(_spec)
sys.modules["module_cycles"] = mc
_spec.loader.exec_module(mc)


def _shown(circles: list[list[str]]) -> str:
    return "\n".join(" -> ".join(c) for c in circles)


def test_engine_modules_have_no_circle() -> None:
    graph = mc.engine_graph(ROOT / "crates" / "paccp-sim" / "src")
    assert len(graph) > 30 and graph["sim"], "the module graph was not read"
    circles = mc.cycles(graph)
    assert not circles, "use crate:: circles in the engine:\n" + _shown(circles)


def test_python_package_has_no_import_circle() -> None:
    graph = mc.python_graph("paccp")
    assert "paccp.datapath.paccp.vms" in graph
    circles = mc.cycles(graph)
    assert not circles, "import circles in python/paccp:\n" + _shown(circles)


def _crate(tmp: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (tmp / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp / name).write_text(text)
    return tmp


def test_the_checker_finds_circles_through_use_groups_super_and_inline_paths(tmp_path: Path) -> None:
    src = _crate(
        tmp_path,
        {
            "lib.rs": "pub mod net;\npub mod host;\nmod sim;\n",
            "net/mod.rs": "pub mod qdisc;\npub mod channel;\n",
            # a grouped use naming host, and a parent module through super
            "net/qdisc.rs": "use super::channel::Ch;\nuse crate::{config::X, host::shaper::Shaper};\n",
            "host/mod.rs": "pub mod shaper;\n",
            "host/shaper.rs": "use crate::net::qdisc::Fifo;\n",
            # an inline path (no use) into sim, and sim back into net::channel
            "net/channel.rs": "fn f() { crate::sim::prefetch(1); }\n",
            "sim/mod.rs": "use crate::net::channel::Channel;\n",
        },
    )
    circles = {tuple(c) for c in mc.cycles(mc.engine_graph(src))}
    assert ("host::shaper", "net::qdisc", "host::shaper") in circles
    assert ("net::channel", "sim", "net::channel") in circles


def test_comments_strings_tests_and_own_submodules_are_no_edge(tmp_path: Path) -> None:
    src = _crate(
        tmp_path,
        {
            "lib.rs": "pub mod a;\npub mod b;\n",
            "a/mod.rs": (
                "//! see [`crate::b::Y`]\npub mod inner;\nuse self::inner::Z;\n"
                'const S: &str = "crate::b::Y";\n'
                "#[cfg(test)]\nmod tests {\n    use crate::b::Y;\n    fn t() { let _ = { 1 }; }\n}\n"
            ),
            "a/inner.rs": "use super::W;\nuse crate::a::V;\n",
            "b.rs": "use crate::a::X;\n/* crate::a::inner */\n",
        },
    )
    graph = mc.engine_graph(src)
    assert graph["b"] == {"a"} and graph["a"] == set() and graph["a::inner"] == set()
    assert mc.cycles(graph) == []


def test_cycles_of_a_plain_graph() -> None:
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert mc.cycles(g) == [["a", "b", "c", "a"]]
    assert mc.cycles({"x": {"y"}, "y": set()}) == []
