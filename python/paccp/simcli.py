"""Simulator commands: ``run``, ``reproduce``, ``optimum``."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add the simulator commands to the root app."""
