"""User-facing errors.

Every error caused by bad input (a file, a flag, a field) is raised as :class:`UserError`. The CLI turns
it into one line on stderr and exit code 2; library callers get an ordinary exception.
"""

from __future__ import annotations


class UserError(Exception):
    """Bad input from the user: reported as one line, exit code 2, no traceback."""

    exit_code = 2

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class EnvironmentUnsupported(UserError):
    """The machine lacks something an operation needs (root, BTF, struct_ops, cgroup v2, ...)."""


def validation_error(exc: object, root: str = "") -> tuple[str, str]:
    """(dotted location, message) of the first error of a pydantic ``ValidationError`` in our one-line
    style: pydantic's ``"Value error, "`` prefix dropped; the location is ``root`` when it has none.
    Every place that turns a ValidationError into a UserError uses this (one rule for the wording)."""
    errors = exc.errors() if hasattr(exc, "errors") else []
    err: dict[str, object] = dict(errors[0]) if errors else {}
    loc = err.get("loc", ())
    where = ".".join(str(p) for p in loc) if isinstance(loc, tuple | list) else ""
    msg = " ".join(str(err.get("msg", "invalid")).split()).removeprefix("Value error, ")
    return where or root, msg
