"""Fixtures of the pricing tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from pricing_fixtures import BOOK, rec

from paccp.pricing.book import PriceBook, parse_book
from paccp.usage import UsageRecord


@pytest.fixture()
def book_text() -> str:
    """The test book's TOML."""
    return BOOK


@pytest.fixture()
def book() -> PriceBook:
    """The parsed test book."""
    return parse_book(BOOK)


@pytest.fixture()
def book_file(tmp_path: Path) -> Path:
    """The test book as a file."""
    p = tmp_path / "book.toml"
    p.write_text(BOOK)
    return p


@pytest.fixture()
def make_rec() -> Callable[..., UsageRecord]:
    """The :func:`rec` factory."""
    return rec
