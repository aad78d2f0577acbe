"""What a purchase becomes on a host: one driver per scheme, each over that scheme's own datapath library.

The desired state an agent receives names each VM's ``scheme`` (what the tenant bought); this module is the
one place that maps it to datapath calls (:data:`DRIVERS`, one registration per scheme):

============== ============================================================ ============================
scheme         datapath calls (the same as the CLI's)                       state compared for drift
============== ============================================================ ============================
``paccp``      :mod:`paccp.datapath.paccp` ``vms.vm_set(cgroup, theta,      the VM's (theta, omega)
               omega)``, FBP ``rules.rule_set(port, ...)``                  in the BPF maps
``softbw``     :mod:`paccp.datapath.softbw.control` ``vm_set(addr, index,   (B, the VM's classes) in
               B)``: strict B = theta, dynamic B = S/T (the quoted rate),   ``softbw_vms``
               fair and none B = 1 bit/s (only the satisfied class)
``mptcp_bgwc`` :mod:`paccp.datapath.mptcp.control` ``vm_set(cgroup, A_l)``  A_l in ``bgwc_vm``
               with A_l = omega, ``addr_set(addr, "bg")`` and
               ``addr_set(wc_addr, "wc")``
``paccp_host`` :class:`paccp.datapath.host.enforcer.HostEnforcer` on the    the VM's (theta, omega) in
               host's port: every such VM of the host, by its interface     the running enforcer
============== ============================================================ ============================

What the controller cannot know (the host's port, a VM's interface, addresses and SoftBW class index)
comes from the agent's host file (``--host-config``, :class:`HostFacts`). A VM whose scheme changes is
taken out of the old scheme's datapath before it enters the new one. Each driver's module is looked up
when first used, so tests replace it at that boundary (``DatapathApplier(facts, modules={...})``).
"""

from __future__ import annotations

import contextlib
import importlib
import shutil
import time
import tomllib
from collections.abc import Callable, Hashable
from decimal import Decimal
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from paccp.errors import UserError, validation_error
from paccp.service.appliers import Sample, VmSpec

#: SoftBW's B for a VM without a guarantee (fair, none): every packet is over it, so the VM sends only
#: in its satisfied class, round-robin with the other VMs' traffic above their guarantees.
NO_GUARANTEE_BPS = 1


def mptcp_level(omega: Decimal) -> int:
    """The MPTCP competition level A_l a purchase's omega stands for (the controller refuses to sell any
    other; the datapath takes 1..1000)."""
    if not omega.is_finite() or omega != omega.to_integral_value() or not 1 <= omega <= 1000:
        raise UserError(f"an MPTCP competition level A_l (omega) must be a whole number 1..1000, not {omega}")
    return int(omega)


class VmFacts(BaseModel):
    """A VM as only its host knows it."""

    model_config = ConfigDict(extra="forbid")
    ifname: str | None = Field(default=None, max_length=15, description="host-side interface (paccp_host)")
    addr: str | None = Field(default=None, max_length=15, description="source IPv4 (softbw; mptcp BG)")
    wc_addr: str | None = Field(default=None, max_length=15, description="mptcp: the WC subflows' IPv4")
    index: int | None = Field(default=None, ge=1, le=255, description="softbw: classes 1:(100+i), 1:(200+i)")


class HostFacts(BaseModel):
    """The agent's host file (TOML): the host's port and its VMs' interfaces and addresses."""

    model_config = ConfigDict(extra="forbid")
    port: str | None = Field(default=None, max_length=15, description="paccp_host: the port to the fabric")
    port_rate: str | None = Field(default=None, max_length=32, description='paccp_host: e.g. "10Gbit"')
    netns: str | None = Field(default=None, max_length=64, description="the host's network namespace")
    vm: dict[str, VmFacts] = Field(default_factory=dict, description="by VM name, as the controller has it")

    @classmethod
    def load(cls, path: Path | None) -> HostFacts:
        if path is None:
            return cls()
        try:
            return cls.model_validate(tomllib.loads(path.read_text(encoding="utf-8")))
        except OSError as exc:
            raise UserError(f"{path}: cannot read ({exc.strerror})") from None
        except tomllib.TOMLDecodeError as exc:
            raise UserError(f"{path}: not TOML ({exc})") from None
        except ValidationError as exc:
            loc, msg = validation_error(exc, "host file")
            raise UserError(f"{path}: {loc}: {msg}") from None

    def of(self, spec: VmSpec, *need: str) -> VmFacts:
        """The VM's facts, with every field of ``need`` given (else a one-line error naming them)."""
        f = self.vm.get(spec.name, VmFacts())
        missing = [n for n in need if getattr(f, n) is None]
        if missing:
            raise UserError(f"VM {spec.name} bought {spec.scheme}: the host file has no {', '.join(missing)}"
                            f" for it ([vm.{spec.name}] in --host-config)")  # fmt: skip
        return f


class Driver(Protocol):
    """One scheme's datapath as the agent drives it. Every call is idempotent."""

    def apply(self, spec: VmSpec, before: VmSpec | None) -> None: ...

    def remove(self, spec: VmSpec) -> None: ...

    def current(self, spec: VmSpec) -> Hashable | None:
        """What the datapath runs the VM with now (None: not there)."""

    def expected(self, spec: VmSpec) -> Hashable:
        """What :meth:`current` returns once ``spec`` is applied."""

    def counter(self, spec: VmSpec) -> Sample: ...

    def flush(self) -> None:
        """Commit what apply/remove deferred (a driver that rebuilds per host does it once)."""


Modules = Callable[[str], Any]


class _Driver:
    """What every driver shares: the host file, the datapath modules, nothing deferred."""

    def __init__(self, facts: HostFacts, mod: Modules) -> None:
        self.facts, self.mod = facts, mod

    def loaded(self, name: str) -> Any:
        """The datapath module ``name``, loaded first if it is not (first use, or unloaded behind the
        agent's back)."""
        m = self.mod(name)
        if not m.is_loaded():
            m.load()
        return m

    def flush(self) -> None:
        return None


class PaccpDriver(_Driver):
    """PACCP's BPF maps: the VM's pair and its FBP port rules (``paccp datapath vm set`` / ``flow set``)."""

    def apply(self, spec: VmSpec, before: VmSpec | None) -> None:
        vms, rules = self.mod("paccp.datapath.paccp.vms"), self.mod("paccp.datapath.paccp.rules")
        self.loaded("paccp.datapath.paccp.lifecycle")
        if spec.model == "fbp":  # the VM itself is BE; each bought port has its rule
            vms.vm_set(spec.cgroup, 0, 1.0, tenant=spec.tenant)
        else:
            vms.vm_set(spec.cgroup, spec.theta_bps, float(spec.omega), tenant=spec.tenant)
        keep = {r.port for r in spec.rules}
        for r in before.rules if before and before.scheme == spec.scheme else ():
            if r.port not in keep:
                rules.rule_clear(r.port, cgroup=spec.cgroup)
        for r in spec.rules:
            rules.rule_set(r.port, r.theta_bps, float(r.omega), cgroup=spec.cgroup, tenant=spec.tenant)

    def remove(self, spec: VmSpec) -> None:
        vms, rules = self.mod("paccp.datapath.paccp.vms"), self.mod("paccp.datapath.paccp.rules")
        for r in spec.rules:
            rules.rule_clear(r.port, cgroup=spec.cgroup)
        with contextlib.suppress(UserError):  # the cgroup is gone: the datapath closed the VM at removal
            vms.vm_clear(spec.cgroup)

    def _conf(self, spec: VmSpec) -> Any:
        cgroups, metering = self.mod("paccp.datapath.core.cgroups"), self.mod("paccp.datapath.paccp.metering")
        try:
            cgid = cgroups.resolve_cgroup(spec.cgroup).cgid
        except UserError:
            return None
        return next((v for v in metering.status_vms() if v.cgid == cgid), None)

    def expected(self, spec: VmSpec) -> Hashable:
        return (spec.theta_bps, spec.omega)

    def current(self, spec: VmSpec) -> Hashable | None:
        maps = self.mod("paccp.datapath.paccp.maps")
        v = self._conf(spec)
        if v is None:
            return None
        q = maps.omega_to_q20(float(v.omega))
        if q == maps.omega_to_q20(Decimal(spec.omega)):  # the datapath holds omega in Q20: 1.3 is 1.2999992
            return int(v.theta_bps), spec.omega
        return int(v.theta_bps), str(maps.q20_to_omega(q).normalize())

    def counter(self, spec: VmSpec) -> Sample:
        v = self._conf(spec)
        return None if v is None else (int(v.bytes_acked), time.time_ns())


class SoftbwDriver(_Driver):
    """SoftBW at the host's port: the VM's guarantee B in ``softbw_vms`` (``paccp datapath softbw vm``).
    The port's htb (its classes per VM index) is the host's set-up, as ``softbw.control.port_setup`` makes."""

    def _ctl(self) -> Any:
        return self.loaded("paccp.datapath.softbw.control")

    @staticmethod
    def guarantee_bps(spec: VmSpec) -> int:
        """B of the VM's guarantee kind (the module docstring's table)."""
        if spec.guarantee == "strict":
            return spec.theta_bps
        if spec.guarantee == "dynamic" and spec.rate_bps:
            return spec.rate_bps  # S/T: what sends S bytes by the deadline, the rate the quote assumed
        return NO_GUARANTEE_BPS

    def expected(self, spec: VmSpec) -> Hashable:
        f = self.facts.of(spec, "addr", "index")
        return (self.guarantee_bps(spec), self.mod("paccp.datapath.softbw.control").unsat_class(f.index))

    def apply(self, spec: VmSpec, before: VmSpec | None) -> None:
        f = self.facts.of(spec, "addr", "index")
        assert f.addr is not None and f.index is not None
        self._ctl().vm_set(f.addr, f.index, self.guarantee_bps(spec))

    def remove(self, spec: VmSpec) -> None:
        f = self.facts.of(spec, "addr")
        assert f.addr is not None
        self._ctl().vm_clear(f.addr)

    def _entry(self, spec: VmSpec) -> dict[str, Any] | None:
        """The VM's entry in the SoftBW map (None: not there, or the host file does not say its address)."""
        addr = self.facts.vm[spec.name].addr if spec.name in self.facts.vm else None
        st = self.mod("paccp.datapath.softbw.control").status() if addr else {}
        return next((v for v in st.get("vms", ()) if v["addr"] == addr), None)

    def current(self, spec: VmSpec) -> Hashable | None:
        v = self._entry(spec)
        return None if v is None else (int(v["guarantee_bps"]), str(v["unsat_class"]))

    def counter(self, spec: VmSpec) -> Sample:
        v = self._entry(spec)
        return None if v is None else (int(v["unsat_bytes"]) + int(v["sat_bytes"]), time.time_ns())


class MptcpDriver(_Driver):
    """MPTCP BG/WC: the VM's WC competition level A_l (= omega) on its cgroup, its addresses' classes
    (``paccp datapath mptcp vm`` / ``addr``); the counter is the bytes its BG and WC subflows delivered
    (``bgwc_bytes``, :func:`paccp.datapath.mptcp.control.vm_bytes`)."""

    def _ctl(self) -> Any:
        return self.loaded("paccp.datapath.mptcp.control")

    @staticmethod
    def level(spec: VmSpec) -> int:
        return mptcp_level(Decimal(spec.omega))

    def expected(self, spec: VmSpec) -> Hashable:
        return self.level(spec)

    def apply(self, spec: VmSpec, before: VmSpec | None) -> None:
        f = self.facts.of(spec, "addr", "wc_addr")
        assert f.addr is not None and f.wc_addr is not None
        ctl = self._ctl()
        ctl.addr_set(f.addr, "bg")
        ctl.addr_set(f.wc_addr, "wc")
        ctl.vm_set(spec.cgroup, self.level(spec))

    def remove(self, spec: VmSpec) -> None:
        f = self.facts.of(spec, "addr", "wc_addr")
        assert f.addr is not None and f.wc_addr is not None
        ctl = self._ctl()
        ctl.addr_clear(f.addr)
        ctl.addr_clear(f.wc_addr)
        with contextlib.suppress(UserError):  # the cgroup is gone
            ctl.vm_clear(spec.cgroup)

    def current(self, spec: VmSpec) -> Hashable | None:
        ctl = self.mod("paccp.datapath.mptcp.control")
        st = ctl.status()
        cgroups = self.mod("paccp.datapath.core.cgroups")
        try:
            path = cgroups.resolve_cgroup(spec.cgroup).path
        except UserError:
            return None
        v = next((v for v in st.get("vms", ()) if str(v["cgroup"]) in (spec.cgroup, str(path))), None)
        return None if v is None else int(v["a_l"])

    def counter(self, spec: VmSpec) -> Sample:
        try:
            n = self.mod("paccp.datapath.mptcp.control").vm_bytes(spec.cgroup)
        except UserError:  # the cgroup is gone
            return None
        return None if n is None else (int(n), time.time_ns())


class HostDriver(_Driver):
    """PACCP enforced at the host's port (``paccp datapath host-enforce``): one
    :class:`~paccp.datapath.host.enforcer.HostEnforcer` over every ``paccp_host`` VM of the host, rebuilt
    (once per reconcile, in :meth:`flush`) when that set or a pair changes. Its counters restart with it:
    the driver carries them over a rebuild, so a VM's counter stays monotonic while the agent runs."""

    def __init__(self, facts: HostFacts, mod: Modules) -> None:
        super().__init__(facts, mod)
        self.want: dict[str, VmSpec] = {}
        self.running: dict[str, VmSpec] = {}
        self.enforcer: Any = None
        self.base: dict[str, int] = {}  # bytes sent under enforcers closed since the agent started

    def expected(self, spec: VmSpec) -> Hashable:
        return (spec.theta_bps, spec.omega)

    def apply(self, spec: VmSpec, before: VmSpec | None) -> None:
        self.facts.of(spec, "ifname")
        if self.facts.port is None or self.facts.port_rate is None:
            raise UserError(f"VM {spec.name} bought paccp_host: the host file has no port and port_rate")
        self.want[spec.name] = spec

    def remove(self, spec: VmSpec) -> None:
        self.want.pop(spec.name, None)

    def flush(self) -> None:
        if self.want == self.running and (self.enforcer is not None or not self.want):
            return
        from paccp.units import parse_rate_bps

        if self.enforcer is not None:
            for name, u in self.enforcer.usage().items():
                self.base[name] = self.base.get(name, 0) + int(u.sent_bytes)
            self.enforcer.close()
            self.enforcer, self.running = None, {}
        if not self.want:
            return
        assert self.facts.port is not None and self.facts.port_rate is not None
        mod = self.mod("paccp.datapath.host.enforcer")
        reap_host_pins(Path(mod.PIN_ROOT))
        enf = mod.HostEnforcer(
            self.facts.port, parse_rate_bps(self.facts.port_rate), self.facts.netns or None
        )
        for name, spec in sorted(self.want.items()):
            f = self.facts.of(spec, "ifname")
            enf.add_vm(name, f.ifname, spec.theta_bps, float(spec.omega))
        enf.apply()
        self.enforcer, self.running = enf, dict(self.want)

    def current(self, spec: VmSpec) -> Hashable | None:
        run = self.running.get(spec.name) if self.enforcer is not None else None
        return None if run is None else (run.theta_bps, run.omega)

    def counter(self, spec: VmSpec) -> Sample:
        if self.enforcer is None or spec.name not in self.running:
            return None
        u = self.enforcer.usage()[spec.name]
        return self.base.get(spec.name, 0) + int(u.sent_bytes), time.time_ns()


def reap_host_pins(root: Path) -> list[Path]:
    """Remove the pinned programs of host enforcers whose process is gone (``<pid>-<id>`` under ``root``):
    an agent that stopped leaves its enforcer on the wire, and the agent after it pins its own."""
    gone = []
    for d in root.iterdir() if root.is_dir() else ():
        pid = d.name.split("-", 1)[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(d, ignore_errors=True)
            gone.append(d)
    return gone


#: The one registration per scheme: the purchase's ``scheme`` -> its driver.
DRIVERS: dict[str, Callable[[HostFacts, Modules], Driver]] = {
    "paccp": PaccpDriver,
    "softbw": SoftbwDriver,
    "mptcp_bgwc": MptcpDriver,
    "paccp_host": HostDriver,
}


class DatapathApplier:
    """The host's datapaths (root): each VM through the driver of its scheme (:data:`DRIVERS`)."""

    def __init__(self, facts: HostFacts | None = None, modules: dict[str, Any] | None = None) -> None:
        fakes = modules or {}

        def mod(name: str) -> Any:
            return fakes[name] if name in fakes else importlib.import_module(name)

        self.facts = facts or HostFacts()
        self.drivers: dict[str, Driver] = {k: make(self.facts, mod) for k, make in DRIVERS.items()}

    def driver(self, spec: VmSpec) -> Driver:
        d = self.drivers.get(spec.scheme)
        if d is None:
            raise UserError(
                f"VM {spec.name}: no driver for scheme {spec.scheme!r} (known: {sorted(DRIVERS)})"
            )
        return d

    def apply(self, spec: VmSpec, before: VmSpec | None) -> None:
        if before is not None and before.scheme != spec.scheme and before.scheme in self.drivers:
            self.drivers[before.scheme].remove(before)  # out of the old scheme's datapath first
            self.drivers[before.scheme].flush()
        self.driver(spec).apply(spec, before)

    def remove(self, spec: VmSpec) -> None:
        self.driver(spec).remove(spec)

    def current(self, spec: VmSpec) -> Hashable | None:
        return self.driver(spec).current(spec)

    def expected(self, spec: VmSpec) -> Hashable:
        return self.driver(spec).expected(spec)

    def counter(self, spec: VmSpec) -> Sample:
        return self.driver(spec).counter(spec)

    def flush(self) -> None:
        for d in self.drivers.values():
            d.flush()
