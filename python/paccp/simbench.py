"""Simulator benchmarks. Filled by the engine area."""

from __future__ import annotations

from paccp.errors import UserError


def run_cli(only: str = "", out: str = "") -> None:
    """Run the simulator benchmarks and print JSON."""
    raise UserError("simulator benchmarks are not built yet")
