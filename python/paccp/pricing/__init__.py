"""Pricing and billing: price books, quotes, usage ingestion, the ledger, invoices.

The Python API mirrors the commands: :func:`quote` (what a purchase costs), :func:`buy` (what a budget buys),
:func:`load_book`, :class:`Ledger`, :func:`build_invoice`, :func:`consistency` and :func:`calibrate`.
Rules and derivations: ``docs/pricing.md``.
"""

from paccp.pricing.book import PriceBook, load_book, parse_book
from paccp.pricing.charging import Invoice, build_invoice
from paccp.pricing.consistency import calibrate, consistency
from paccp.pricing.ledger import Ledger
from paccp.pricing.quote import Purchase, Quote, buy, quote

__all__ = [
    "Invoice",
    "Ledger",
    "PriceBook",
    "Purchase",
    "Quote",
    "build_invoice",
    "buy",
    "calibrate",
    "consistency",
    "load_book",
    "parse_book",
    "quote",
]
