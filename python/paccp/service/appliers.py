"""Where an agent's desired state goes: the :class:`Applier` interface and its two implementations.

- :class:`paccp.service.schemes.DatapathApplier`: the host's datapaths, each VM through the driver of the
  scheme it bought (PACCP's BPF maps, SoftBW, MPTCP BG/WC, PACCP enforced at the host's port);
- :class:`FakeApplier`: a datapath kept in a JSON file (it survives the agent like pinned BPF maps do),
  whose VMs "send" at a rate derived from their pair; for tests and for hosts without BPF.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Hashable
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
    """What one VM should run with: its pair (VBP; BE (0, 1) when nothing is bought) and port rules, and
    the scheme it was bought in (paccp, softbw with its guarantee kind, mptcp_bgwc, paccp_host)."""

    name: str
    tenant: str
    cgroup: str
    theta_bps: int = 0
    omega: str = "1"
    model: str = "vbp"
    rules: tuple[Rule, ...] = field(default_factory=tuple)
    scheme: str = "paccp"
    guarantee: str | None = None
    rate_bps: int | None = None

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> VmSpec:
        """From the controller's desired state, or an agent state file (older ones have no scheme)."""
        rules = tuple(Rule(int(r["port"]), int(r["theta_bps"]), str(r["omega"])) for r in d.get("rules", ()))
        g, rate = d.get("guarantee"), d.get("rate_bps")
        return cls(
            str(d["name"]), str(d["tenant"]), str(d["cgroup"]), int(d.get("theta_bps", 0)),
            str(Decimal(str(d.get("omega", "1")))), str(d.get("model", "vbp")), rules,
            str(d.get("scheme") or "paccp"), None if g is None else str(g),
            None if rate is None else int(rate),
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

    def current(self, spec: VmSpec) -> Hashable | None:
        """What the datapath runs the VM with now (e.g. its (theta_bps, omega)), or None if it does not
        know the VM."""

    def expected(self, spec: VmSpec) -> Hashable:
        """What :meth:`current` says once ``spec`` is applied (the agent re-applies a VM that differs)."""

    def counter(self, spec: VmSpec) -> Sample:
        """The VM's acknowledged bytes so far (monotonic while it is applied) and when they were read,
        or None if the datapath does not know the VM."""

    def flush(self) -> None:
        """Commit what apply/remove deferred; the agent calls it after each reconcile or repair pass."""


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
                           "scheme": spec.scheme, "guarantee": spec.guarantee,
                           "rules": [asdict(r) for r in spec.rules], "bytes": nbytes, "since_ns": now,
                           "rate_bps": self._rate(spec.theta_bps, spec.omega)}  # fmt: skip
        _write_json(self.path, db)

    def remove(self, spec: VmSpec) -> None:
        self.calls += 1
        db = self._load()
        if db.pop(spec.cgroup, None) is not None:
            _write_json(self.path, db)

    def current(self, spec: VmSpec) -> Hashable | None:
        v = self._load().get(spec.cgroup)
        return None if v is None else (int(v["theta_bps"]), str(v["omega"]))

    def expected(self, spec: VmSpec) -> Hashable:
        return (spec.theta_bps, spec.omega)

    def flush(self) -> None:
        return None

    def counter(self, spec: VmSpec) -> Sample:
        v = self._load().get(spec.cgroup)
        now = time.time_ns()
        return None if v is None else (self._bytes(v, now), now)

    def rate_of(self, cgroup: str) -> int | None:
        v = self._load().get(cgroup)
        return None if v is None else int(v["rate_bps"])
