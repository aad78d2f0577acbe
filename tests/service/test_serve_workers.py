"""``paccp serve --workers 2``: nothing in-process breaks with several worker processes over one database
(agents' long polls, purchases reaching them, token revocation within its bound, no token in any log)."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
from svc_procs import ADMIN, AGENT, AgentProc, Controller, wait_for

from paccp.service._store import TOKEN_TTL_S


def test_two_workers_serve_purchases_agents_and_revocation(tmp_path: Path) -> None:
    ctl = Controller(tmp_path, workers=2).start()
    ag = AgentProc(ctl, "h1", tmp_path / "state-h1").start()
    try:
        tok = ctl.admin("POST", "/v1/admin/tenants", json={"name": "acme", "model": "vbp"})["token"]
        ctl.admin(
            "POST", "/v1/admin/vms", json={"name": "vm1", "tenant": "acme", "host": "h1", "cgroup": "/vm1"}
        )
        wait_for(lambda: ag.fake().get("/vm1"), what="the VM applied as BE")
        # purchases from fresh connections (either worker); the agent's long poll (either worker) sees each
        for theta in ("100Mbit", "300Mbit"):
            with httpx.Client(base_url=ctl.url, timeout=10) as c:
                mine = [p for p in c.get("/v1/vms", headers=ctl.h(tok)).json()[0]["purchases"]]
                for p in mine:
                    assert c.delete(f"/v1/purchases/{p['id']}", headers=ctl.h(tok)).status_code == 200
            t = time.monotonic()
            ctl.buy(tok, "vm1", "mrg", theta, "2")
            want = int(theta.removesuffix("Mbit")) * 10**6
            wait_for(lambda w=want: ag.fake()["/vm1"]["theta_bps"] == w, what=f"{theta} applied")
            assert time.monotonic() - t < 2.0, (
                "a purchase should reach the agent within the long poll's wake-up"
            )
        # every worker has resolved the token (fresh connections spread over the workers)
        for _ in range(8):
            with httpx.Client(base_url=ctl.url, timeout=10) as c:
                assert c.get("/v1/me", headers=ctl.h(tok)).status_code == 200
        revoked = time.monotonic()
        ctl.admin("DELETE", "/v1/admin/tenants/acme/tokens")

        def refused_everywhere() -> bool:
            for _ in range(8):
                with httpx.Client(base_url=ctl.url, timeout=10) as c:
                    if c.get("/v1/me", headers=ctl.h(tok)).status_code != 401:
                        return False
            return True

        wait_for(
            refused_everywhere, timeout=TOKEN_TTL_S + 5, what="the revoked token refused by every worker"
        )
        assert time.monotonic() - revoked < TOKEN_TTL_S + 5
    finally:
        ag.stop()
        ctl.stop()
    for p in (ctl.log, ag.log):
        text = p.read_text(errors="replace")
        for secret in (ADMIN, AGENT, tok):
            assert secret not in text, f"a token appears in {p.name}"
