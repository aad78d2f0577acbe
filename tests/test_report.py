"""``paccp report``: self-contained HTML from summary.json files and PNGs."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from paccp.errors import UserError
from paccp.report.html import write_report

# a 1x1 PNG
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


def _write(d: Path, summary: object) -> None:
    d.mkdir(parents=True, exist_ok=True)
    (d / "summary.json").write_text(json.dumps(summary))


def test_report_embeds_images_and_tables(tmp_path: Path) -> None:
    _write(
        tmp_path / "fig8",
        {
            "kind": "experiment",
            "title": "VBP <WebSearch>",
            "load_definition": "load = offered / capacity",
            "checks": [{"statement": "MRG beats BE", "paper": "yes", "ours": "0.7", "holds": False}],
            "loads": [
                {
                    "workload": "websearch",
                    "load": 0.8,
                    "cos": {
                        "ds": {
                            "flows": 10,
                            "unfinished": 1,
                            "fct_norm_to_be": {"overall": 0.61234},
                            "deadline_meet_rate": {"overall": 0.9},
                        }
                    },
                }
            ],
        },
    )
    (tmp_path / "fig8" / "fct_norm.png").write_bytes(PNG)
    _write(
        tmp_path / "sw",
        {
            "kind": "sweep",
            "name": "my-sweep",
            "points": [
                {
                    "params": {"load": 0.3, "seed": 1},
                    "stats": {"by_cos": {"all": {"overall": {"flows": 5, "unfinished": 0}}}},
                    "fct_norm_to_be": {"ds": {"overall": 0.5}},
                    "deadline_meet_rate": None,
                    "key": "abc",
                }
            ],
        },
    )
    _write(tmp_path / "run1", {"n_flows": 3, "classes": {"BE": {"flows": 3}}})
    _write(tmp_path / "sw" / "cache", {"ignored": True})
    out, skipped = write_report(tmp_path)
    assert skipped == []
    html = out.read_text()
    assert "data:image/png;base64," + base64.b64encode(PNG).decode() in html
    assert "VBP &lt;WebSearch&gt;" in html  # escaped
    assert "0.612" in html and "my-sweep" in html and "3 flows" in html
    assert 'class="no"' in html  # the failed check is marked
    assert "ignored" not in html  # cache files are not runs
    assert 'src="http' not in html and "<link" not in html  # self-contained


def test_report_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no such directory"):
        write_report(tmp_path / "nope")
    with pytest.raises(UserError, match=r"no summary\.json"):
        write_report(tmp_path)
    _write(tmp_path / "x", {})
    (tmp_path / "x" / "summary.json").write_text("{broken")
    _write(tmp_path / "y", {"n_flows": 1})
    out, skipped = write_report(tmp_path)
    assert [p.parent.name for p, _ in skipped] == ["x"]  # skipped and listed, the others still shown
    html = out.read_text()
    assert "Skipped" in html and "not valid JSON" in html and "n_flows" in html


# --------------------------------------------------------------------------------------------------
# what a reader sees (issue 29): tables and verdicts first, captions that say what to look for, no JSON


def _cells(html: str) -> list[str]:
    import re

    return [re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td>(.*?)</td>", html, flags=re.S)]


def _no_raw_json(html: str) -> None:
    import re

    bad = [c for c in _cells(html) if re.match(r'\s*[\[{]\s*["{\[]', c)]
    assert not bad, bad[:3]


def _captions(html: str) -> list[str]:
    import re

    return re.findall(r"<figcaption>(.*?)</figcaption>", html, flags=re.S)


def test_experiment_opens_with_its_table_and_verdict_then_captioned_plots(tmp_path: Path) -> None:
    exp = {
        "experiment": "fig4a",
        "seed": 1,
        "duration_s": 0.2,
        "normalized_utility": 0.98,
        "classes": {
            "BE": {"paper_bps": 3.72e9, "rate_bps": 3.75e9, "optimal_bps": 4e9},
            "MRG": {"paper_bps": 4.09e9, "rate_bps": 3.2e9, "optimal_bps": 4e9, "theta_bps": 2e9,
                    "time_below_theta": 0.0},
        },
    }  # fmt: skip
    _write(tmp_path / "fig4a", exp)
    (tmp_path / "fig4a" / "rate_MRG.png").write_bytes(PNG)
    _write(
        tmp_path / "fig4a" / "run",
        {"n_flows": 240, "n_finished": 0, "duration_ns": 200_000_000, "warmup_ns": 50_000_000,
         "classes": {"BE": {"flows": 120, "finished": 0, "mean_rate_bps": 3.8e9, "mean_fct_ns": None}},
         "engine": {"events": 5, "nested": {"a": [1, 2]}}},
    )  # fmt: skip
    _write(
        tmp_path / "mptcp-bg",
        {"experiment": "mptcp-bg", "measured_mbps": {"tcp": {"vm1": {"bg": 340.7}}}, "checks": [
            {"statement": "[tcp] vm1: BG within 5%", "paper": 350, "ours": "340.7", "holds": True},
            {"statement": "[udp] spare taken", "paper": [30, 40], "ours": "96.6", "holds": False},
        ]},
    )  # fmt: skip
    (tmp_path / "mptcp-bg" / "tcp").mkdir()
    (tmp_path / "mptcp-bg" / "tcp" / "rate_wc.png").write_bytes(PNG)
    html = write_report(tmp_path)[0].read_text()
    # experiments before runs, even the run inside an experiment's directory
    assert html.index("<h2 id='s0'>fig4a") < html.index("mptcp-bg</h2>") < html.index("run: fig4a/run")
    # the paper / ours / optimum table with units and a verdict line
    assert "ours / paper" in html and "3.72 Gb/s" in html and "4 Gb/s" in html
    assert "1 of 2 classes within 10% of the paper" in html
    assert "1 of 2 checks fail: [udp] spare taken" in html and "[tcp] vm1: BG within 5%" in html
    assert "30, 40" in html  # a list as text, not JSON
    # the run: per-class rates with units; its engine counters folded away as tables, not JSON
    assert "3.8 Gb/s" in html and "240 flows, 0 finished" in html and "no FCT" in html
    _no_raw_json(html)
    # every plot captioned with what it shows, none with its file name; PNGs in subdirectories shown
    caps = _captions(html)
    assert len(caps) == 2 and not any(c.strip().endswith(".png") for c in caps)
    assert any("dotted red: theta" in c and "Look for" in c for c in caps)
    assert any(c.startswith("tcp: Per-VM delivered rate") and "WC subflows" in c for c in caps)


def _compare_doc(finite: bool) -> dict[str, object]:
    def v(x: float | None) -> dict[str, object]:
        return {"mean": x, "ci95": None, "n": 1}

    n, ms = (3, 1.0) if finite else (0, None)
    fct = {
        g: {"flows": n, "mean_ms": v(ms), "p99_ms": v(ms), "unfinished": 0}
        for g in ("all", "small", "medium", "big")
    }
    cls = {"fail_share": v(0.0), "fail_share_feasible": v(0.0), "spare_vs_target": v(1.1),
           "got_bps": v(2e9), "paid_per_hour": v(0.2), "consistency": v(1.0), "fct": fct}  # fmt: skip
    res = {
        s: {"classes": {"BE": cls, "MRG": cls}, "utilisation": v(0.5 + k / 10)}
        for k, s in enumerate(("a", "b"))
    }
    return {
        "kind": "compare", "title": "cmp", "scenario_file": "x.toml", "seeds": [1], "quick": True,
        "currency": "USD", "schemes": ["a", "b"], "points": ["80%"], "results": {"80%": res},
        "purchases": [{"name": "BE", "guarantee": 0}, {"name": "MRG", "guarantee": 10**9}],
        "checks": [{"statement": "80%: a fails class MRG's guarantee less often", "paper": "p", "ours": "o",
                    "holds": True}],
        "not_run": {}, "gaming": None, "bottlenecks": "fabric",
    }  # fmt: skip


def test_comparison_is_ordered_by_question_with_verdicts_and_no_empty_plots(tmp_path: Path) -> None:
    _write(tmp_path / "c", _compare_doc(finite=False))
    for name in ("guarantee.png", "utilisation.png", "fct.png", "paid.png", "spare.png"):
        (tmp_path / "c" / name).write_bytes(PNG)
    html = write_report(tmp_path)[0].read_text()
    order = ["Guarantees:", "Weights:", "Utilisation:", "Flow completion times", "Price:", "Gaming:"]
    at = [html.index(h) for h in order]
    assert at == sorted(at)
    assert "highest: b (60%); lowest: a (50%)" in html
    assert "no flow finished in this comparison" in html
    caps = _captions(html)
    assert not any("completion time" in c for c in caps)  # fct.png not shown: no finite flows
    assert len(caps) == 4 and all("Look for" in c or "paid" in c for c in caps)
    # each plot under its question
    assert html.index("Guarantees:") < html.index("Guarantees: share of measurement windows")
    assert html.index("Price:") < html.index("Price: what each class paid")
    _no_raw_json(html)


def test_compare_does_not_draw_a_plot_without_data(tmp_path: Path) -> None:
    from paccp.compare.plots import plot_all

    doc = _compare_doc(finite=False)
    plot_all(doc, tmp_path)  # type: ignore[arg-type]
    assert not (tmp_path / "fct.png").exists() and (tmp_path / "utilisation.png").exists()


def test_the_comparison_file_is_named_relative_to_the_checkout_not_by_the_machines_path() -> None:
    from paccp.report.tables import markdown, scenario_label

    repo = Path(__file__).resolve().parents[1]
    inside = str(repo / "scenarios" / "compare-overcommit.toml")
    assert scenario_label(inside) == "scenarios/compare-overcommit.toml"
    assert scenario_label("/elsewhere/x.toml") == "/elsewhere/x.toml"  # outside the checkout: as given
    assert scenario_label("") == ""
    doc = _compare_doc(finite=True) | {"scenario_file": inside}
    page = markdown(doc)
    assert "Scenario `scenarios/compare-overcommit.toml`" in page and str(repo) not in page


def test_failures_show_the_windows_feasible_at_every_link_when_the_comparison_has_them() -> None:
    from paccp.report.tables import _question, markdown

    old = markdown(_compare_doc(finite=True))  # scored before the figure existed: the NIC rule alone
    assert "| fail MRG % (feasible) |" in old and "| 0.0 (0.0) |" in old and "NIC; every link" not in old
    doc = _compare_doc(finite=True)
    res = doc["results"]["80%"]  # type: ignore[index]
    for r in res.values():
        r["classes"]["MRG"] = r["classes"]["MRG"] | {
            "fail_share": {"mean": 0.12, "ci95": None, "n": 1},
            "fail_share_feasible": {"mean": 0.1, "ci95": None, "n": 1},
            "fail_share_fabric": {"mean": 0.04, "ci95": None, "n": 1},
        }
    page = markdown(doc)
    assert "fail MRG % (feasible: NIC; every link)" in page and "12.0 (10.0; 4.0)" in page
    # the verdict reads the windows feasible at every link: 4 % of them failed, so no scheme is clean
    text, rows, ok = _question(doc, "guarantees", "80%")
    assert (text, ok) == ("no guarantee failure where the guarantee was feasible: no scheme", "no")
    assert rows[0][1] == "MRG: windows failed % (feasible: NIC; every link)"
    for r in res.values():
        r["classes"]["MRG"]["fail_share_fabric"] = {"mean": 0.0, "ci95": None, "n": 1}
    assert _question(doc, "guarantees", "80%")[2] == "yes"
