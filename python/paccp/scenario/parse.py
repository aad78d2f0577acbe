"""Reading a scenario: TOML files and text to dicts, dicts to a validated :class:`Scenario`, with one-line
errors naming the file and the field.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from paccp.errors import UserError, validation_error
from paccp.scenario.checks import _semantic_checks
from paccp.scenario.models import Scenario


def _fmt_validation(exc: ValidationError) -> str:
    err = exc.errors()[0]
    tags = {"leaf_spine", "dumbbell", "explicit", "by_vm", "mix", "mptcp_bgwc", "elasticswitch", "paccp_host"}
    parts: list[str] = []
    loc = list(err.get("loc", ()))
    for i, p in enumerate(loc):
        if isinstance(p, str) and p in tags and i > 0 and i < len(loc) - 1:
            continue  # pydantic's discriminated-union tag, not a field
        if isinstance(p, int):
            parts[-1:] = [f"{parts[-1]}[{p}]" if parts else f"[{p}]"]
        else:
            parts.append(str(p))
    where = ".".join(parts) or "scenario"
    typ = err.get("type", "")
    if typ == "extra_forbidden":
        return f"{where}: unknown key"
    if typ == "missing":
        return f"{where}: missing required field"
    return f"{where}: {validation_error(exc)[1]}"


def parse_scenario(obj: dict[str, Any], where: str = "scenario") -> Scenario:
    """Validate a scenario dict (the TOML tables); raise UserError with one line naming the field."""
    try:
        sc = Scenario.model_validate(obj)
    except ValidationError as exc:
        raise UserError(f"{where}: {_fmt_validation(exc)}") from None
    try:
        _semantic_checks(sc)
    except UserError as exc:
        raise UserError(f"{where}: {exc.message}") from None
    return sc


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a TOML scenario file."""
    return parse_scenario(read_toml_file(path, "scenario file"), where=str(path))


def read_toml_file(path: str | Path, what: str = "file") -> dict[str, Any]:
    """Read a TOML file; one-line UserError naming the file (and line) when it is missing, unreadable,
    not UTF-8 or malformed."""
    p = Path(path)
    try:
        if not p.is_file():
            raise UserError(f"{p}: no such {what}")
        data = p.read_bytes()
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the name
        raise UserError(
            f"{str(p)[:200]!r}: cannot read it ({getattr(exc, 'strerror', None) or exc})"
        ) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise UserError(f"{p} line {line}: not UTF-8 text (byte {exc.start})") from None
    return parse_toml(text, str(p))


def parse_toml(text: str, where: str) -> dict[str, Any]:
    """TOML text to a dict; one-line UserError for malformed TOML (and numbers Python cannot hold)."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{where}: malformed TOML ({exc})") from None
    except ValueError as exc:  # e.g. an integer of more than 4300 digits
        raise UserError(f"{where}: malformed TOML ({str(exc)[:120]})") from None
    except RecursionError:
        raise UserError(f"{where}: malformed TOML (nested too deeply)") from None
