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
    assert "0.612" in html and "my-sweep" in html and "n_flows" in html
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
