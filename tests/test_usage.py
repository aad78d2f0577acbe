"""The shared usage-record schema: validation and round trips."""

from decimal import Decimal
from pathlib import Path

import pytest

from paccp.common.usage import UsageRecord, parse_record, read_usage, write_usage
from paccp.errors import UserError


def _rec(**kw: object) -> dict[str, object]:
    base: dict[str, object] = {
        "record_id": "sim:r1:f1:0",
        "source": "sim",
        "tenant": "acme",
        "vm": "vm1",
        "flow_id": "f1",
        "cos": "mrg",
        "theta_bps": 400_000_000,
        "omega": "2",
        "start_ns": 10,
        "end_ns": 20,
        "bytes": 1000,
    }
    base.update(kw)
    return base


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_round_trip(tmp_path: Path, suffix: str) -> None:
    recs = [parse_record(_rec()), parse_record(_rec(record_id="x", omega="0.5", cos="ds", theta_bps=0))]
    path = tmp_path / f"u{suffix}"
    assert write_usage(recs, path) == 2
    back = list(read_usage(path))
    assert back == recs
    assert back[1].omega == Decimal("0.5")


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"cos": "gold"}, "cos"),
        ({"bytes": -1}, "bytes"),
        ({"end_ns": 5}, "before start_ns"),
        ({"omega": "0"}, "omega"),
        ({"cos": "be"}, "theta_bps = 0"),
        ({"extra": 1}, "extra"),
        ({"deadline_met": True}, "deadline_ns"),
    ],
)
def test_rejects_bad_records(change: dict[str, object], needle: str) -> None:
    with pytest.raises(UserError) as err:
        parse_record(_rec(**change), "usage.jsonl line 3")
    assert "usage.jsonl line 3" in str(err.value)
    assert needle in str(err.value)


def test_bad_json_line_named(tmp_path: Path) -> None:
    path = tmp_path / "u.jsonl"
    path.write_text(UsageRecord.model_validate(_rec()).to_json_line() + "\n{not json\n")
    with pytest.raises(UserError, match=r"line 2: not valid JSON"):
        list(read_usage(path))
