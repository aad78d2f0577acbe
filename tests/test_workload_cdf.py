"""Flow-size CDFs: built-ins, means and malformed files."""

from pathlib import Path

import pytest

from paccp.errors import UserError
from paccp.traffic.workload import load_cdf, parse_cdf


@pytest.mark.parametrize(
    ("name", "mean"), [("websearch", 1_711_250), ("datamining", 12_658_199), ("fb_hadoop", 120_421)]
)
def test_builtin_means_match_provenance_table(name: str, mean: int) -> None:
    cdf = load_cdf(name)
    assert cdf.points[0][1] == 0.0 and cdf.points[-1][1] == 1.0
    assert cdf.mean_bytes == pytest.approx(mean, abs=1.0)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("", "at least two points"),
        ("0 0\n100 0.7\n50 1\n", "not monotone"),
        ("0 0\n100 0.5\n", "scale must end"),
        ("0 0\n100 x\n", "not numbers"),
        ("0 0 1\n", "expected"),
    ],
)
def test_malformed(text: str, needle: str) -> None:
    with pytest.raises(UserError, match=needle):
        parse_cdf(text, "bad")


def test_user_file(tmp_path: Path) -> None:
    f = tmp_path / "mine.cdf"
    f.write_text("# sizes\n0 0\n1000 50\n3000 100\n")
    assert load_cdf(f).mean_bytes == pytest.approx(500 * 0.5 + 2000 * 0.5)
    with pytest.raises(UserError, match="no such"):
        load_cdf(tmp_path / "missing.cdf")
