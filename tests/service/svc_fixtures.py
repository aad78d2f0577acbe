"""Helpers of the service tests: tokens and a client wrapper for the in-process controller."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fastapi.testclient import TestClient

ADMIN = "admin-secret-for-tests-0123456789"
AGENT = "agent-enrolment-secret-0123456789"


@dataclass
class Ctl:
    client: TestClient
    db: Path

    def h(self, token: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {token}"}

    @property
    def admin(self) -> dict[str, str]:
        return self.h(ADMIN)

    def tenant(self, name: str, model: str = "vbp") -> str:
        r = self.client.post("/v1/admin/tenants", json={"name": name, "model": model}, headers=self.admin)
        assert r.status_code == 201, r.text
        return str(r.json()["token"])

    def vm(self, name: str, tenant: str, host: str = "h1", cgroup: str | None = None) -> None:
        body = {"name": name, "tenant": tenant, "host": host, "cgroup": cgroup or f"/{name}"}
        r = self.client.post("/v1/admin/vms", json=body, headers=self.admin)
        assert r.status_code == 201, r.text

    def agent(self, host: str = "h1", instance: str = "agent-one") -> str:
        r = self.client.post(
            "/v1/agent/register", json={"host": host, "instance_id": instance}, headers=self.h(AGENT)
        )
        assert r.status_code == 200, r.text
        return str(r.json()["session"])

    def buy(self, token: str, vm: str, cos: str = "mrg", theta: str = "100Mbit", omega: str = "2",
            **extra: object) -> dict:  # fmt: skip
        q = self.client.get(
            "/v1/quote", params={"cos": cos, "theta": theta, "omega": omega}, headers=self.h(token)
        )
        assert q.status_code == 200, q.text
        body = {"vm": vm, "cos": cos, "theta": theta, "omega": omega, "max_per_hour": q.json()["per_hour"]}
        r = self.client.post("/v1/purchases", json={**body, **extra}, headers=self.h(token))
        assert r.status_code == 201, r.text
        return dict(r.json())
