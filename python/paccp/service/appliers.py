"""Where an agent's desired state goes: the :class:`Applier` interface and its two implementations.

- :class:`DatapathApplier`: the host's BPF datapath through :mod:`paccp.datapath.paccp`, the same calls as
  ``paccp datapath vm set`` / ``vm clear`` / ``flow set --port --cgroup`` (a VM's pair, an FBP port rule),
  and the datapath's per-VM byte counter (``paccp_vm_state``) for metering.
- :class:`FakeApplier`: a datapath kept in a JSON file (it survives the agent like pinned BPF maps do),
  whose VMs "send" at a rate derived from their pair; for tests and for hosts without BPF.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any, Protocol


@dataclass(frozen=True)
class Rule:
    """An FBP port rule of a VM: the pair of its flows to or from ``port``."""

    port: int
    theta_bps: int
    omega: str


@dataclass(frozen=True)
class VmSpec:
    """What one VM should run with: its pair (VBP; BE (0, 1) when nothing is bought) and port rules."""

    name: str
    tenant: str
    cgroup: str
    theta_bps: int = 0
    omega: str = "1"
    model: str = "vbp"
    rules: tuple[Rule, ...] = field(default_factory=tuple)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> VmSpec:
        rules = tuple(Rule(int(r["port"]), int(r["theta_bps"]), str(r["omega"])) for r in d.get("rules", ()))
        return cls(
            str(d["name"]), str(d["tenant"]), str(d["cgroup"]), int(d.get("theta_bps", 0)),
            str(Decimal(str(d.get("omega", "1")))), str(d.get("model", "vbp")), rules,
        )  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["rules"] = [asdict(r) for r in self.rules]
        return d


#: A reading of a VM's byte counter: (bytes acknowledged so far, when it was read in ns since the epoch).
Sample = tuple[int, int] | None


class Applier(Protocol):
    """The datapath as an agent sees it. Every call is idempotent."""

    def apply(self, spec: VmSpec, before: VmSpec | None) -> None:
        """Make the datapath run ``spec`` (``before``: what the agent last applied for this VM)."""

    def remove(self, spec: VmSpec) -> None:
        """Take the VM out of the datapath (its flows fall back to BE)."""

    def current(self, spec: VmSpec) -> tuple[int, str] | None:
        """The (theta_bps, omega) the datapath runs the VM with now, or None if it does not know it."""

    def counter(self, spec: VmSpec) -> Sample:
        """The VM's acknowledged bytes so far (monotonic while it is applied) and when they were read,
        or None if the datapath does not know the VM."""


def _write_json(path: Path, obj: Any) -> None:
    """Atomic: a reader (or a restart after kill -9) sees the old file or the new one, never half."""
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        json.dump(obj, fh, sort_keys=True)
        fh.flush()
        os.fsync(fh.fileno())
    tmp.replace(path)


class FakeApplier:
    """A datapath in a file: each VM's pair, and a byte counter growing at a rate set by the pair.

    A VM sends at ``theta`` when it has one, else at ``base_bps`` x omega: enough for tests to see a pair
    change as a rate change and to check that metered bytes add up.
    """

    def __init__(self, path: Path, base_bps: int = 10_000_000) -> None:
        self.path = path
        self.base_bps = base_bps
        self.calls = 0

    def _load(self) -> dict[str, Any]:
        try:
            return dict(json.loads(self.path.read_text(encoding="utf-8")))
        except FileNotFoundError:
            return {}

    def _rate(self, theta_bps: int, omega: str) -> int:
        return theta_bps if theta_bps > 0 else int(self.base_bps * Decimal(omega))

    def _bytes(self, v: dict[str, Any], now: int) -> int:
        return int(v["bytes"]) + (now - int(v["since_ns"])) * int(v["rate_bps"]) // 8_000_000_000

    def apply(self, spec: VmSpec, before: VmSpec | None) -> None:
        self.calls += 1
        db = self._load()
        now = time.time_ns()
        old = db.get(spec.cgroup)
        nbytes = self._bytes(old, now) if old else 0
        db[spec.cgroup] = {"theta_bps": spec.theta_bps, "omega": spec.omega, "tenant": spec.tenant,
                           "rules": [asdict(r) for r in spec.rules], "bytes": nbytes, "since_ns": now,
                           "rate_bps": self._rate(spec.theta_bps, spec.omega)}  # fmt: skip
        _write_json(self.path, db)

    def remove(self, spec: VmSpec) -> None:
        self.calls += 1
        db = self._load()
        if db.pop(spec.cgroup, None) is not None:
            _write_json(self.path, db)

    def current(self, spec: VmSpec) -> tuple[int, str] | None:
        v = self._load().get(spec.cgroup)
        return None if v is None else (int(v["theta_bps"]), str(v["omega"]))

    def counter(self, spec: VmSpec) -> Sample:
        v = self._load().get(spec.cgroup)
        now = time.time_ns()
        return None if v is None else (self._bytes(v, now), now)

    def rate_of(self, cgroup: str) -> int | None:
        v = self._load().get(cgroup)
        return None if v is None else int(v["rate_bps"])


class DatapathApplier:
    """The BPF datapath (root): loads it if needed, then ``vm set`` / ``flow set`` through its Python API."""

    def __init__(self) -> None:
        from paccp.datapath.paccp import lifecycle

        if not lifecycle.is_loaded():
            lifecycle.load()

    def apply(self, spec: VmSpec, before: VmSpec | None) -> None:
        from paccp.datapath.paccp import lifecycle, rules, vms

        if not lifecycle.is_loaded():  # unloaded behind the agent's back: load it again
            lifecycle.load()
        if spec.model == "fbp":  # the VM itself is BE; each bought port has its rule
            vms.vm_set(spec.cgroup, 0, 1.0, tenant=spec.tenant)
        else:
            vms.vm_set(spec.cgroup, spec.theta_bps, float(spec.omega), tenant=spec.tenant)
        keep = {r.port for r in spec.rules}
        for r in before.rules if before else ():
            if r.port not in keep:
                rules.rule_clear(r.port, cgroup=spec.cgroup)
        for r in spec.rules:
            rules.rule_set(r.port, r.theta_bps, float(r.omega), cgroup=spec.cgroup, tenant=spec.tenant)

    def remove(self, spec: VmSpec) -> None:
        from paccp.datapath.paccp import rules, vms
        from paccp.errors import UserError

        for r in spec.rules:
            rules.rule_clear(r.port, cgroup=spec.cgroup)
        with contextlib.suppress(UserError):  # the cgroup is gone: the datapath closed the VM at removal
            vms.vm_clear(spec.cgroup)

    def _conf(self, spec: VmSpec) -> Any:
        from paccp.datapath.core import cgroups
        from paccp.datapath.paccp import metering
        from paccp.errors import UserError

        try:
            cgid = cgroups.resolve_cgroup(spec.cgroup).cgid
        except UserError:
            return None
        return next((v for v in metering.status_vms() if v.cgid == cgid), None)

    def current(self, spec: VmSpec) -> tuple[int, str] | None:
        from paccp.datapath.paccp.maps import omega_to_q20, q20_to_omega

        v = self._conf(spec)
        if v is None:
            return None
        q = omega_to_q20(float(v.omega))
        if q == omega_to_q20(Decimal(spec.omega)):  # the datapath holds omega in Q20: 1.3 is 1.2999992...
            return int(v.theta_bps), spec.omega
        return int(v.theta_bps), str(q20_to_omega(q).normalize())

    def counter(self, spec: VmSpec) -> Sample:
        v = self._conf(spec)
        return None if v is None else (int(v.bytes_acked), time.time_ns())
