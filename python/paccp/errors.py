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
