"""Fixtures: a controller in-process (FastAPI TestClient) over a fresh SQLite ledger."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from svc_fixtures import ADMIN, AGENT, Ctl


@pytest.fixture
def ctl(tmp_path: Path) -> Iterator[Ctl]:
    from paccp.service.app import create_app

    db = tmp_path / "ledger.sqlite"
    app = create_app(str(db), ADMIN, AGENT)
    with TestClient(app, raise_server_exceptions=False) as c:
        yield Ctl(c, db)
