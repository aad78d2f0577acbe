"""The generated reference pages of the documentation site (run by mkdocs-gen-files at every build).

- ``reference/cli.md``: every ``paccp`` command from its typer definition (usage, help, arguments, options);
- ``reference/scenario.md``: every field of a scenario TOML from the pydantic models (paccp.scenario);
- ``reference/compare.md``: every field of a comparison file's ``[compare]`` table (paccp.compare.spec).

Nothing here is typed by hand: a new command, option or field appears at the next ``make docs``, and
``tests/test_docs_site.py`` checks that every command and field has its entry. Run alone to print a page:
``python tools/gen_docs_reference.py cli``.
"""

from __future__ import annotations

import inspect
import sys
import types
import typing
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined


def _click_root() -> Any:
    import typer

    from paccp.cli import app

    return typer.main.get_command(app)


def commands(cmd: Any = None, path: tuple[str, ...] = ("paccp",)) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every command and group of the ``paccp`` command, depth first, sorted by name."""
    cmd = cmd if cmd is not None else _click_root()
    yield path, cmd
    for name in sorted(getattr(cmd, "commands", {}) or {}):
        sub = cmd.commands[name]
        if not getattr(sub, "hidden", False):
            yield from commands(sub, (*path, name))


def anchor(path: tuple[str, ...]) -> str:
    """The heading anchor of a command (``paccp-price-quote``)."""
    return "-".join(path)


def _arg_name(p: Any) -> str:
    return str(p.metavar or p.name).upper()


def _param_type(p: Any) -> str:
    desc = getattr(p, "type_descriptor", None)
    ann = getattr(desc, "annotation", None)
    if ann is None:
        ann = getattr(getattr(p, "type", None), "name", "text")
    text = _type_name(ann) if not isinstance(ann, str) else ann
    return text.replace("list of ", "")


def _param_row(p: Any) -> list[str]:
    names = ", ".join(f"`{o}`" for o in [*p.opts, *p.secondary_opts]) if p.param_type_name == "option" else ""
    if p.param_type_name == "argument":
        names = f"`{_arg_name(p)}`"
    kind = "flag" if getattr(p, "is_flag", False) else _param_type(p)
    if getattr(p, "multiple", False) or getattr(p, "nargs", 1) == -1:
        kind += " (repeatable)"
    default = p.default
    shown = "" if default is None or p.required or callable(default) else f"`{default!s}`"
    if isinstance(default, list | tuple):
        shown = "" if not default else f"`{','.join(map(str, default))}`"
    help_text = " ".join((getattr(p, "help", None) or "").split())
    return [names, kind, "yes" if p.required else "", shown, help_text.replace("|", "\\|")]


def cli_page() -> str:
    out = [
        "# Command reference\n",
        "Generated from the typer definitions of `paccp` (python/paccp/cli.py and the areas' command"
        " modules) at every build; `paccp COMMAND --help` prints the same.\n",
    ]
    for path, cmd in commands():
        if len(path) == 1:
            continue
        level = "#" * min(len(path), 4)
        out.append(f"{level} {' '.join(path)} {{#{anchor(path)}}}\n")
        doc = inspect.cleandoc(cmd.help or "").replace("\b\n", "")
        out.append((doc or "(no description)") + "\n")
        subs = sorted(getattr(cmd, "commands", {}) or {})
        params = [p for p in cmd.params if p.name not in ("help",) and not getattr(p, "hidden", False)]
        if subs:
            links = ", ".join(f"[`{s}`](#{anchor((*path, s))})" for s in subs)
            out.append(f"Sub-commands: {links}.\n")
            if not params:
                continue
        out.append(
            f"```\n{' '.join(path)} [OPTIONS]"
            + (" [COMMAND]" if subs else "")
            + "".join(f" {_arg_name(p)}" for p in params if p.param_type_name == "argument")
            + "\n```\n"
        )
        if params:
            out.append("| name | type | required | default | description |\n|---|---|---|---|---|")
            out += ["| " + " | ".join(_param_row(p)) + " |" for p in params]
            out.append("")
    return "\n".join(out) + "\n"


# --- schemas -------------------------------------------------------------------------------------


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation holds (through Optional, list, unions, Annotated)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found: list[type[BaseModel]] = []
    for arg in typing.get_args(annotation):
        found += _models_in(arg)
    return found


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        base, *meta = typing.get_args(annotation)
        for m in meta:  # the unit types of paccp.scenario.fields carry a parser with a telling name
            fn = getattr(getattr(m, "func", None), "__closure__", None)
            if fn:
                inner = getattr(fn[0].cell_contents, "__name__", "")
                if inner.startswith("parse_"):
                    return (
                        inner.removeprefix("parse_")
                        .removesuffix("_ns")
                        .removesuffix("_bps")
                        .removesuffix("_bytes")
                    )
        return _type_name(base)
    if origin is typing.Literal:
        return " \\| ".join(f"`{a!r}`".replace("'", '"') for a in typing.get_args(annotation))
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(annotation) if a is not type(None))
    if origin in (list, tuple):
        args = typing.get_args(annotation)
        return f"list of {_type_name(args[0])}" if args else "list"
    if origin is dict:
        return "table"
    if isinstance(annotation, type):
        if issubclass(annotation, BaseModel):
            return "table"
        return {"int": "integer", "float": "number", "str": "string", "bool": "boolean"}.get(
            annotation.__name__, annotation.__name__
        )
    return str(annotation).replace("typing.", "")


_UNITS = {"parse_duration_ns": "duration", "parse_rate_bps": "rate", "parse_size_bytes": "size"}


def _unit(info: FieldInfo) -> str | None:
    """``duration``, ``rate`` or ``size`` for the unit types of paccp.scenario.fields (their parser)."""
    for m in info.metadata:
        cells = getattr(getattr(m, "func", None), "__closure__", None) or ()
        for cell in cells:
            name = getattr(cell.cell_contents, "__name__", "")
            if name in _UNITS:
                return _UNITS[name]
    return None


def _human(v: Any, unit: str | None) -> str:
    if unit is None or isinstance(v, bool) or not isinstance(v, int):
        return repr(v)
    if unit == "rate":
        from paccp.units import format_rate

        return format_rate(v)
    scale = (
        [(1_000_000_000, "s"), (1_000_000, "ms"), (1_000, "us"), (1, "ns")]
        if unit == "duration"
        else [(1_000_000, "MB"), (1_000, "KB"), (1, "B")]
    )
    for div, name in scale:
        if v % div == 0 and v >= div:
            return f"{v // div}{name}"
    return f"{v}{scale[-1][1]}"


def _comments(model: type[BaseModel]) -> dict[str, str]:
    """The comment lines above a field (or at the end of its line) in the model's source: its description
    where the field has none."""
    try:
        lines = inspect.getsource(model).splitlines()
    except (OSError, TypeError):
        return {}
    out: dict[str, str] = {}
    pending: list[str] = []
    for line in lines[1:]:
        text = line.strip()
        if text.startswith("#"):
            pending.append(text.lstrip("# "))
            continue
        head = text.split(":", 1)[0]
        if ":" in text and head.isidentifier() and not text.startswith(("def ", "class ", "return")):
            tail = text.split("  # ", 1)[1] if "  # " in text else ""
            desc = " ".join([*pending, tail]).strip()
            if desc:
                out[head] = desc
        pending = []
    return out


def _constraints(info: FieldInfo) -> str:
    parts = []
    for m in info.metadata:
        for attr, sym in (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<="), ("min_length", "len >="),
                          ("max_length", "len <=")):  # fmt: skip
            v = getattr(m, attr, None)
            if v is not None:
                parts.append(f"{sym} {v}")
    return ", ".join(parts)


def _default(info: FieldInfo, unit: str | None = None) -> str:
    if info.is_required():
        return "required"
    if info.default_factory is not None:
        try:
            v = info.default_factory()  # type: ignore[call-arg]
        except TypeError:
            return ""
    else:
        v = info.default
    if v is PydanticUndefined or isinstance(v, BaseModel):
        return ""
    return "" if v is None else f"`{_human(v, unit)}`"


def fields(model: type[BaseModel], prefix: str = "") -> Iterator[tuple[str, FieldInfo, type[BaseModel]]]:
    """(dotted TOML path, field, owning model) of every field, depth first; lists of tables get ``[]``."""
    for name, info in model.model_fields.items():
        key = info.alias or name
        path = f"{prefix}{key}"
        yield path, info, model
        for sub in _models_in(info.annotation):
            is_list = typing.get_origin(info.annotation) is list or "list" in _type_name(info.annotation)
            yield from fields(sub, f"{path}[]." if is_list else f"{path}.")


def schema_page(title: str, intro: str, root: type[BaseModel], prefix: str = "") -> str:
    out = [f"# {title}\n", intro + "\n"]
    out.append("| field | type | default | bounds | description |\n|---|---|---|---|---|")
    seen: set[str] = set()
    for path, info, owner in fields(root, prefix):
        variant = ""
        kind = owner.model_fields.get("kind")
        if kind is not None and len(typing.get_args(kind.annotation)) == 1:  # one variant of a union
            variant = f"(kind = {typing.get_args(kind.annotation)[0]}) "
        key = variant + path
        if key in seen:
            continue
        seen.add(key)
        name = path.rsplit(".", 1)[-1].removesuffix("[]")
        desc = (
            info.description or _comments(owner).get(name, "") or (owner.__doc__ or "" if name == "" else "")
        )
        desc = " ".join(desc.split()).replace("|", "\\|")
        unit = _unit(info)
        models = _models_in(info.annotation)
        kind_of = [m.model_fields["kind"] for m in models if "kind" in m.model_fields]
        if len(models) > 1 and kind_of:
            tname = "table, `kind` one of " + ", ".join(
                f"`{typing.get_args(k.annotation)[0]}`" for k in kind_of
            )
        else:
            tname = unit or _type_name(info.annotation)
        if not desc and len(models) == 1:
            desc = " ".join((models[0].__doc__ or "").split()).replace("|", "\\|")
        out.append(
            f"| `{path}` {variant}| {tname} | {_default(info, unit)} | {_constraints(info)} | {desc} |"
        )
    return "\n".join(out) + "\n"


def scenario_page() -> str:
    from paccp.scenario.models import Scenario

    return schema_page(
        "Scenario file reference",
        "Every key of a scenario TOML (`paccp run FILE`), generated from the pydantic models of"
        " `paccp.scenario` at every build. Rates take units (`10Gbit`), durations (`200us`), sizes (`1.5MB`)."
        " A table that is a union (`topology`, `scheme`) lists each variant's keys with its `kind`. A wrong"
        " key or value is one line on stderr and exit code 2.",
        Scenario,
    )


def compare_page() -> str:
    from paccp.compare.spec import CompareCfg

    return schema_page(
        "Comparison file reference",
        "The `[compare]` table of a comparison file (`paccp compare FILE`), generated from"
        " `paccp.compare.spec.CompareCfg` at every build; the rest of the file is a scenario"
        " ([Scenario file reference](scenario.md)) without `[[vms]]`, `[[flows]]`, `[cc]`, `[scheme]`"
        " or `[softbw]`.",
        CompareCfg,
        "compare.",
    )


PAGES = {"cli": cli_page, "scenario": scenario_page, "compare": compare_page}


def _write_with_gen_files() -> None:
    import mkdocs_gen_files

    for name, fn in PAGES.items():
        with mkdocs_gen_files.open(f"reference/{name}.md", "w") as fh:
            fh.write(fn())


if __name__ == "__main__":
    print(PAGES[sys.argv[1]]())
elif __name__ == "<run_path>":  # run by mkdocs-gen-files during the build
    _write_with_gen_files()
