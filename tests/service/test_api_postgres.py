"""The controller over a PostgreSQL ledger (throwaway server, as the pricing tests use): the same flow."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from svc_fixtures import ADMIN, AGENT, Ctl

from paccp.errors import EnvironmentUnsupported
from paccp.pricing.pgtemp import TempPostgres


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    try:
        server = TempPostgres().start()
    except EnvironmentUnsupported as exc:
        if os.environ.get("CI"):
            pytest.fail(f"PostgreSQL is required under CI: {exc}")
        pytest.skip(f"no PostgreSQL server: {exc}")
    yield server.create_database("svc")
    server.stop()


def test_controller_on_postgresql(pg_url: str) -> None:
    from pathlib import Path

    from paccp.service.app import create_app

    with TestClient(create_app(pg_url, ADMIN, AGENT), raise_server_exceptions=False) as c:
        ctl = Ctl(c, Path("/nonexistent"))
        tok = ctl.tenant("acme")
        ctl.vm("vm1", "acme")
        p = ctl.buy(tok, "vm1", "mrg", "200Mbit", "2")
        session = ctl.agent()
        d = c.get("/v1/agent/desired", headers=ctl.h(session)).json()
        assert d["vms"][0]["theta_bps"] == 200_000_000
        rec = {"record_id": "a1", "source": "datapath", "tenant": "acme", "vm": "vm1", "cos": "mrg",
               "theta_bps": 200_000_000, "omega": "2", "start_ns": 1_793_491_200_000_000_000,
               "end_ns": 1_793_491_200_000_000_000 + 3_600_000_000_000, "bytes": 10**9}  # fmt: skip
        for new in (1, 0):
            r = c.post(
                "/v1/agent/report", json={"records": [rec], "rates": {"vm1": 5}}, headers=ctl.h(session)
            )
            assert r.json()["new"] == new
        inv = c.get("/v1/invoices/2026-11", headers=ctl.h(tok)).json()
        assert inv["total"] == "0.16"  # one MRG VM-hour at (0.10 + 0.06 + 0.008 x 0.2)
        assert c.delete(f"/v1/purchases/{p['id']}", headers=ctl.h(tok)).json()["state"] == "cancelled"
        assert c.get("/v1/vms", headers=ctl.h(tok)).json()[0]["rate_bps"] == 5
        second = c.post(
            "/v1/agent/register", json={"host": "h1", "instance_id": "another-one"}, headers=ctl.h(AGENT)
        )
        assert second.status_code == 409
