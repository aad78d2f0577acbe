"""Quotes and budgets against prices computed by hand from the SPEC section 4 formulas (exact decimals)."""

from __future__ import annotations

from decimal import Decimal

import pytest
from pricing_fixtures import BOOK, H

from paccp.errors import UserError
from paccp.pricing.book import PriceBook, parse_book
from paccp.pricing.quote import buy, quote

G = 1_000_000_000

# (model, cos, theta_bps, omega, exact price per hour) — computed by hand with p0=0.10 p1=0.06 p2=0.04,
# p0s=0.02 p1s=0.012 p2s=0.04/Gb/s-h.
PAIR_CASES = [
    ("vbp", "be", 0, "1", "0.10"),  # P0
    ("vbp", "ds", 0, "2", "0.16"),  # 0.10 + 0.06*1
    ("vbp", "ds", 0, "3.5", "0.25"),  # 0.10 + 0.06*2.5
    ("vbp", "mrg", 5 * G, "2", "0.36"),  # 0.10 + 0.06 + 0.04*5
    ("vbp", "mrg", 2_500_000_000, "1", "0.20"),  # 0.10 + 0 + 0.04*2.5
    ("vbp", "mrg", 400_000_000, "2", "0.176"),  # 0.10 + 0.06 + 0.04*0.4
    ("fbp", "be", 0, "1", "0"),  # included in the VM price
    ("fbp", "ds", 0, "2", "0.032"),  # 0.02 + 0.012
    ("fbp", "mrg", 2_500_000_000, "2", "0.132"),  # 0.02 + 0.012 + 0.04*2.5
]


@pytest.mark.parametrize(("model", "cos", "theta", "omega", "per_hour"), PAIR_CASES)
def test_pair_prices_exact(
    book: PriceBook, model: str, cos: str, theta: int, omega: str, per_hour: str
) -> None:
    q = quote(model, cos, theta, Decimal(omega), H, book)
    assert q.per_hour == Decimal(per_hour)
    assert q.total == sum(c.amount for c in q.components)
    assert all(isinstance(c.amount, Decimal) and c.amount.as_tuple().exponent == -2 for c in q.components)


def test_half_hour_rounds_each_component(book: PriceBook) -> None:
    q = quote("vbp", "mrg", 400_000_000, Decimal(2), H // 2, book)
    # 0.05 + 0.03 + 0.008 -> 0.05 + 0.03 + 0.01
    assert [c.amount for c in q.components] == [Decimal("0.05"), Decimal("0.03"), Decimal("0.01")]
    assert q.total == Decimal("0.09")


@pytest.mark.parametrize(("mode", "total"), [("half_even", "0.12"), ("half_up", "0.13"), ("down", "0.12")])
def test_rounding_mode_from_book(mode: str, total: str) -> None:
    bk = parse_book(BOOK.replace('p0 = "0.10"', 'p0 = "0.125"').replace('"half_even"', f'"{mode}"'))
    assert quote("vbp", "be", 0, 1, H, bk).total == Decimal(total)


def test_fbp_p2s_per_gb() -> None:
    bk = parse_book(
        BOOK.replace('p2s = "0.04"', 'p2s = "0.0001"').replace(
            '"per_gbps_hour"\n[softbw]', '"per_gb"\n[softbw]'
        )
    )
    assert bk.fbp is not None and bk.fbp.p2s_unit == "per_gb"
    # 0.02 + 0.012 + 0.0001 $/GB * 450 GB per Gb/s-hour * 2.5 Gb/s
    assert quote("fbp", "mrg", 2_500_000_000, 2, H, bk).per_hour == Decimal("0.1445")


# SoftBW: p0 = 0.05, beta = 0.6 (P1 = 0.03), C = 10 Gb/s.
@pytest.mark.parametrize(
    ("kw", "per_hour"),
    [
        ({"cos": "mrg", "theta_bps": 2 * G}, "0.12"),  # r = B = 2: 2 (1 + 2/10) 0.05
        ({"cos": "mrg", "theta_bps": 2 * G, "rate_bps": 3 * G}, "0.123"),  # + (3-2)(1/10) 0.03
        ({"cos": "ds", "guarantee": "fair", "rate_bps": 5 * G}, "0.075"),  # 5 (5/10) 0.03
        # S = 10 GB = 80 Gb by T = 40 s: S/T = 2 Gb/s, r = 2: 2 (1 + 2/10) 0.03
        ({"cos": "mrg", "guarantee": "dynamic", "size_bytes": 10 * G, "deadline_ns": 40 * G}, "0.072"),
        ({"cos": "be"}, "0"),
    ],
)
def test_softbw_prices_exact(book: PriceBook, kw: dict[str, object], per_hour: str) -> None:
    cos = str(kw.pop("cos"))
    theta = int(kw.pop("theta_bps", 0))  # type: ignore[call-overload]
    q = quote("softbw", cos, theta, 1, H, book, **kw)  # type: ignore[arg-type]
    assert q.per_hour == Decimal(per_hour)


def test_softbw_price_non_decreasing_in_guarantee(book: PriceBook) -> None:
    prices = [quote("softbw", "mrg", b * 100_000_000, 1, H, book, rate_bps=G).per_hour for b in range(1, 99)]
    assert prices == sorted(prices)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("vbp", "gold", 0, 1), "unknown cos"),
        (("vbp", "ds", 0, 1), "omega > 1"),
        (("vbp", "mrg", 0, 2), "theta > 0"),
        (("vbp", "be", G, 1), "(0, 1)"),
        (("nope", "be", 0, 1), "unknown pricing model"),
    ],
)
def test_bad_quotes(book: PriceBook, args: tuple[str, str, int, int], needle: str) -> None:
    with pytest.raises(UserError, match=None) as err:
        quote(*args, duration_ns=H, book=book)
    assert needle in str(err.value)


def test_buy_ds_maximises_omega(book: PriceBook) -> None:
    (p,) = buy("vbp", "1.00", H, "ds", book)
    # (1.00 - 0.10) / 0.06 = 15 extra units of omega
    assert p.quote.omega == Decimal(16) and p.quote.total == Decimal("1.00") and p.leftover == 0


def test_buy_mrg_theta_then_omega(book: PriceBook) -> None:
    (p,) = buy("vbp", "1.00", H, "mrg", book)
    # 0.90 / 0.04 would be 22.5 Gb/s: capped at the default max_theta 10 Gb/s (a host's link), and the
    # rest, 0.90 - 0.40 = 0.50, buys 8.33.. units of omega, floored to the 0.1 grid
    assert p.quote.theta_bps == 10 * G and p.quote.omega == Decimal("9.3")
    (p,) = buy("vbp", "1.00", H, "mrg", book, theta_bps=5 * G)
    # spare 1.00 - 0.10 - 0.20 = 0.70 -> 11.66.. units of omega, floored to the 0.1 grid
    assert p.quote.theta_bps == 5 * G and p.quote.omega == Decimal("12.6")
    assert p.quote.total <= Decimal("1.00")
    assert quote("vbp", "mrg", 5 * G, Decimal("12.7"), H, book).per_hour > Decimal("1.00")


def test_buy_all_cos_within_budget(book: PriceBook) -> None:
    for model in ("vbp", "fbp", "softbw"):
        got = buy(model, "0.50", 2 * H, None, book)
        assert got and all(p.quote.total <= Decimal("0.50") for p in got)


def test_buy_softbw_strict_closed_form(book: PriceBook) -> None:
    # B^2/C + B = b/P0 = 0.12/0.05 = 2.4 -> B = 2 Gb/s
    (p,) = buy("softbw", "0.12", H, "mrg", book)
    assert p.quote.theta_bps == 2 * G and p.quote.total == Decimal("0.12")


def test_buy_too_small_budget(book: PriceBook) -> None:
    with pytest.raises(UserError, match="buys no ds"):
        buy("vbp", "0.05", H, "ds", book)


def test_buy_caps_mrg_theta_at_a_hosts_link() -> None:
    """price buy --budget 1.00 offered MRG theta 112 Gb/s, more than any link; the rest goes to omega."""
    from paccp.pricing.book import load_book

    bk, _ = load_book(None)  # the default book: max_theta 10 Gb/s
    (mrg,) = buy("vbp", "1.00", 3_600_000_000_000, "mrg", bk)
    assert mrg.quote.theta_bps == 10_000_000_000 and mrg.quote.omega > 10 and mrg.quote.total <= 1
    capped = bk.model_copy(update={"buy": bk.buy.model_copy(update={"max_theta": "2500Mbit"})})
    (mrg2,) = buy("vbp", "1.00", 3_600_000_000_000, "mrg", capped)
    assert mrg2.quote.theta_bps == 2_500_000_000 and mrg2.quote.omega > mrg.quote.omega
