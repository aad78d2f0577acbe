"""Workload-area commands: ``sweep`` and ``report``. Filled by the workload area."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add ``sweep`` and ``report`` to the root app."""
