"""Type stub of the Rust extension module ``paccp._engine`` (crates/paccp-py)."""

from collections.abc import Callable

VERSION: str
SOURCE_HASH: str
MEMORY_SIZES_KIB: list[int]

def run_json(scenario_json: str, progress: Callable[[int, int], None] | None = None) -> str:
    """Runs one scenario (docs/engine-contract.md); engine errors raise ValueError."""

def memory_latency_ns(bytes: int, loads: int) -> float:
    """Mean ns of a dependent load over a random cycle through ``bytes`` of memory (a machine probe)."""

def check_transport_json(doc_json: str) -> None:
    """The engine's checks of a scenario's packet and transport sections; ValueError naming the field."""

def contract_json() -> str:
    """The engine contract: JSON Schema of a scenario and of every built-in scheme's parameters."""
