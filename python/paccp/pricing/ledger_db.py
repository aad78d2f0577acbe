"""Where the ledger lives: the ``--db`` value as an SQLAlchemy URL and the checks on an SQLite ledger file
before it is opened (:class:`paccp.pricing.ledger.Ledger` calls both)."""

from __future__ import annotations

import os
from pathlib import Path

from paccp.errors import UserError

LEGACY_DEFAULT = "paccp-ledger.sqlite"
_SQLITE_MAGIC = b"SQLite format 3\x00"


def default_db_path() -> Path:
    """``$XDG_DATA_HOME/paccp/ledger.sqlite`` (default ``~/.local/share/paccp/ledger.sqlite``)."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "paccp" / "ledger.sqlite"


def db_url(db: str | None) -> str:
    """``--db`` value (or ``$PACCP_LEDGER``, or the per-user default file) as an SQLAlchemy URL.

    ``postgresql://`` and ``postgres://`` URLs use psycopg 3 (``postgresql+psycopg://``).
    """
    value = db or os.environ.get("PACCP_LEDGER") or str(default_db_path())
    for prefix in ("postgresql://", "postgres://"):
        if value.startswith(prefix):
            return "postgresql+psycopg://" + value[len(prefix) :]
    return value if "://" in value else f"sqlite:///{Path(value)}"


def _prepare_sqlite_file(url: str, default: bool, create: bool) -> None:
    """Refuse what is not an SQLite ledger; create a new file private to its owner (mode 0600).

    With ``create`` False a missing file is an error (commands that only use a ledger leave nothing behind).
    """
    raw = url.removeprefix("sqlite:///")
    if raw in ("", ":memory:") or raw.startswith("file:"):
        return
    p = Path(raw)
    if p.is_dir():
        raise UserError(f"ledger {p}: is a directory, not an SQLite file")
    if p.exists():
        try:
            with p.open("rb") as fh:
                head = fh.read(16)
        except OSError as exc:
            raise UserError(f"ledger {p}: cannot read ({exc.strerror})") from None
        if head and head != _SQLITE_MAGIC:
            raise UserError(f"ledger {p}: not an SQLite database (give --db a ledger file or a URL)")
        return
    if not create:
        hint = ""
        if default and Path(LEGACY_DEFAULT).is_file():
            hint = (
                f"; an older paccp kept its default ledger in ./{LEGACY_DEFAULT}: pass --db {LEGACY_DEFAULT}"
            )
        raise UserError(
            f"ledger {p} does not exist (a ledger is created by: paccp bill tenant add ...){hint}"
        )
    if default:
        p.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    elif not p.parent.is_dir():
        raise UserError(f"ledger {p}: directory {p.parent} does not exist")
    try:
        os.close(os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except FileExistsError:
        pass
    except OSError as exc:
        raise UserError(f"ledger {p}: cannot create ({exc.strerror})") from None
