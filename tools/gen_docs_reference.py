"""The generated reference pages of the documentation site (run by mkdocs-gen-files at every build).

- ``reference/cli.md``: every ``paccp`` command from its typer definition (usage, help, arguments, options);
- ``reference/scenario.md``: every field of a scenario TOML from the pydantic models (paccp.scenario);
- ``reference/compare.md``: every field of a comparison file's ``[compare]`` table (paccp.compare.spec);
- ``reference/engine.md``: every key of the engine's JSON input and of each built-in scheme's parameters,
  from the JSON Schema the engine derives from its own input types (``paccp._engine.contract_json``).

Nothing here is typed by hand: a new command, option or field appears at the next ``make docs``, and
``tests/test_docs_site.py`` checks that every command and field has its entry. Run alone to print a page:
``python tools/gen_docs_reference.py cli``.
"""

from __future__ import annotations

import inspect
import json
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


# --- the engine contract ------------------------------------------------------------------------

_FORMATS = {"uint64": "u64", "uint32": "u32", "uint16": "u16", "uint8": "u8", "double": "f64"}


def _slug(*parts: str) -> str:
    return "-".join(p.lower().replace("_", "-") for p in parts if p)


def _one_line(text: str | None) -> str:
    return " ".join((text or "").split()).replace("|", "\\|")


class _EngineSchema:
    """Renders one JSON Schema (the engine's, from schemars) as tables, a section per object type it
    references; ``scope`` keeps the anchors of different roots apart."""

    def __init__(self, root: dict[str, Any], scope: str, schemes: dict[str, str]) -> None:
        self.defs: dict[str, Any] = root.get("$defs", {})
        self.scope = scope
        self.schemes = schemes  # key of a scheme object (``cc``, ``host``, ...) -> its category
        self.queue: list[str] = []

    def anchor(self, name: str) -> str:
        return _slug(self.scope, name)

    def type_of(self, s: Any) -> str:
        if (
            s is True
            or not isinstance(s, dict)
            or not ({"type", "$ref", "anyOf", "oneOf", "enum", "const"} & set(s))
        ):
            return "any JSON"
        if "$ref" in s:
            name = s["$ref"].rsplit("/", 1)[-1]
            d = self.defs[name]
            if "oneOf" in d and all("const" in v or "enum" in v for v in d["oneOf"]):
                return self.type_of(d)
            if "oneOf" in d and all(len(v.get("properties", {})) == 1 for v in d["oneOf"]):
                return self.type_of(d)
            if name not in self.queue:
                self.queue.append(name)
            return f"[{name}](#{self.anchor(name)})"
        if "const" in s:
            return f'`"{s["const"]}"`'
        if "enum" in s:
            return " \\| ".join(f'`"{v}"`' if isinstance(v, str) else f"`{v}`" for v in s["enum"])
        if "anyOf" in s or "oneOf" in s:
            alts = s.get("anyOf") or s.get("oneOf") or []
            if all(len(v.get("properties", {})) == 1 and v.get("type") == "object" for v in alts):
                return (
                    " or ".join(
                        "`{"
                        + ", ".join(f'"{k}": {self.type_of(t)}' for k, t in v["properties"].items())
                        + "}`"
                        for v in alts
                    )
                    .replace('`"', '"')
                    .replace('"`', '"')
                )
            return " or ".join(self.type_of(v) for v in alts)
        types = s["type"] if isinstance(s["type"], list) else [s["type"]]
        out = []
        for t in types:
            if t == "array" and "prefixItems" in s:
                out.append("[" + ", ".join(self.type_of(i) for i in s["prefixItems"]) + "]")
            elif t == "array":
                out.append("list of " + self.type_of(s.get("items", True)))
            elif t == "object" and isinstance(s.get("additionalProperties"), dict):
                out.append("map of string to " + self.type_of(s["additionalProperties"]))
            elif t in ("integer", "number"):
                out.append(_FORMATS.get(s.get("format", ""), t))
            else:
                out.append({"boolean": "bool"}.get(t, t))
        return " or ".join(out)

    def table(self, obj: dict[str, Any]) -> list[str]:
        props = obj.get("properties", {})
        if not props:
            return ["No parameter but `kind`.\n"]
        required = set(obj.get("required", []))
        rows = ["| key | type | required | default | description |", "|---|---|---|---|---|"]
        for key, s in props.items():
            has_default = isinstance(s, dict) and "default" in s
            default = f"`{json.dumps(s['default'])}`" if has_default else ""
            desc = _one_line(s.get("description") if isinstance(s, dict) else "")
            req = "yes" if key in required else ""
            kind = self.type_of(s)
            if kind == "any JSON" and key in self.schemes:
                kind = f"[{self.schemes[key]} object](#{self.schemes[key]})"
            rows.append(f"| `{key}` | {kind} | {req} | {default} | {desc} |")
        return [*rows, ""]

    def sections(self, title: str, root: dict[str, Any], level: int = 2) -> list[str]:
        """The root's table, then a section per type it references (breadth first)."""
        out = [f"{'#' * level} {title} {{#{self.anchor('')}}}\n", _one_line(root.get("description")) + "\n"]
        out += self.table(root)
        done: set[str] = set()
        while self.queue:
            name = self.queue.pop(0)
            if name in done:
                continue
            done.add(name)
            d = self.defs[name]
            out.append(f"{'#' * (level + 1)} {name} {{#{self.anchor(name)}}}\n")
            out.append(_one_line(d.get("description")) + "\n")
            for v in d.get("oneOf", [d]):
                kind = v.get("properties", {}).get("kind", {}).get("const")
                if kind is not None:
                    out.append(f'`kind = "{kind}"`: {_one_line(v.get("description"))}\n')
                out += self.table(v)
        return out


def engine_page() -> str:
    from paccp import _engine

    c = json.loads(_engine.contract_json())
    out = [
        "# Engine input reference\n",
        f"Every key of the JSON scenario the engine takes (`paccp._engine.run_json`), engine {c['version']},"
        " generated at every build from the engine's own input types (`crates/paccp-sim/src/config.rs` and"
        " each scheme's parameters, through `paccp_sim::contract`): keys, types, whether required, serde's"
        " defaults and the types' doc comments. Unknown keys are errors. Times are integer nanoseconds"
        " (`*_ns`), rates integer bit/s (`*_bps`), sizes integer bytes (`*_bytes`). What the numbers mean,"
        " the output and the engine's semantics are in [Engine contract](../engine-contract.md).\n",
    ]
    schemes = {f.rsplit(".", 1)[-1]: cat for cat, e in c["schemes"].items() for f in e["fields"]}
    out += _EngineSchema(c["input"], "input", schemes).sections("Scenario", c["input"])
    out.append("## Schemes {#schemes}\n")
    out.append(
        "A scheme object has a `kind`; the engine's registry (`paccp_sim::Registry`) passes it to that"
        " kind's parser, which reads the parameters below. Another registered kind reads its own.\n"
    )
    for cat, entry in c["schemes"].items():
        where = ", ".join(f"`{f}`" for f in entry["fields"])
        kinds = ", ".join(f"[`{k}`](#{_slug(cat, k)})" for k in entry["kinds"])
        out.append(f"### {cat} (in {where}) {{#{cat}}}\n\n`kind`: {kinds}.\n")
        for kind, schema in entry["kinds"].items():
            title = f"{cat} `{kind}`"
            if schema is None:
                out += [f"#### {title} {{#{_slug(cat, kind)}}}\n", "No parameter but `kind`.\n"]
            else:
                out += _EngineSchema(schema, f"{cat}-{kind}", schemes).sections(title, schema, level=4)
    return "\n".join(out) + "\n"


PAGES = {"cli": cli_page, "scenario": scenario_page, "compare": compare_page, "engine": engine_page}


def _write_with_gen_files() -> None:
    import mkdocs_gen_files

    for name, fn in PAGES.items():
        with mkdocs_gen_files.open(f"reference/{name}.md", "w") as fh:
            fh.write(fn())


if __name__ == "__main__":
    print(PAGES[sys.argv[1]]())
elif __name__ == "<run_path>":  # run by mkdocs-gen-files during the build
    _write_with_gen_files()
