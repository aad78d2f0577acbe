"""docs/engine-contract.md and the generated engine input reference agree with the engine (issue 28).

The reference page (``reference/engine.md``) is generated from ``paccp._engine.contract_json()``, the JSON
Schema the engine derives from its own input types: it must have a row for every key of the input and of
every built-in scheme. The hand-written contract page must name only keys the engine takes, name every
key it takes, and document every key of the output a run returns (connections, handshake, cwnd
samples and the host law's counters included), so neither side can change without the other.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

from paccp import _engine

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "engine-contract.md"


@cache
def contract() -> dict[str, Any]:
    return json.loads(_engine.contract_json())  # type: ignore[no-any-return]


def schema_keys(node: Any) -> Iterator[str]:
    """Every property name anywhere in a JSON Schema."""
    if isinstance(node, dict):
        for k, v in node.get("properties", {}).items():
            yield k
            yield from schema_keys(v)
        for k, v in node.items():
            if k != "properties":
                yield from schema_keys(v)
    elif isinstance(node, list):
        for v in node:
            yield from schema_keys(v)


def input_keys() -> set[str]:
    return set(schema_keys(contract()["input"]))


def scheme_keys() -> set[str]:
    kinds = [k for e in contract()["schemes"].values() for k in e["kinds"].values() if k]
    return set(schema_keys(kinds))


def sections() -> tuple[str, str]:
    """(input part, output part) of the hand-written page."""
    text = PAGE.read_text()
    start, out, end = text.index("## Input"), text.index("## Output"), text.index("## Engine semantics")
    return text[start:out], text[out:end]


def jsonc_keys(text: str) -> set[str]:
    blocks = re.findall(r"```jsonc\n(.*?)```", text, flags=re.S)
    return {k for b in blocks for k in re.findall(r'"(\w+)"\s*:', b)}


def reference_page() -> str:
    spec = importlib.util.spec_from_file_location(
        "gen_docs_reference", REPO / "tools" / "gen_docs_reference.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.engine_page()  # type: ignore[no-any-return]


def test_the_reference_has_a_row_for_every_key_and_kind() -> None:
    page = reference_page()
    rows = set(re.findall(r"^\| `(\w+)` \|", page, flags=re.M))
    inline = set(re.findall(r'\{"(\w+)": ', page))  # one-key variants, e.g. a buffer {"packets": u64}
    assert input_keys() | scheme_keys() <= rows | inline, (input_keys() | scheme_keys()) - rows - inline
    for cat, entry in contract()["schemes"].items():
        for kind in entry["kinds"]:
            assert f"{cat} `{kind}`" in page, (cat, kind)
    assert "any JSON" not in page  # every scheme object links its kinds


def test_the_contract_page_names_only_keys_the_engine_takes() -> None:
    inp, _ = sections()
    named = jsonc_keys(inp)
    unknown = named - input_keys() - scheme_keys() - {"kind"}
    assert not unknown, f"docs/engine-contract.md names keys the engine does not take: {sorted(unknown)}"
    assert len(named) > 60


def test_the_contract_page_names_every_input_key() -> None:
    inp, _ = sections()
    missing = {k for k in input_keys() if f'"{k}"' not in inp and f"`{k}`" not in inp}
    assert not missing, f"keys the engine takes that docs/engine-contract.md does not name: {sorted(missing)}"


def _full_output() -> dict[str, Any]:
    """A short run with a connection, the handshake and cwnd samples: every optional output part."""
    from paccp.experiments import mptcp_bgwc as exp
    from paccp.scenario import parse_scenario, to_engine

    spec = exp.rcvbuf_scenario(200, 1, 131072, quick=True)
    eng = to_engine(parse_scenario(copy.deepcopy(spec)))
    eng["duration_ns"] = 20_000_000
    eng["sampling"] |= {"cwnd": True, "interval_ns": 5_000_000}
    eng["transport"]["handshake"] = {"syn_bytes": 58, "connect_timeout_ns": 1_000_000_000, "syn_retries": 5}
    return json.loads(_engine.run_json(json.dumps(eng), None))  # type: ignore[no-any-return]


def _host_law_output() -> dict[str, Any]:
    """A short run of paccp-host (the Clos comparison file's gaming point): the ``host_law`` part."""
    from paccp.compare.schemes import SCHEMES
    from paccp.compare.setup import gaming_setup
    from paccp.compare.spec import load_spec
    from paccp.sim.sweep import Point, resolve

    spec = load_spec(REPO / "scenarios" / "compare-clos-mapreduce.toml").quick()
    assert spec.cfg.gaming is not None
    setup = gaming_setup(spec.cfg.gaming, 4, 1, spec.cfg.window, spec.base.get("transport"))
    resolved = resolve(Point(scenario=SCHEMES["paccp-host"].build(setup), params={}), where="test").resolved
    assert resolved is not None
    eng = copy.deepcopy(resolved.engine)
    eng["duration_ns"] = 20_000_000
    return json.loads(_engine.run_json(json.dumps(eng), None))  # type: ignore[no-any-return]


def test_the_contract_page_documents_every_output_key() -> None:
    out = _full_output()
    assert {"connections", "handshake"} <= set(out)
    host = _host_law_output()
    assert "host_law" in host
    out |= {"host_law": host["host_law"]}
    keys = set(out) | {k for v in out.values() if isinstance(v, dict) for k in v}
    documented = jsonc_keys(sections()[1])
    assert not keys - documented, (
        f"output keys docs/engine-contract.md does not document: {keys - documented}"
    )
    assert not documented - keys, (
        f"docs/engine-contract.md documents output keys a run lacks: {documented - keys}"
    )
