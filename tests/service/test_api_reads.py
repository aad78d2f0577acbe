"""The tenant read path's shortcuts keep its guarantees: revoked tokens die within the stated bound, a
remembered quote is the quote, ``/v1/vms`` (one query) shows exactly the tenant's VMs, purchases and rates."""

from __future__ import annotations

import time
from decimal import Decimal
from pathlib import Path

from fastapi.testclient import TestClient
from svc_fixtures import ADMIN, AGENT, Ctl

from paccp.pricing.book import load_book
from paccp.pricing.quote import quote
from paccp.service.app import create_app

TTL_S = 1.0


def test_revoked_token_dies_at_once_here_and_within_the_ttl_in_another_worker(tmp_path: Path) -> None:
    db = str(tmp_path / "ledger.sqlite")
    # two controller processes over one database, as `paccp serve --workers 2` runs them
    with (
        TestClient(create_app(db, ADMIN, AGENT, token_ttl_s=TTL_S)) as one,
        TestClient(create_app(db, ADMIN, AGENT, token_ttl_s=TTL_S)) as two,
    ):
        a, b = Ctl(one, tmp_path / "ledger.sqlite"), Ctl(two, tmp_path / "ledger.sqlite")
        tok = a.tenant("acme")
        assert b.client.get("/v1/me", headers=b.h(tok)).status_code == 200  # two now remembers the token
        assert a.client.get("/v1/me", headers=a.h(tok)).status_code == 200
        revoked_at = time.monotonic()
        assert a.client.delete("/v1/admin/tenants/acme/tokens", headers=a.admin).json()["revoked"] == 1
        assert a.client.get("/v1/me", headers=a.h(tok)).status_code == 401  # where it was revoked: at once
        # elsewhere: still remembered (the shortcut is real), then refused within the bound
        seen_ok = b.client.get("/v1/me", headers=b.h(tok)).status_code == 200
        while b.client.get("/v1/me", headers=b.h(tok)).status_code == 200:
            assert time.monotonic() - revoked_at < TTL_S + 0.5, "revoked token still works past the bound"
            time.sleep(0.05)
        assert seen_ok or time.monotonic() - revoked_at > TTL_S  # a loaded machine may have taken the TTL
        # and the cache holds no stale answer for unknown tokens: a new token works at once in both
        new = a.client.post("/v1/admin/tenants/acme/tokens", headers=a.admin).json()["token"]
        assert b.client.get("/v1/me", headers=b.h(new)).status_code == 200


def test_remembered_quotes_are_the_quote_for_each_set_of_terms(ctl: Ctl) -> None:
    tok = ctl.tenant("acme")
    book = load_book(None)[0]
    for _ in range(2):  # the second round is answered from memory: the same figures
        for cos, theta, omega in (("mrg", "400Mbit", "2"), ("mrg", "400Mbit", "2.0"), ("ds", "0", "3")):
            got = ctl.client.get("/v1/quote", params={"cos": cos, "theta": theta, "omega": omega},
                                 headers=ctl.h(tok)).json()  # fmt: skip
            want = quote("vbp", cos, int(Decimal(theta.removesuffix("Mbit")) * 10**6), Decimal(omega),
                         3_600_000_000_000, book)  # fmt: skip
            assert Decimal(got["per_hour"]) == want.per_hour and got["omega"] == want.to_json()["omega"]
    bad = ctl.client.get("/v1/quote", params={"cos": "mrg", "theta": "0"}, headers=ctl.h(tok))
    assert bad.status_code == 400  # a refusal is not remembered as a price
    assert (
        ctl.client.get("/v1/quote", params={"cos": "mrg", "theta": "0"}, headers=ctl.h(tok)).status_code
        == 400
    )


def test_vms_listing_joins_only_the_tenants_own_rows(ctl: Ctl) -> None:
    a, b = ctl.tenant("alpha"), ctl.tenant("beta")
    for name, who in (("va1", "alpha"), ("va2", "alpha"), ("vb1", "beta")):
        ctl.vm(name, who)
    pa = ctl.buy(a, "va2", "mrg", "100Mbit", "2")
    old = ctl.buy(b, "vb1", "ds", "0", "3")
    q = ctl.client.get("/v1/quote", params={"cos": "ds", "omega": "4"}, headers=ctl.h(b)).json()
    body = {"cos": "ds", "omega": "4", "max_per_hour": q["per_hour"]}
    assert ctl.client.patch(f"/v1/purchases/{old['id']}", json=body, headers=ctl.h(b)).status_code == 200
    session = ctl.agent()
    r = ctl.client.post("/v1/agent/report", json={"rates": {"va1": 7, "vb1": 9}}, headers=ctl.h(session))
    assert r.status_code == 200, r.text
    va = ctl.client.get("/v1/vms", headers=ctl.h(a)).json()
    assert [v["name"] for v in va] == ["va1", "va2"]
    assert (va[0]["purchases"], va[0]["rate_bps"]) == ([], 7)
    assert [p["id"] for p in va[1]["purchases"]] == [pa["id"]] and va[1]["rate_bps"] is None
    vb = ctl.client.get("/v1/vms", headers=ctl.h(b)).json()
    assert [v["name"] for v in vb] == ["vb1"] and vb[0]["rate_bps"] == 9
    assert [p["omega"] for p in vb[0]["purchases"]] == ["4"]  # the replaced purchase is not active
