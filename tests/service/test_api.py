"""The controller's API in-process: purchases, isolation between tenants, refusals, bad input (never 500)."""

from __future__ import annotations

import json
import time
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from svc_fixtures import AGENT, Ctl

from paccp.pricing.book import load_book
from paccp.pricing.quote import quote


def _record(vm: str, tenant: str, start: int, rid: str = "r1", nbytes: int = 1000) -> dict[str, Any]:
    return {"record_id": rid, "source": "datapath", "tenant": tenant, "vm": vm, "cos": "mrg",
            "theta_bps": 100_000_000, "omega": "2", "start_ns": start, "end_ns": start + 10**10,
            "bytes": nbytes}  # fmt: skip


def test_buy_change_cancel_reaches_desired_state(ctl: Ctl) -> None:
    tok = ctl.tenant("acme")
    ctl.vm("vm1", "acme")
    session = ctl.agent()
    d0 = ctl.client.get("/v1/agent/desired", headers=ctl.h(session)).json()
    assert d0["vms"] == [
        {"name": "vm1", "tenant": "acme", "model": "vbp", "cgroup": "/vm1", "scheme": "paccp",
         "guarantee": None, "rate_bps": None, "theta_bps": 0, "omega": "1", "rules": []}
    ]  # fmt: skip
    p = ctl.buy(tok, "vm1", "mrg", "200Mbit", "2")
    # the price is the pricing package's quote on the tenant's book, not a second implementation
    q = quote("vbp", "mrg", 200_000_000, Decimal(2), 3_600_000_000_000, load_book(None)[0])
    assert Decimal(p["per_hour"]) == q.per_hour
    d1 = ctl.client.get("/v1/agent/desired", headers=ctl.h(session)).json()
    assert d1["generation"] > d0["generation"]
    assert (d1["vms"][0]["theta_bps"], d1["vms"][0]["omega"]) == (200_000_000, "2")
    # a second purchase for the same VM is refused: change the active one instead
    q2 = ctl.client.get("/v1/quote", params={"cos": "ds", "omega": "3"}, headers=ctl.h(tok)).json()
    r = ctl.client.post(
        "/v1/purchases",
        json={"vm": "vm1", "cos": "ds", "omega": "3", "max_per_hour": q2["per_hour"]},
        headers=ctl.h(tok),
    )
    assert r.status_code == 409 and "already has active purchase" in r.json()["error"]
    r = ctl.client.patch(
        f"/v1/purchases/{p['id']}",
        json={"cos": "ds", "omega": "3", "max_per_hour": q2["per_hour"]},
        headers=ctl.h(tok),
    )
    assert r.status_code == 200, r.text
    new = r.json()
    assert new["replaces"] == p["id"] and new["cos"] == "ds"
    assert ctl.client.get(f"/v1/purchases/{p['id']}", headers=ctl.h(tok)).json()["state"] == "replaced"
    d2 = ctl.client.get("/v1/agent/desired", headers=ctl.h(session)).json()
    assert (d2["vms"][0]["theta_bps"], d2["vms"][0]["omega"]) == (0, "3")
    assert ctl.client.delete(f"/v1/purchases/{new['id']}", headers=ctl.h(tok)).json()["state"] == "cancelled"
    d3 = ctl.client.get("/v1/agent/desired", headers=ctl.h(session)).json()
    assert (d3["vms"][0]["theta_bps"], d3["vms"][0]["omega"]) == (0, "1")


def test_fbp_purchase_is_a_port_rule(ctl: Ctl) -> None:
    tok = ctl.tenant("flowco", "fbp")
    ctl.vm("f1", "flowco")
    r = ctl.client.get("/v1/quote", params={"cos": "ds", "omega": "2"}, headers=ctl.h(tok))
    body = {"vm": "f1", "cos": "ds", "omega": "2", "max_per_hour": r.json()["per_hour"]}
    assert ctl.client.post("/v1/purchases", json=body, headers=ctl.h(tok)).status_code == 400  # no port
    ok = ctl.client.post("/v1/purchases", json={**body, "port": 5201}, headers=ctl.h(tok))
    assert ok.status_code == 201, ok.text
    d = ctl.client.get("/v1/agent/desired", headers=ctl.h(ctl.agent())).json()
    vm = d["vms"][0]
    assert vm["model"] == "fbp" and (vm["theta_bps"], vm["omega"]) == (0, "1")
    assert vm["rules"] == [{"port": 5201, "theta_bps": 0, "omega": "2"}]


def test_long_poll_wakes_on_purchase(ctl: Ctl) -> None:
    import threading

    tok = ctl.tenant("acme")
    ctl.vm("vm1", "acme")
    session = ctl.agent()
    gen = ctl.client.get("/v1/agent/desired", headers=ctl.h(session)).json()["generation"]
    buyer = threading.Timer(0.3, lambda: ctl.buy(tok, "vm1"))
    buyer.start()
    t = time.monotonic()
    d = ctl.client.get("/v1/agent/desired", params={"since": gen, "wait": 10}, headers=ctl.h(session)).json()
    assert time.monotonic() - t < 5
    # the poll may return once the purchase is committed, before its response reaches the buyer: closing
    # the client with that request in flight hung the fixture's teardown
    buyer.join(timeout=30)
    assert not buyer.is_alive()
    assert d["generation"] > gen and d["vms"][0]["theta_bps"] == 100_000_000


def test_unpaid_pair_is_refused_and_nothing_is_written(ctl: Ctl) -> None:
    tok = ctl.tenant("acme")
    ctl.vm("vm1", "acme")
    session = ctl.agent()
    gen = ctl.client.get("/v1/agent/desired", headers=ctl.h(session)).json()["generation"]
    q = ctl.client.get("/v1/quote", params={"cos": "mrg", "theta": "1Gbit", "omega": "2"}, headers=ctl.h(tok))
    cheap = str(Decimal(q.json()["per_hour"]) - Decimal("0.0001"))
    body = {"vm": "vm1", "cos": "mrg", "theta": "1Gbit", "omega": "2", "max_per_hour": cheap}
    r = ctl.client.post("/v1/purchases", json=body, headers=ctl.h(tok))
    assert r.status_code == 402 and "accept that price" in r.json()["error"]
    # a pair the paper's CoS rules do not sell (MRG without theta), or the datapath cannot enforce
    for bad in ({"cos": "mrg", "theta": "0"}, {"cos": "ds", "omega": "1"}, {"cos": "ds", "omega": "5000"}):
        r = ctl.client.post("/v1/purchases", json={**body, "max_per_hour": "1000", **bad}, headers=ctl.h(tok))
        assert r.status_code == 400, (bad, r.text)
    # the tenant cannot reach the agents' side: no way to set a pair except by buying it
    assert ctl.client.get("/v1/agent/desired", headers=ctl.h(tok)).status_code == 401
    rec = _record("vm1", "acme", 1_793_491_200_000_000_000)
    assert ctl.client.post("/v1/agent/report", json={"records": [rec]}, headers=ctl.h(tok)).status_code == 401
    assert (
        ctl.client.post(
            "/v1/agent/register", json={"host": "h1", "instance_id": "tenant-try"}, headers=ctl.h(tok)
        ).status_code
        == 403
    )
    assert ctl.client.get("/v1/purchases", headers=ctl.h(tok)).json() == []
    d = ctl.client.get("/v1/agent/desired", headers=ctl.h(session)).json()
    assert d["generation"] == gen and d["vms"][0]["theta_bps"] == 0


def _tenant_routes(ctl: Ctl) -> set[tuple[str, str]]:
    out = set()
    for r in ctl.client.app.routes:  # type: ignore[attr-defined]
        if "tenant" in (getattr(r, "tags", None) or []):
            for m in r.methods:  # type: ignore[attr-defined]
                out.add((m, r.path))  # type: ignore[attr-defined]
    return out


def test_tenant_tokens_are_isolated_on_every_endpoint(ctl: Ctl) -> None:
    a, b = ctl.tenant("alpha"), ctl.tenant("beta")
    ctl.vm("vma", "alpha")
    ctl.vm("vmb", "beta", host="h2")
    pa = ctl.buy(a, "vma")
    session = ctl.agent()
    start = 1_793_491_200_000_000_000
    r = ctl.client.post(
        "/v1/agent/report", json={"records": [_record("vma", "alpha", start)], "rates": {"vma": 123}},
        headers=ctl.h(session),
    )  # fmt: skip
    assert r.status_code == 200 and r.json()["new"] == 1
    q = ctl.client.get("/v1/quote", params={"cos": "ds", "omega": "2"}, headers=ctl.h(b)).json()
    change = {"cos": "ds", "omega": "2", "max_per_hour": q["per_hour"]}
    # every tenant endpoint, called by beta against alpha's things
    calls = {
        ("GET", "/v1/me"): lambda: ctl.client.get("/v1/me", headers=ctl.h(b)),
        ("GET", "/v1/quote"): lambda: ctl.client.get("/v1/quote", headers=ctl.h(b)),
        ("GET", "/v1/vms"): lambda: ctl.client.get("/v1/vms", headers=ctl.h(b)),
        ("GET", "/v1/purchases"): lambda: ctl.client.get("/v1/purchases", headers=ctl.h(b)),
        ("GET", "/v1/purchases/{pid}"): lambda: ctl.client.get(f"/v1/purchases/{pa['id']}", headers=ctl.h(b)),
        ("POST", "/v1/purchases"): lambda: ctl.client.post(
            "/v1/purchases", json={"vm": "vma", **change}, headers=ctl.h(b)
        ),
        ("PATCH", "/v1/purchases/{pid}"): lambda: ctl.client.patch(
            f"/v1/purchases/{pa['id']}", json=change, headers=ctl.h(b)
        ),
        ("DELETE", "/v1/purchases/{pid}"): lambda: ctl.client.delete(
            f"/v1/purchases/{pa['id']}", headers=ctl.h(b)
        ),
        ("GET", "/v1/usage"): lambda: ctl.client.get(
            "/v1/usage", params={"period": "2026-11", "vm": "vma"}, headers=ctl.h(b)
        ),
        ("GET", "/v1/invoices/{period}"): lambda: ctl.client.get("/v1/invoices/2026-11", headers=ctl.h(b)),
    }
    assert set(calls) == _tenant_routes(ctl), "a tenant endpoint without an isolation check"
    for key, call in calls.items():
        r = call()
        text = r.text
        if r.status_code == 200:  # nothing of alpha's in any answer beta gets
            assert "alpha" not in text and "vma" not in text, key
        assert r.status_code in (200, 404), (key, r.status_code, text)
        if key[0] != "GET" or "{pid}" in key[1]:
            assert r.status_code == 404, key
    assert ctl.client.get("/v1/vms", headers=ctl.h(b)).json()[0]["name"] == "vmb"
    assert ctl.client.get("/v1/usage", params={"period": "2026-11"}, headers=ctl.h(b)).json()["records"] == 0
    assert ctl.client.get("/v1/invoices/2026-11", headers=ctl.h(b)).json()["records"] == 0
    # alpha's purchase is untouched, and alpha sees its own usage and invoice
    assert ctl.client.get(f"/v1/purchases/{pa['id']}", headers=ctl.h(a)).json()["state"] == "active"
    assert ctl.client.get("/v1/usage", params={"period": "2026-11"}, headers=ctl.h(a)).json()["records"] == 1
    vms = ctl.client.get("/v1/vms", headers=ctl.h(a)).json()
    assert vms[0]["rate_bps"] == 123
    # tenants are not operators; a revoked token is dead
    assert ctl.client.get("/v1/admin/tenants", headers=ctl.h(a)).status_code == 403
    assert ctl.client.delete("/v1/admin/tenants/alpha/tokens", headers=ctl.admin).json()["revoked"] == 1
    assert ctl.client.get("/v1/me", headers=ctl.h(a)).status_code == 401


def test_agent_reports_only_its_own_vms_and_idempotently(ctl: Ctl) -> None:
    ctl.tenant("alpha")
    ctl.vm("vma", "alpha", host="h1")
    ctl.vm("vmz", "alpha", host="h2")
    s1 = ctl.agent("h1", "agent-h1-xx")
    start = 1_793_491_200_000_000_000
    other = ctl.client.post(
        "/v1/agent/report", json={"records": [_record("vmz", "alpha", start)]}, headers=ctl.h(s1)
    )
    assert other.status_code == 403
    rec = _record("vma", "alpha", start)
    for expect in (1, 0):
        r = ctl.client.post("/v1/agent/report", json={"records": [rec]}, headers=ctl.h(s1))
        assert r.json()["new"] == expect
    changed = ctl.client.post("/v1/agent/report", json={"records": [{**rec, "bytes": 5}]}, headers=ctl.h(s1))
    assert changed.status_code == 400 and "different content" in changed.json()["error"]
    # all or nothing: a batch with one bad record writes none of it
    good = _record("vma", "alpha", start + 10**10, "r2")
    r = ctl.client.post("/v1/agent/report", json={"records": [good, {**rec, "bytes": 5}]}, headers=ctl.h(s1))
    assert r.status_code == 400
    use = ctl.client.get(
        "/v1/usage", params={"period": "2026-11"}, headers=ctl.h(ctl.client.post(
            "/v1/admin/tenants/alpha/tokens", headers=ctl.admin).json()["token"])
    ).json()  # fmt: skip
    assert use["records"] == 1


def test_second_agent_for_a_host_is_refused(ctl: Ctl) -> None:
    ctl.agent("h1", "first-agent")
    r = ctl.client.post(
        "/v1/agent/register", json={"host": "h1", "instance_id": "second-agent"}, headers=ctl.h(AGENT)
    )
    assert r.status_code == 409 and "held by another agent" in r.json()["error"]
    ctl.agent("h1", "first-agent")  # the same agent again (a restart) is fine


BAD_BODIES: list[tuple[str, str, Any]] = [
    ("POST", "/v1/purchases", b"{not json"),
    ("POST", "/v1/purchases", []),
    ("POST", "/v1/purchases", {"vm": "vm1"}),
    ("POST", "/v1/purchases", {"vm": "vm1", "cos": "mrg", "theta": "lots", "max_per_hour": "1"}),
    ("POST", "/v1/purchases", {"vm": "vm1", "cos": "mrg", "theta": "1e30bit", "max_per_hour": "1"}),
    ("POST", "/v1/purchases", {"vm": "vm1", "cos": "xx", "max_per_hour": "1"}),
    ("POST", "/v1/purchases", {"vm": "vm1", "cos": "ds", "omega": "NaN", "max_per_hour": "1"}),
    ("POST", "/v1/purchases", {"vm": "vm1", "cos": "ds", "omega": "Infinity", "max_per_hour": "1"}),
    ("POST", "/v1/purchases", {"vm": "vm1", "cos": "ds", "omega": "2", "max_per_hour": "nan"}),
    ("POST", "/v1/purchases", {"vm": "vm1", "cos": "ds", "omega": -2, "max_per_hour": "1"}),
    ("POST", "/v1/purchases", {"vm": "vm1", "cos": "ds", "omega": "1e999999", "max_per_hour": "1"}),
    ("POST", "/v1/purchases", {"vm": "vm1", "cos": "be", "max_per_hour": "1", "extra": 1}),
    ("POST", "/v1/purchases", {"vm": "x" * 1000, "cos": "be", "max_per_hour": "1"}),
    ("POST", "/v1/purchases", {"vm": "vm1", "cos": "be", "max_per_hour": "1", "port": 80}),
    ("PATCH", "/v1/purchases/abc", {"cos": "be", "max_per_hour": "1"}),
    ("PATCH", "/v1/purchases/99999999999999999999999", {"cos": "be", "max_per_hour": "1"}),
    ("DELETE", "/v1/purchases/-1", None),
    ("GET", "/v1/quote?cos=mrg&theta=%00&omega=2", None),
    ("GET", "/v1/quote?cos=ds&omega=abc", None),
    ("GET", "/v1/usage?period=2026-13", None),
    ("GET", "/v1/usage?period=0000-01", None),
    ("GET", "/v1/invoices/yesterday", None),
    ("GET", "/v1/nowhere", None),
]


@pytest.mark.parametrize(("method", "path", "body"), BAD_BODIES)
def test_malformed_requests_are_4xx_with_one_line(ctl: Ctl, method: str, path: str, body: Any) -> None:
    tok = ctl.tenant("acme")
    ctl.vm("vm1", "acme")
    kw: dict[str, Any] = {"headers": ctl.h(tok)}
    if isinstance(body, bytes):
        kw["content"] = body
        kw["headers"] = {**kw["headers"], "Content-Type": "application/json"}
    elif body is not None:
        kw["json"] = body
    r = ctl.client.request(method, path, **kw)
    assert 400 <= r.status_code < 500, (r.status_code, r.text)
    msg = r.json()["error"]
    assert msg and "\n" not in msg and "Traceback" not in msg


def test_oversized_and_unauthenticated_requests(ctl: Ctl) -> None:
    tok = ctl.tenant("acme")
    big = json.dumps({"records": [{"x": "y" * 1000}] * 3000})
    r = ctl.client.post(
        "/v1/agent/report", content=big, headers={**ctl.h(tok), "Content-Type": "application/json"}
    )
    assert r.status_code == 413

    def chunks():  # no Content-Length: counted as it streams
        for _ in range(3000):
            yield b"x" * 1000

    r = ctl.client.post("/v1/purchases", content=chunks(), headers=ctl.h(tok))
    assert r.status_code == 413, r.text
    assert ctl.client.get("/v1/vms").status_code == 401
    assert ctl.client.get("/v1/vms", headers={"Authorization": "Basic abc"}).status_code == 401
    assert ctl.client.get("/v1/vms", headers={"Authorization": "Bearer " + "x" * 5000}).status_code in (
        401, 431,
    )  # fmt: skip
    assert ctl.client.get("/v1/admin/hosts", headers=ctl.h("wrong")).status_code == 403


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    body=st.dictionaries(
        st.sampled_from(
            [
                "vm",
                "cos",
                "theta",
                "omega",
                "port",
                "max_per_hour",
                "zz",
                "scheme",
                "guarantee",
                "rate",
                "size",
                "deadline",
            ]
        ),
        st.one_of(
            st.none(),
            st.booleans(),
            st.integers(),
            st.floats(allow_nan=False, allow_infinity=False),
            st.text(max_size=20),
            st.sampled_from(["softbw", "mptcp_bgwc", "strict", "dynamic", "fair", "1Gbit", "20s", "mrg"]),
        ),
    )
)
def test_fuzzed_purchase_bodies_never_500(ctl: Ctl, body: dict[str, Any]) -> None:
    if not hasattr(ctl, "_tok"):
        ctl._tok = ctl.tenant("fuzz")  # type: ignore[attr-defined]
        ctl.vm("vm1", "fuzz")
    r = ctl.client.post("/v1/purchases", json=body, headers=ctl.h(ctl._tok))  # type: ignore[attr-defined]
    assert r.status_code < 500, (body, r.text)
    if r.status_code == 201:
        ctl.client.delete(f"/v1/purchases/{r.json()['id']}", headers=ctl.h(ctl._tok))  # type: ignore[attr-defined]


def test_web_page_and_openapi(ctl: Ctl) -> None:
    page = ctl.client.get("/")
    assert page.status_code == 200 and "PACCP" in page.text and "Authorization" in page.text
    spec = ctl.client.get("/openapi.json").json()
    assert "/v1/purchases" in spec["paths"] and "/v1/agent/desired" in spec["paths"]
