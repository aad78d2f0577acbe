"""``paccp datapath``, ``paccp testbed`` and ``paccp bench datapath``. Filled by the datapath area."""

from __future__ import annotations

import typer


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    """Add ``datapath`` and ``testbed`` to the root app and ``datapath`` to ``bench``."""
