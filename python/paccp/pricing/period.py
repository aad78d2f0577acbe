"""The billing period: one UTC calendar month, written ``YYYY-MM``.

One parser (:meth:`Period.parse`) for every command (``bill invoice --period``) and for the ledger
(:meth:`paccp.pricing.ledger.Ledger.issue`): four and two ASCII digits around a hyphen, nothing else (no
whitespace, no newline, no full-width or other Unicode digits, which ``int()`` would accept), a month 01-12
and a year 1970-2261 (usage times are int64 ns since 1970). Its text form is canonical, so a month has one
spelling in the ledger; the ledger's database also refuses any other spelling (trigger
``invoice_period_check``, migration 0002), so the same month cannot be issued twice as two "months".
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass

from paccp.errors import UserError

_PERIOD = re.compile(r"[0-9]{4}-[0-9]{2}")  # [0-9]: ASCII only (\d would take any Unicode digit)
MIN_YEAR, MAX_YEAR = 1970, 2261


@dataclass(frozen=True, order=True)
class Period:
    year: int
    month: int

    @classmethod
    def parse(cls, text: object, what: str = "period") -> Period:
        """``YYYY-MM`` (strict) -> Period; anything else is a one-line UserError naming ``what``."""
        if isinstance(text, Period):
            return text
        shown = repr(text)[:40]
        if not isinstance(text, str) or not _PERIOD.fullmatch(text):
            raise UserError(f"{what} {shown}: expected YYYY-MM in ASCII digits without spaces (e.g. 2026-11)")
        y, mo = int(text[:4]), int(text[5:])
        if not 1 <= mo <= 12:
            raise UserError(f"{what} {shown}: the month must be 01 to 12")
        if not MIN_YEAR <= y <= MAX_YEAR:
            raise UserError(f"{what} {shown}: the year must be between {MIN_YEAR} and {MAX_YEAR}")
        return cls(y, mo)

    def __str__(self) -> str:
        return f"{self.year:04d}-{self.month:02d}"

    def bounds_ns(self) -> tuple[int, int]:
        """[start_ns, end_ns) of the month (UTC)."""
        start_ns = calendar.timegm((self.year, self.month, 1, 0, 0, 0)) * 10**9
        return start_ns, start_ns + calendar.monthrange(self.year, self.month)[1] * 86_400 * 10**9
