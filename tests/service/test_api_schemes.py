"""SoftBW guarantees and MPTCP BG/WC guarantees bought through the API: priced by the pricing package's quote
on the tenant's book, carried to the agent's desired state, refused when the tenant's model does not sell
them, and invisible to other tenants."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from svc_fixtures import Ctl

from paccp.pricing.book import load_book
from paccp.pricing.quote import quote

HOUR = 3_600_000_000_000
BOOK = load_book(None)[0]


def _quote(ctl: Ctl, tok: str, **params: Any) -> dict[str, Any]:
    r = ctl.client.get("/v1/quote", params=params, headers=ctl.h(tok))
    assert r.status_code == 200, r.text
    return dict(r.json())


def _buy(ctl: Ctl, tok: str, status: int = 201, **body: Any) -> dict[str, Any]:
    r = ctl.client.post("/v1/purchases", json=body, headers=ctl.h(tok))
    assert r.status_code == status, r.text
    out = dict(r.json())
    if status >= 400:
        assert set(out) == {"error"} and "\n" not in out["error"]
    return out


def test_softbw_guarantees_are_sold_at_the_quote(ctl: Ctl) -> None:
    tok = ctl.tenant("soft", "softbw")
    for vm in ("s1", "s2", "s3"):
        ctl.vm(vm, "soft")
    session = ctl.agent()
    # strict: B = theta, the rate assumed B
    q = _quote(ctl, tok, cos="mrg", theta="1Gbit", guarantee="strict")
    want = quote("softbw", "mrg", 10**9, 1, HOUR, BOOK, guarantee="strict")
    assert Decimal(q["per_hour"]) == want.per_hour > 0 and q["scheme"] == "softbw"
    p = _buy(ctl, tok, vm="s1", cos="mrg", theta="1Gbit", guarantee="strict", max_per_hour=q["per_hour"])
    assert (p["scheme"], p["guarantee"], p["theta_bps"], p["rate_bps"]) == ("softbw", "strict", 10**9, 10**9)
    assert Decimal(p["per_hour"]) == want.per_hour
    # fair share needs the rate it is priced at; without it, one line and nothing written
    err = _buy(ctl, tok, 400, vm="s2", cos="ds", omega="2", guarantee="fair", max_per_hour="100")
    assert "rate" in err["error"]
    fair = _quote(ctl, tok, cos="ds", omega="2", guarantee="fair", rate="2Gbit")
    want = quote("softbw", "ds", 0, 2, HOUR, BOOK, guarantee="fair", rate_bps=2 * 10**9)
    assert Decimal(fair["per_hour"]) == want.per_hour
    _buy(
        ctl, tok, vm="s2", cos="ds", omega="2", guarantee="fair", rate="2Gbit", max_per_hour=fair["per_hour"]
    )
    # dynamic: size S by deadline T
    dyn = _quote(ctl, tok, cos="mrg", theta="1Gbit", guarantee="dynamic", size=10**9, deadline="20s")
    want = quote("softbw", "mrg", 10**9, 1, HOUR, BOOK, guarantee="dynamic", size_bytes=10**9,
                 deadline_ns=20 * 10**9)  # fmt: skip
    assert Decimal(dyn["per_hour"]) == want.per_hour
    p3 = _buy(ctl, tok, vm="s3", cos="mrg", theta="1Gbit", guarantee="dynamic", size=10**9, deadline="20s",
              max_per_hour=dyn["per_hour"])  # fmt: skip
    assert p3["guarantee"] == "dynamic"
    # a price above what the tenant accepted is refused (402), as for pairs
    err = _buy(ctl, tok, 402, vm="s1", cos="mrg", theta="2Gbit", guarantee="strict", max_per_hour="0.0001")
    desired = {
        v["name"]: v for v in ctl.client.get("/v1/agent/desired", headers=ctl.h(session)).json()["vms"]
    }
    assert (desired["s1"]["scheme"], desired["s1"]["guarantee"], desired["s1"]["theta_bps"]) == (
        "softbw",
        "strict",
        10**9,
    )
    assert desired["s2"]["guarantee"] == "fair" and desired["s3"]["guarantee"] == "dynamic"
    # a SoftBW purchase is for the whole VM, and a SoftBW tenant does not buy MPTCP or PACCP pairs
    _buy(ctl, tok, 400, vm="s1", cos="mrg", theta="1Gbit", port=80, max_per_hour="100")
    err = _buy(ctl, tok, 400, vm="s1", cos="mrg", theta="1Gbit", scheme="mptcp_bgwc", max_per_hour="100")
    assert "softbw tenant buys softbw" in err["error"]
    # upgrade a strict guarantee: the old one is replaced, the new one priced anew
    q2 = _quote(ctl, tok, cos="mrg", theta="2Gbit", guarantee="strict")
    r = ctl.client.patch(f"/v1/purchases/{p['id']}", headers=ctl.h(tok),
                         json={"cos": "mrg", "theta": "2Gbit", "guarantee": "strict",
                               "max_per_hour": q2["per_hour"]})  # fmt: skip
    assert r.status_code == 200, r.text
    assert r.json()["replaces"] == p["id"] and r.json()["theta_bps"] == 2 * 10**9


def test_mptcp_bgwc_is_sold_to_vbp_tenants_at_the_quote(ctl: Ctl) -> None:
    tok = ctl.tenant("acme")
    ctl.vm("vm1", "acme")
    ctl.vm("vm2", "acme")
    session = ctl.agent()
    q = _quote(ctl, tok, cos="mrg", theta="500Mbit", omega="2", scheme="mptcp_bgwc")
    assert q["scheme"] == "mptcp_bgwc"
    # the [mptcp_bgwc] section is the VBP form with VBP's numbers: the same price as the VBP pair
    assert BOOK.mptcp_bgwc == BOOK.vbp
    assert Decimal(q["per_hour"]) == quote("vbp", "mrg", 500_000_000, 2, HOUR, BOOK).per_hour
    p = _buy(ctl, tok, vm="vm1", cos="mrg", theta="500Mbit", omega="2", scheme="mptcp_bgwc",
             max_per_hour=q["per_hour"])  # fmt: skip
    assert (p["scheme"], p["theta_bps"], p["omega"], p["guarantee"]) == ("mptcp_bgwc", 500_000_000, "2", None)
    d = ctl.client.get("/v1/agent/desired", headers=ctl.h(session)).json()["vms"]
    assert [(v["name"], v["scheme"]) for v in d] == [("vm1", "mptcp_bgwc"), ("vm2", "paccp")]
    # SoftBW terms are not MPTCP terms; a change keeps the scheme (cancel and buy to switch)
    _buy(ctl, tok, 400, vm="vm2", cos="mrg", theta="1Gbit", guarantee="strict", max_per_hour="100")
    _buy(ctl, tok, 400, vm="vm2", cos="mrg", theta="1Gbit", scheme="softbw", max_per_hour="100")
    r = ctl.client.patch(f"/v1/purchases/{p['id']}", headers=ctl.h(tok),
                         json={"cos": "ds", "omega": "3", "max_per_hour": "100"})  # fmt: skip
    assert r.status_code == 409 and "cancel it and buy" in r.json()["error"]
    assert ctl.client.get(f"/v1/purchases/{p['id']}", headers=ctl.h(tok)).json()["state"] == "active"


def test_mptcp_is_not_sold_where_the_book_prices_it_apart_from_vbp(ctl: Ctl) -> None:
    text = load_book(None)[1].replace('[mptcp_bgwc]\ntime_unit = "hour"\np0 = "0.10"',
                                      '[mptcp_bgwc]\ntime_unit = "hour"\np0 = "0.20"')  # fmt: skip
    assert text != load_book(None)[1]
    r = ctl.client.put("/v1/admin/pricebooks/dear", json={"toml": text}, headers=ctl.admin)
    assert r.status_code == 200, r.text
    r = ctl.client.post("/v1/admin/tenants", json={"name": "t2", "model": "vbp", "book": "dear"},
                        headers=ctl.admin)  # fmt: skip
    tok = r.json()["token"]
    ctl.vm("vm9", "t2")
    err = _buy(ctl, tok, 400, vm="vm9", cos="be", scheme="mptcp_bgwc", max_per_hour="100")
    assert "the ledger bills by [vbp]" in err["error"]
    assert ctl.client.get("/v1/purchases", headers=ctl.h(tok)).json() == []


def test_guarantees_are_isolated_between_tenants(ctl: Ctl) -> None:
    a, b = ctl.tenant("soft", "softbw"), ctl.tenant("acme")
    ctl.vm("s1", "soft")
    ctl.vm("vm1", "acme")
    q = _quote(ctl, a, cos="mrg", theta="1Gbit", guarantee="strict")
    pa = _buy(ctl, a, vm="s1", cos="mrg", theta="1Gbit", guarantee="strict", max_per_hour=q["per_hour"])
    qb = _quote(ctl, b, cos="mrg", theta="1Gbit", scheme="mptcp_bgwc")
    pb = _buy(ctl, b, vm="vm1", cos="mrg", theta="1Gbit", scheme="mptcp_bgwc", max_per_hour=qb["per_hour"])
    for tok, other, other_vm in ((a, pb, "vm1"), (b, pa, "s1")):
        h = ctl.h(tok)
        assert ctl.client.get(f"/v1/purchases/{other['id']}", headers=h).status_code == 404
        assert ctl.client.delete(f"/v1/purchases/{other['id']}", headers=h).status_code == 404
        r = ctl.client.patch(f"/v1/purchases/{other['id']}", headers=h,
                             json={"cos": "mrg", "theta": "2Gbit", "max_per_hour": "100"})  # fmt: skip
        assert r.status_code == 404
        body = {"vm": other_vm, "cos": "mrg", "theta": "1Gbit", "max_per_hour": "100"}
        r = ctl.client.post("/v1/purchases", headers=h, json=body)
        assert r.status_code == 404
    for tok, mine in ((a, pa), (b, pb)):
        assert [p["id"] for p in ctl.client.get("/v1/purchases", headers=ctl.h(tok)).json()] == [mine["id"]]
        assert ctl.client.get(f"/v1/purchases/{mine['id']}", headers=ctl.h(tok)).json()["state"] == "active"


def test_host_enforced_pair_and_whole_mptcp_levels(ctl: Ctl) -> None:
    tok = ctl.tenant("acme")
    ctl.vm("vm1", "acme")
    ctl.vm("vm2", "acme")
    session = ctl.agent()
    # PACCP enforced at the host's port: the same pair, at the VBP pair's price
    q = _quote(ctl, tok, cos="mrg", theta="300Mbit", omega="2", scheme="paccp_host")
    assert Decimal(q["per_hour"]) == quote("vbp", "mrg", 300_000_000, 2, HOUR, BOOK).per_hour
    p = _buy(ctl, tok, vm="vm1", cos="mrg", theta="300Mbit", omega="2", scheme="paccp_host",
             max_per_hour=q["per_hour"])  # fmt: skip
    assert p["scheme"] == "paccp_host"
    # an MPTCP competition level is whole (the datapath's A_l): 1.5 is refused, nothing written
    r = ctl.client.get("/v1/quote", params={"cos": "ds", "omega": "1.5", "scheme": "mptcp_bgwc"},
                       headers=ctl.h(tok))  # fmt: skip
    assert r.status_code == 400 and "whole number" in r.json()["error"]
    _buy(ctl, tok, 400, vm="vm2", cos="ds", omega="1.5", scheme="mptcp_bgwc", max_per_hour="100")
    d = ctl.client.get("/v1/agent/desired", headers=ctl.h(session)).json()["vms"]
    assert [(v["name"], v["scheme"], v["theta_bps"], v["omega"]) for v in d] == [
        ("vm1", "paccp_host", 300_000_000, "2"), ("vm2", "paccp", 0, "1")]  # fmt: skip
    # an FBP tenant buys port rules only (enforced by PACCP's maps), not the host-enforced pair
    fbp = ctl.tenant("ports", "fbp")
    r = ctl.client.get("/v1/quote", params={"cos": "mrg", "theta": "1Mbit", "scheme": "paccp_host"},
                       headers=ctl.h(fbp))  # fmt: skip
    assert r.status_code == 400


def test_desired_state_carries_the_softbw_rate_the_agent_turns_into_b(ctl: Ctl) -> None:
    tok = ctl.tenant("soft", "softbw")
    ctl.vm("s1", "soft")
    session = ctl.agent()
    terms = {"cos": "ds", "guarantee": "dynamic", "size": 10**9, "deadline": "100s"}
    q = _quote(ctl, tok, **terms)
    _buy(ctl, tok, vm="s1", max_per_hour=q["per_hour"], **terms)
    (v,) = ctl.client.get("/v1/agent/desired", headers=ctl.h(session)).json()["vms"]
    assert (v["scheme"], v["guarantee"], v["rate_bps"]) == ("softbw", "dynamic", 80_000_000)  # S/T
