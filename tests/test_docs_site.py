"""The documentation site: the generated reference covers every command, option and scenario field; the
results pages come from a reproduction's files (checked on a tiny fixture); the nav lists every page."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]


def _gen() -> Any:
    spec = importlib.util.spec_from_file_location(
        "gen_docs_reference", REPO / "tools" / "gen_docs_reference.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["gen_docs_reference"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_every_command_and_option_has_a_reference_entry() -> None:
    import typer

    from paccp.cli import app

    page = _gen().cli_page()
    root = typer.main.get_command(app)
    n = 0

    def walk(cmd: Any, path: list[str]) -> None:
        nonlocal n
        for name, sub in cmd.commands.items() if hasattr(cmd, "commands") else ():
            p = [*path, name]
            assert f"{{#{'-'.join(p)}}}" in page, f"no reference entry for {' '.join(p)}"
            n += 1
            for param in sub.params:
                if param.param_type_name == "option" and param.name != "help":
                    assert f"`{param.opts[0]}`" in page, f"{' '.join(p)} {param.opts[0]}"
            walk(sub, p)

    walk(root, ["paccp"])
    assert n > 40  # run, reproduce, compare, price ..., bill ..., datapath ..., testbed ...


def _keys(table: dict[str, Any], prefix: str = "") -> set[str]:
    out = set()
    for k, v in table.items():
        out.add(prefix + k)
        if isinstance(v, dict):
            out |= _keys(v, f"{prefix}{k}.")
        elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            for x in v:
                out |= _keys(x, f"{prefix}{k}[].")
    return out


def test_every_scenario_field_has_a_reference_entry() -> None:
    """Every field of the models, and every key the shipped scenario and comparison files use."""
    from paccp.compare.spec import CompareCfg
    from paccp.scenario.models import Scenario

    gen = _gen()
    scenario, compare = gen.scenario_page(), gen.compare_page()
    rows = set(re.findall(r"^\| `([^`]+)`", scenario + compare, flags=re.M))

    def walk(model: Any, prefix: str) -> None:  # the models, walked apart from the generator
        for name, info in model.model_fields.items():
            path = prefix + (info.alias or name)
            assert path in rows, f"no reference entry for {path}"
            for sub in gen._models_in(info.annotation):
                walk(sub, path + ("[]." if "list" in str(info.annotation).lower() else "."))

    walk(Scenario, "")
    walk(CompareCfg, "compare.")
    for f in sorted((REPO / "scenarios").glob("*.toml")):
        for key in _keys(tomllib.loads(f.read_text())):
            if key == "compare" or ".set." in key:  # the table itself; free-form overrides of a point
                continue
            base = re.sub(r"^compare\.quick\.set\..*", "compare.quick.set", key)
            assert base in rows, f"{f.name}: key {key} has no reference entry"


def test_every_page_is_in_the_nav() -> None:
    nav = (REPO / "mkdocs.yml").read_text()
    for page in sorted((REPO / "docs").rglob("*.md")):
        rel = page.relative_to(REPO / "docs").as_posix()
        if rel.startswith("results/") and rel != "results/index.md":
            continue  # linked from the results index (not_in_nav)
        assert rel in nav, f"docs/{rel} is not in mkdocs.yml's nav"


def _fixture(tmp: Path) -> Path:
    src = tmp / "repro"
    (src / "fig4a").mkdir(parents=True)
    (src / "fig4a" / "summary.json").write_text(
        json.dumps(
            {
                "experiment": "fig4a",
                "normalized_utility": 0.99,
                "classes": {
                    "BE": {"paper_bps": 1e9, "rate_bps": 1.1e9, "optimal_bps": 1.05e9},
                    "MRG": {"paper_bps": 4e9, "rate_bps": 2e9, "optimal_bps": 3.9e9},
                },
            }
        )
    )
    (src / "fig4a" / "details.json").write_text(json.dumps({"tolerance": 0.2}))
    (src / "fig4a" / "rate_BE.png").write_bytes(b"\x89PNG fake")
    (src / "fig4a" / "flows.parquet").write_bytes(b"not copied")
    (src / "softbw-share").mkdir()
    checks = [
        {"statement": "VM1 gets 450 Mb/s", "paper": "450", "ours": "449", "holds": True},
        {"statement": "a | pipe", "paper": 1, "ours": 2, "holds": None},
    ]
    (src / "softbw-share" / "summary.json").write_text(
        json.dumps({"title": "SoftBW share", "checks": checks})
    )
    record = {
        "command": "paccp reproduce all",
        "commit": "abc123",
        "started_utc": "2026-11-28T07:00:00+00:00",
        "finished_utc": "2026-11-28T07:40:00+00:00",
        "wall_s": 2400.0,
        "cpu_s": 4000.0,
        "workers": 2,
        "cpus": 2,
        "load_avg_start": [5.0, 4.0, 3.0],
        "load_avg_1min_max": 9.5,
        "jobs": {
            "fig4a": {"group": "paccp", "status": "done", "wall_s": 30.0, "cpu_s": 30.2},
            "softbw-share": {"group": "softbw", "status": "done"},
            "mptcp-clos": {"group": "mptcp", "status": "failed"},
        },
    }
    (src / "reproduce-all.json").write_text(json.dumps(record))
    return src


def test_results_pages_come_from_the_reproduction(tmp_path: Path) -> None:
    from paccp.errors import UserError
    from paccp.report.results_pages import write_pages

    src, out = _fixture(tmp_path), tmp_path / "site" / "results"
    pages = write_pages(src, out)
    assert {p.name for p in pages} == {"index.md", "fig4a.md", "softbw-share.md"}
    index = (out / "index.md").read_text()
    assert "`abc123`" in index and "40.0 min" in index and "5.0 / 9.5" in index
    assert "**Missing from this reproduction (1)**: mptcp-clos" in index
    assert "[fig4a](fig4a.md) | paccp | **differs** | 1 of 2 classes within 20%" in index
    assert "| 0.5 min | 30 s |" in index and "not recorded" in index
    assert "[softbw-share](softbw-share.md) | softbw | holds | all 1 checks hold, 1 not judged" in index
    fig = (out / "fig4a.md").read_text()
    assert "| MRG | 4 Gb/s | 2 Gb/s | 3.9 Gb/s | 0.50 | 0.51 | **no** |" in fig
    assert "![rate_BE.png](data/fig4a/rate_BE.png)" in fig
    assert "a \\| pipe" in (out / "softbw-share.md").read_text()
    # the data copy: JSON and PNGs, no Parquet; regenerating from it gives the same pages
    data = out / "data"
    assert (data / "fig4a" / "rate_BE.png").is_file() and not (data / "fig4a" / "flows.parquet").exists()
    before = {p.name: p.read_text() for p in out.glob("*.md")}
    write_pages(data, out)
    assert {p.name: p.read_text() for p in out.glob("*.md")} == before
    with pytest.raises(UserError, match=r"no reproduce-all\.json"):
        write_pages(tmp_path, out)


def test_results_pages_refuse_to_drop_the_pages_of_jobs_the_reproduction_lacks(tmp_path: Path) -> None:
    """Pages written from a full reproduction, then regenerated from a directory holding one job only:
    an error names the jobs whose pages would go, and nothing is written; with ``replace`` they go."""
    from paccp.errors import UserError
    from paccp.report.results_pages import write_pages

    src, out = _fixture(tmp_path), tmp_path / "site" / "results"
    write_pages(src, out)
    part = tmp_path / "part"
    part.mkdir()
    shutil.copytree(src / "softbw-share", part / "softbw-share")
    record = json.loads((src / "reproduce-all.json").read_text())
    record["jobs"] = {"softbw-share": record["jobs"]["softbw-share"]}
    (part / "reproduce-all.json").write_text(json.dumps(record))
    before = {p.name: p.read_text() for p in out.glob("*.md")}
    with pytest.raises(UserError, match=r"has no fig4a \(1 job\(s\) with pages in .*--replace"):
        write_pages(part, out)
    assert {p.name: p.read_text() for p in out.glob("*.md")} == before
    pages = write_pages(part, out, replace=True)
    assert {p.name for p in pages} == {"index.md", "softbw-share.md"}


def test_results_pages_cover_every_attempt_not_only_the_last_group_rerun(tmp_path: Path) -> None:
    """``paccp reproduce all`` then ``paccp reproduce softbw`` into the same directory: the pages keep
    fig4a (run by the first attempt only) and name both commands."""
    from paccp.report.results_pages import write_pages

    src, out = _fixture(tmp_path), tmp_path / "site" / "results"
    first = json.loads((src / "reproduce-all.json").read_text())
    second = {
        **first,
        "command": "paccp reproduce softbw",
        "commit": "def456",
        "jobs": {"softbw-share": {"group": "softbw", "status": "done", "wall_s": 6.0, "cpu_s": 5.0}},
        "earlier_attempts": [first],
    }
    (src / "reproduce-all.json").write_text(json.dumps(second))
    pages = write_pages(src, out)
    assert {p.name for p in pages} == {"index.md", "fig4a.md", "softbw-share.md"}
    index = (out / "index.md").read_text()
    assert "`paccp reproduce all`, then `paccp reproduce softbw`" in index
    assert "`abc123`, `def456`" in index
    assert "[fig4a](fig4a.md) | paccp |" in index and "| 0.5 min | 30 s |" in index
    assert "[softbw-share](softbw-share.md) | softbw | holds" in index and "| 0.1 min | 5 s |" in index
    assert "**Missing from this reproduction (1)**: mptcp-clos" in index


def test_a_comparison_rescored_from_its_cache_says_its_time_is_scoring_only(tmp_path: Path) -> None:
    """A job whose last attempt took every run from its cache (a rescoring) has its wall time marked as
    scores only; one that ran any of its runs has not."""
    from paccp.report.results_pages import write_pages

    src, out = _fixture(tmp_path), tmp_path / "site" / "results"
    record = json.loads((src / "reproduce-all.json").read_text())
    record["jobs"]["softbw-share"].update(wall_s=12.0, cpu_s=11.0)
    (src / "reproduce-all.json").write_text(json.dumps(record))
    summary = src / "softbw-share" / "summary.json"
    doc = json.loads(summary.read_text())
    for cached, marked in ((3, False), (4, True)):
        summary.write_text(json.dumps({**doc, "runs": 4, "runs_cached": cached}))
        write_pages(src, out)
        index = (out / "index.md").read_text()
        assert ("| 0.2 min (scores only: every run from its cache) | 11 s |" in index) is marked, index
        assert "| 0.2 min | 11 s |" in index or marked


def test_a_comparison_page_lists_its_checks_without_a_verdict(tmp_path: Path) -> None:
    """A comparison's checks (the statements about every scheme, and the file's bars for paccp-host)
    are a table on its page; the page has no verdict, since a statement about another scheme that does
    not hold is a finding, not a failed reproduction."""
    import shutil

    from paccp.report.results_pages import job_page

    d = tmp_path / "compare-overcommit"
    d.mkdir()
    shutil.copy(REPO / "docs" / "results" / "data" / "compare-overcommit" / "summary.json", d)
    checks = json.loads((d / "summary.json").read_text())["checks"]
    text, verdict, line = job_page("compare-overcommit", d, "data")
    assert verdict is None and line == "7 schemes, 2 points"
    assert "### Checks" in text and sum("(issue 25)" in c["paper"] for c in checks) >= 5
    for c in checks:
        assert c["statement"].replace("|", "\\|") in text
