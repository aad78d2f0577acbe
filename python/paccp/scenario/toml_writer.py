"""Writing TOML (for generated paper scenarios)."""

from __future__ import annotations

from typing import Any


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k} = {_toml_value(x)}" for k, x in v.items() if x is not None) + "}"
    raise TypeError(f"cannot write {type(v).__name__} as TOML")


def to_toml(obj: dict[str, Any], header: str = "") -> str:
    """Write a scenario dict (tables of scalars, arrays of tables) as TOML text."""
    lines = [f"# {ln}" if ln else "#" for ln in header.splitlines()]
    for key, val in obj.items():
        if isinstance(val, dict):
            lines.append(f"\n[{key}]")
            lines += [f"{k} = {_toml_value(v)}" for k, v in val.items() if v is not None]
        elif isinstance(val, list) and val and all(isinstance(x, dict) for x in val):
            for item in val:
                lines.append(f"\n[[{key}]]")
                lines += [f"{k} = {_toml_value(v)}" for k, v in item.items() if v is not None]
        else:
            lines.insert(len(header.splitlines()), f"{key} = {_toml_value(val)}")
    return "\n".join(lines).lstrip("\n") + "\n"
