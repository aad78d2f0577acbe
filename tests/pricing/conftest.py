"""Fixtures of the pricing tests: the test book, records, and a ledger on each backend.

``db`` is parametrised over SQLite and PostgreSQL: every test that takes it runs on both. PostgreSQL is a
throwaway server started once per session (:mod:`paccp.pricing.pgtemp`, a temporary data directory and a
Unix socket; as root it runs as ``nobody``), with a fresh database per test. If the server binaries are
missing, the PostgreSQL cases are skipped with the reason, except under CI (``CI=true``), where that fails.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pricing_fixtures import BOOK, rec

from paccp.common.usage import UsageRecord
from paccp.errors import EnvironmentUnsupported
from paccp.pricing.book import PriceBook, parse_book
from paccp.pricing.ledger import Ledger
from paccp.pricing.pgtemp import TempPostgres

BACKENDS = ["sqlite", "postgresql"]
PG_TEMPLATE = "paccp_template"
_counter = itertools.count()


@pytest.fixture(scope="session")
def pg() -> Iterator[TempPostgres]:
    """One throwaway PostgreSQL server for the session."""
    try:
        server = TempPostgres().start()
    except EnvironmentUnsupported as exc:
        if os.environ.get("CI"):
            pytest.fail(f"PostgreSQL is required under CI: {exc}")
        pytest.skip(f"no PostgreSQL server: {exc}")
    # a migrated template: each test's database is a file copy of it (migrating each one is slower)
    Ledger(server.create_database(PG_TEMPLATE)).close()
    yield server
    server.stop()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """The ledger backend of this test case."""
    return str(request.param)


@pytest.fixture()
def new_db(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Callable[..., str]:
    """A factory of fresh ledgers (``--db`` values) on this case's backend: ``make(empty=False)``.

    On PostgreSQL a ledger is a copy of the migrated template unless ``empty`` (an empty database).
    """
    made: list[str] = []

    def make(empty: bool = False) -> str:
        if backend == "sqlite":
            return str(tmp_path / f"ledger{next(_counter)}.sqlite")
        server: TempPostgres = request.getfixturevalue("pg")
        name = f"t{os.getpid()}_{next(_counter)}"
        made.append(name)
        return server.create_database(name, "template0" if empty else PG_TEMPLATE)

    yield make  # type: ignore[misc]
    if made:
        server = request.getfixturevalue("pg")
        for name in made:
            server.drop_database(name)


@pytest.fixture()
def db(new_db: Callable[..., str]) -> str:
    """A fresh, empty ledger on this case's backend."""
    return new_db()


@pytest.fixture()
def book_text() -> str:
    """The test book's TOML."""
    return BOOK


@pytest.fixture()
def book() -> PriceBook:
    """The parsed test book."""
    return parse_book(BOOK)


@pytest.fixture()
def book_file(tmp_path: Path) -> Path:
    """The test book as a file."""
    p = tmp_path / "book.toml"
    p.write_text(BOOK)
    return p


@pytest.fixture()
def make_rec() -> Callable[..., UsageRecord]:
    """The :func:`rec` factory."""
    return rec
