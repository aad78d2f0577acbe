"""Parsing of human-friendly quantities."""

import pytest

from paccp.errors import UserError
from paccp.units import parse_duration_ns, parse_rate_bps, parse_size_bytes


@pytest.mark.parametrize(
    ("text", "bps"),
    [
        ("10Gbit", 10**10),
        ("400Mbit", 4 * 10**8),
        ("1.25GB/s", 10**10),
        ("2.5Gbps", 25 * 10**8),
        (7e9, 7 * 10**9),
    ],
)
def test_rates(text: str, bps: int) -> None:
    assert parse_rate_bps(text) == bps


def test_durations_and_sizes() -> None:
    assert parse_duration_ns("20us") == 20_000
    assert parse_duration_ns("200ms") == 200_000_000
    assert parse_duration_ns("1h") == 3_600_000_000_000
    assert parse_duration_ns(0.5) == 500_000_000
    assert parse_size_bytes("1.5MB") == 1_500_000
    assert parse_size_bytes("64KiB") == 65_536
    assert parse_size_bytes("100pkt") == 150_000


@pytest.mark.parametrize("bad", ["abc", "-5Gbit", "5Gbtt", "", "1e"])
def test_bad_rates_name_the_text(bad: str) -> None:
    with pytest.raises(UserError) as err:
        parse_rate_bps(bad)
    assert repr(bad) in str(err.value) or "negative" in str(err.value)
