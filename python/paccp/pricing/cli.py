"""``paccp price`` and ``paccp bill``. Filled by the pricing area."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add ``price`` and ``bill`` to the root app."""
