"""The one place terminal output is made: consoles, tables and progress bars.

Every command and experiment prints through here, so two rules hold everywhere:

- **Text is literal.** Check statements, tenant, VM and flow names, labels such as ``[drop-tail]`` or
  ``[tcp]`` are data, never rich markup: :func:`table` escapes its title and :func:`add_row` turns every
  plain string cell into a literal :class:`rich.text.Text`; :func:`echo` prints a line literally. Styling
  is asked for explicitly with :func:`styled`.
- **Pipes and logs get plain text.** When the stream is not a terminal (``| cat``, CI logs, ``> file``),
  the console has no colours, no width limit (tables are as wide as their content, never wrapped or cut
  with ``…``) and progress bars are off (no residue, no blank lines). On a terminal, rich as usual.
"""

from __future__ import annotations

import sys
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress, ProgressColumn
    from rich.table import Table
    from rich.text import Text

# Width of a console that is not a terminal: wide enough that no table is ever wrapped or cut.
PIPE_WIDTH = 100_000


def _stream(stderr: bool) -> IO[str]:
    return sys.stderr if stderr else sys.stdout


def is_terminal(stderr: bool = False) -> bool:
    """Whether stdout (or stderr) is an interactive terminal."""
    s = _stream(stderr)
    try:
        return bool(s.isatty())
    except (AttributeError, ValueError):  # closed or replaced stream
        return False


def console(stderr: bool = False, *, file: IO[str] | None = None) -> Console:
    """A console on stdout (or stderr, or ``file``): rich on a terminal, plain and unbounded otherwise."""
    from rich.console import Console

    stream = file if file is not None else _stream(stderr)
    try:
        tty = bool(stream.isatty())
    except (AttributeError, ValueError):
        tty = False
    if tty:
        return Console(file=stream, highlight=False, emoji=False)
    return Console(
        file=stream,
        width=PIPE_WIDTH,
        color_system=None,
        force_terminal=False,
        no_color=True,
        highlight=False,
        emoji=False,
        soft_wrap=True,
    )


def literal(value: object) -> Text:
    """A cell or line printed exactly as given (no markup, no emoji codes)."""
    from rich.text import Text

    return Text(str(value))


def styled(value: object, style: str) -> Text:
    """Literal text with a style (bold totals, red verdicts); the style is dropped in pipes."""
    from rich.text import Text

    return Text(str(value), style=style)


def table(*columns: str, title: str | None = None, right: tuple[str, ...] = (), **kw: Any) -> Table:
    """A table whose title and column headers are literal; columns named in ``right`` right-justified."""
    from rich.markup import escape
    from rich.table import Table

    t = Table(title=escape(title) if title else None, **kw)
    for c in columns:
        t.add_column(escape(c), justify="right" if c in right else "left")
    return t


def add_row(t: Table, *cells: object) -> None:
    """Add a row; plain values are printed literally (a :class:`Text` keeps its style)."""
    from rich.text import Text

    t.add_row(*(c if isinstance(c, Text) else literal("" if c is None else c) for c in cells))


def echo(*parts: object, stderr: bool = False, con: Console | None = None) -> None:
    """Print one line literally (parts joined by a space)."""
    (con or console(stderr)).print(literal(" ".join(str(p) for p in parts)))


def warn(message: str) -> None:
    """``paccp: warning: MESSAGE`` on stderr, one line (the warning counterpart of the one-line errors)."""
    print(f"paccp: warning: {' '.join(message.split())}", file=sys.stderr)


def print_table(t: Table, con: Console | None = None) -> None:
    """Print a table (on stdout unless a console is given)."""
    (con or console()).print(t)


def progress(*columns: str | ProgressColumn, **kw: Any) -> Progress:
    """A transient progress bar on stderr, disabled when stderr is not a terminal (no residue in logs) or
    when ``disable`` says so."""
    from rich.progress import Progress

    kw.setdefault("transient", True)
    off = bool(kw.pop("disable", False)) or not is_terminal(stderr=True)
    return Progress(*columns, console=console(stderr=True), disable=off, **kw)
