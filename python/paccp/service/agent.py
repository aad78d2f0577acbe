"""``paccp agent``: one per host. Registers the host, watches the controller for its VMs' desired state
(long poll), reconciles it into the datapath through an :class:`~paccp.service.appliers.Applier`, meters
usage and ships it, and exports Prometheus metrics.

Crash safety (``kill -9`` at any instant), all through one state file written atomically
(``<state-dir>/agent.json``, mode 0600):

- before a pair is applied, the state file already says so (and holds the record that closes the old
  pair's metering slice); on start the agent compares that with what the datapath runs and re-applies only
  a VM that differs, so a restart changes nothing on the wire;
- a usage record is cut from the datapath's byte counter as [slice start, now) and written to the spool in
  the same atomic write that moves the slice start to now: a crash before it loses nothing (the next record
  covers the longer interval), a crash after it keeps the record;
- records are shipped from the spool until the controller acknowledges them; the ledger is idempotent on
  (tenant, record id), so a record sent twice (crash between send and acknowledgement) is counted once;
- with the controller down, the datapath keeps the last applied state and usage stays in the spool.
"""

from __future__ import annotations

import faulthandler
import json
import logging
import os
import secrets
import signal
import threading
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

from paccp.common.cos import classify
from paccp.errors import UserError
from paccp.service.appliers import Applier, Sample, VmSpec, _write_json

log = logging.getLogger("paccp.agent")

SHIP_BATCH = 500
WAIT_S = 20.0
STOP_GRACE_S = 15.0
"""How long a stop (SIGTERM / SIGINT) may take before the agent dumps its threads' stacks and exits (1)."""


class Refused(UserError):
    """The controller refused this agent (another agent holds the host, or a bad enrolment token)."""


class Metrics:
    """The agent's Prometheus metrics, in their own registry."""

    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.up = Gauge("paccp_agent_up", "1 while the agent runs", registry=r)
        self.healthy = Gauge(
            "paccp_agent_healthy",
            "1 if the applied state matches the last desired state and the loops are alive",
            registry=r,
        )
        self.connected = Gauge("paccp_agent_controller_connected", "1 if the last call succeeded", registry=r)
        self.generation = Gauge("paccp_agent_generation", "generation of the last desired state", registry=r)
        self.vms = Gauge("paccp_agent_vms_applied", "VMs applied on this host", registry=r)
        self.applies = Counter("paccp_agent_applies", "datapath changes applied", registry=r)
        self.apply_errors = Counter("paccp_agent_apply_errors", "datapath changes that failed", registry=r)
        self.buffered = Gauge("paccp_agent_usage_buffered", "usage records not yet acknowledged", registry=r)
        self.shipped = Counter("paccp_agent_usage_shipped", "usage records acknowledged", registry=r)
        self.ship_failures = Counter("paccp_agent_usage_ship_failures", "failed shipments", registry=r)
        self.rejected = Counter("paccp_agent_usage_rejected", "records the controller refused", registry=r)
        self.last_sync = Gauge(
            "paccp_agent_last_sync_timestamp_seconds", "when the desired state was last received", registry=r
        )
        self.rate = Gauge("paccp_agent_vm_rate_bps", "measured rate per VM", ["vm"], registry=r)
        self.read_errors = Counter(
            "paccp_agent_counter_read_errors", "VM byte counters the datapath could not give", registry=r
        )
        self.repairs = Counter(
            "paccp_agent_drift_repairs", "VMs re-applied because the datapath differed", registry=r
        )


class Agent:
    """The agent of one host (see the module docstring)."""

    def __init__(
        self,
        controller: str,
        host: str,
        enrol_token: str,
        state_dir: Path,
        applier: Applier,
        *,
        usage_period_s: float = 10.0,
        rate_period_s: float = 1.0,
        wait_s: float = WAIT_S,
        relay: str | None = None,
        stop_grace_s: float = STOP_GRACE_S,
    ) -> None:
        self.controller = controller.rstrip("/")
        self.stop_grace_s = stop_grace_s
        self.relay = relay.rstrip("/") if relay else None  # usage goes through it (paccp relay), if given
        self.host = host
        self._enrol = enrol_token
        self.dir = state_dir
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.path = self.dir / "agent.json"
        self.applier = applier
        self.usage_period_s = usage_period_s
        self.rate_period_s = rate_period_s
        self.wait_s = wait_s
        self.drift_period_s = 5.0
        self.metrics = Metrics()
        self.lock = threading.RLock()
        self.stop = threading.Event()
        self._timeout = httpx.Timeout(10.0, read=wait_s + 10.0)
        self.state = self._load()
        self._rates: dict[str, int] = {}
        self._last_count: dict[str, tuple[int, int]] = {}
        self._beat = time.monotonic()
        self._consistent = True
        self.refused: Refused | None = None

    # --- state ---------------------------------------------------------------------------------
    def _load(self) -> dict[str, Any]:
        try:
            st = dict(json.loads(self.path.read_text(encoding="utf-8")))
        except FileNotFoundError:
            st = {}
        except ValueError as exc:
            raise UserError(f"{self.path}: not an agent state file ({exc})") from None
        if st.get("host", self.host) != self.host:
            raise UserError(f"{self.path} belongs to host {st['host']!r}, not {self.host!r}")
        st.setdefault("host", self.host)
        st.setdefault("instance_id", "a" + secrets.token_hex(12))
        st.setdefault("session", None)
        st.setdefault("generation", -1)
        st.setdefault("applied", {})
        st.setdefault("meter", {})
        st.setdefault("spool", [])
        return st

    def _save(self) -> None:
        _write_json(self.path, self.state)
        os.chmod(self.path, 0o600)
        self.metrics.buffered.set(len(self.state["spool"]))
        self.metrics.vms.set(len(self.state["applied"]))

    def applied(self) -> dict[str, VmSpec]:
        return {k: VmSpec.from_json(v) for k, v in self.state["applied"].items()}

    # --- controller calls -------------------------------------------------------------------------
    def _auth(self, token: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {token}"}

    def _request(self, method: str, url: str, **kw: Any) -> httpx.Response:
        """One request on a client of its own, closed with it.

        The watch thread and the main loop once shared one pooled ``httpx.Client``, and in a CI run
        (2026-11-29) both stopped for good within a second of the controller coming back: no request
        left either thread again and SIGTERM could not end the agent. The suspect is httpcore's pool
        lock, which is not reentrant (httpcore 1.0.9; encode/httpcore#990): a response stream of
        that pool finalized while the same thread holds the lock deadlocks the thread, and the other
        one then waits on the lock too. A client per request shares no pool, at the cost of a
        connection per request (the agent makes a few per second at most).
        """
        with httpx.Client(timeout=self._timeout) as client:
            return client.request(method, url, **kw)

    def register(self) -> None:
        body = {"host": self.host, "instance_id": self.state["instance_id"]}
        r = self._request(
            "POST", f"{self.controller}/v1/agent/register", json=body, headers=self._auth(self._enrol)
        )
        if r.status_code in (403, 409):
            raise Refused(f"controller refused host {self.host}: {_error(r)}")
        r.raise_for_status()
        with self.lock:
            self.state["session"] = r.json()["session"]
            self._save()
        log.info("registered host %s", self.host)

    def _call(self, method: str, path: str, base: str | None = None, **kw: Any) -> httpx.Response:
        if not self.state["session"]:
            self.register()
        url = f"{base or self.controller}{path}"
        r = self._request(method, url, headers=self._auth(self.state["session"]), **kw)
        if r.status_code == 401:  # session replaced (e.g. the controller's database was reset): once more
            self.register()
            r = self._request(method, url, headers=self._auth(self.state["session"]), **kw)
        return r

    # --- reconcile ------------------------------------------------------------------------------
    def repair_drift(self) -> int:
        """Re-apply every VM whose datapath pair differs from what was last applied; return how many.

        Run on start (a crash between the state write and the datapath call; a clean restart applies
        nothing) and periodically: the datapath can lose state behind the agent's back (unloaded, host
        rebooted, someone ran ``paccp datapath vm set`` by hand), and the agent puts it back.
        """
        n = 0
        for spec in self.applied().values():
            try:
                cur, want = self.applier.current(spec), self.applier.expected(spec)
            except Exception:  # the datapath cannot be read (e.g. unloaded): apply, which loads it
                cur, want = None, (spec.scheme, spec.theta_bps, spec.omega)
            if cur != want:
                log.warning("VM %s (%s): datapath runs %s, applied %s: re-applying", spec.name, spec.scheme,
                            cur, want)  # fmt: skip
                self.metrics.repairs.inc()
                self._apply(spec, None)
                n += 1
        self._flush()
        return n

    def _flush(self) -> None:
        try:
            self.applier.flush()
        except Exception as exc:
            self.metrics.apply_errors.inc()
            self._consistent = False
            log.error("committing the datapath changes failed: %s", exc)

    def _apply(self, spec: VmSpec, before: VmSpec | None) -> None:
        try:
            self.applier.apply(spec, before)
            self.metrics.applies.inc()
        except Exception as exc:  # one VM failing must not stop the others; reported and retried
            self.metrics.apply_errors.inc()
            self._consistent = False
            log.error("applying VM %s failed: %s", spec.name, exc)

    def reconcile(self, desired: dict[str, Any]) -> None:
        """Make the datapath run ``desired`` (the controller's answer); record it before applying."""
        want = {d["name"]: VmSpec.from_json(d) for d in desired["vms"]}
        self._consistent = True
        with self.lock:
            have = self.applied()
            now = time.time_ns()
            todo: list[tuple[str, VmSpec, VmSpec | None]] = []  # (what, spec, before)
            for name, gone in have.items():
                if name not in want:
                    self._close(gone, now, reopen=None)
                    del self.state["applied"][name]
                    todo.append(("remove", gone, None))
            for name, spec in want.items():
                old = have.get(name)
                if old == spec:
                    continue
                if old is not None:
                    self._close(old, now, reopen=spec)
                else:
                    self._open(spec, now)
                self.state["applied"][name] = spec.to_json()
                todo.append(("apply", spec, old))
            self.state["generation"] = int(desired["generation"])
            self._save()
        for what, spec, before in todo:
            if what == "remove":
                try:
                    self.applier.remove(spec)
                    self.metrics.applies.inc()
                except Exception as exc:
                    self.metrics.apply_errors.inc()
                    log.error("removing VM %s failed: %s", spec.name, exc)
            else:
                self._apply(spec, before)
        self._flush()
        self.metrics.generation.set(int(desired["generation"]))
        self.metrics.last_sync.set(time.time())

    # --- metering -------------------------------------------------------------------------------
    def _keys(self, spec: VmSpec) -> list[tuple[str, int | None, int, str]]:
        """Meter entries of a VM: the VM itself (its bytes, its pair) and one per bought port (FBP)."""
        out: list[tuple[str, int | None, int, str]] = [(f"vm:{spec.name}", None, spec.theta_bps, spec.omega)]
        out += [(f"rule:{spec.name}:{r.port}", r.port, r.theta_bps, r.omega) for r in spec.rules]
        return out

    def _open(self, spec: VmSpec, now: int, sample: Sample | str = "read") -> None:
        smp = self.applier.counter(spec) if isinstance(sample, str) else sample
        for key, port, theta, omega in self._keys(spec):
            vm_level = port is None and smp is not None
            self.state["meter"][key] = {
                "vm": spec.name, "tenant": spec.tenant, "cgroup": spec.cgroup, "model": spec.model,
                "port": port, "theta_bps": theta, "omega": omega,
                "start_ns": smp[1] if vm_level and smp else now, "bytes0": smp[0] if vm_level and smp else 0,
            }  # fmt: skip

    def _close(self, spec: VmSpec, now: int, reopen: VmSpec | None) -> None:
        smp = self.applier.counter(spec)
        for key, *_ in self._keys(spec):
            m = self.state["meter"].pop(key, None)
            if m is not None:
                self._cut(m, now, smp)
        if reopen is not None:
            self._open(reopen, now, smp)

    def _cut(self, m: dict[str, Any], now: int, sample: Sample) -> None:
        """Spool the record of [m.start_ns, end) and move the slice start to end (caller saves).

        A VM-level slice ends when its byte counter was read (so its bytes are exactly those of the
        interval); a port rule's slice (no bytes of its own) ends ``now``.
        """
        vm_level = m["port"] is None and sample is not None
        end = sample[1] if vm_level and sample else now
        if end <= m["start_ns"]:
            return
        nbytes = max(0, sample[0] - int(m["bytes0"])) if vm_level and sample else 0
        omega = Decimal(m["omega"])
        cos = classify(m["theta_bps"], omega)
        port = m["port"]
        self.state["spool"].append(
            {
                "record_id": f"agent:{self.host}:{m['vm']}:{'vm' if port is None else port}:{m['start_ns']}",
                "source": "datapath",
                "tenant": m["tenant"],
                "vm": m["vm"],
                "flow_id": None if port is None else f"port:{port}",
                "cos": cos,
                "theta_bps": m["theta_bps"] if cos == "mrg" else 0,
                "omega": m["omega"],
                "start_ns": m["start_ns"],
                "end_ns": end,
                "bytes": nbytes,
            }
        )
        m["start_ns"] = end
        if vm_level and sample:
            m["bytes0"] = sample[0]

    def _counter(self, spec: VmSpec) -> tuple[bool, Sample]:
        """(read, the VM's counter sample): a datapath that cannot give it (a map read that fails, a
        file caught half-written) costs this cut or sample of that VM only, not the agent (it once
        ended the agent). The VM's slice stays open, so its next cut covers the time."""
        try:
            return True, self.applier.counter(spec)
        except Exception as exc:
            self.metrics.read_errors.inc()
            log.warning("VM %s: reading its byte counter failed: %s", spec.name, exc)
            return False, None

    def cut_usage(self) -> None:
        """Close every open metering slice into the spool (one atomic state write)."""
        with self.lock:
            specs = self.applied()
            now = time.time_ns()
            for spec in specs.values():
                read, smp = self._counter(spec)
                if not read:
                    continue
                for key, *_ in self._keys(spec):
                    m = self.state["meter"].get(key)
                    if m is None:  # applied before metering existed for it: start now
                        self._open(spec, now, smp)
                    else:
                        self._cut(m, now, smp)
            self._save()

    def sample_rates(self) -> None:
        for spec in self.applied().values():
            _read, smp = self._counter(spec)
            if smp is None:
                continue
            prev = self._last_count.get(spec.name)
            self._last_count[spec.name] = (smp[1], smp[0])
            if prev is not None and smp[1] > prev[0]:
                r = max(0, (smp[0] - prev[1]) * 8 * 10**9 // (smp[1] - prev[0]))
                self._rates[spec.name] = r
                self.metrics.rate.labels(vm=spec.name).set(r)

    def ship(self) -> bool:
        """Send the spool (and the rates) until acknowledged; False if the controller could not take it."""
        while True:
            with self.lock:
                batch = list(self.state["spool"][:SHIP_BATCH])
            rates = dict(self._rates)
            try:
                r = self._call(
                    "POST", "/v1/agent/report", self.relay, json={"records": batch, "rates": rates}
                )
            except (httpx.HTTPError, OSError) as exc:
                self.metrics.connected.set(0)
                self.metrics.ship_failures.inc()
                log.warning("controller unreachable, %d records buffered: %s", len(self.state["spool"]), exc)
                return False
            if r.status_code >= 500 or r.status_code in (408, 429):
                self.metrics.ship_failures.inc()
                return False
            self.metrics.connected.set(1)
            if r.status_code >= 400:  # refused for good: keep them aside, never resend, never drop silently
                self.metrics.rejected.inc(len(batch))
                log.error("controller refused %d usage records: %s", len(batch), _error(r))
                with (self.dir / "rejected.jsonl").open("a", encoding="utf-8") as fh:
                    for rec in batch:
                        fh.write(json.dumps(rec, sort_keys=True) + "\n")
            else:
                self.metrics.shipped.inc(len(batch))
            with self.lock:
                del self.state["spool"][: len(batch)]
                self._save()
            self._rates = {}
            if not self.state["spool"]:
                return True

    # --- loops ------------------------------------------------------------------------------------
    def watch_loop(self) -> None:
        backoff = 0.2
        while not self.stop.is_set():
            try:
                r = self._call(
                    "GET",
                    "/v1/agent/desired",
                    params={"since": self.state["generation"], "wait": self.wait_s},
                )
                r.raise_for_status()
                self.metrics.connected.set(1)
                self.reconcile(r.json())
                backoff = 0.2
            except Refused as exc:
                log.error("%s", exc)
                self.refused = exc
                self.stop.set()
                return
            except (httpx.HTTPError, OSError, ValueError, KeyError) as exc:
                self.metrics.connected.set(0)
                log.warning("watch: %s (keeping the applied state)", type(exc).__name__)
                self.stop.wait(backoff)
                backoff = min(backoff * 2, 5.0)

    def _on_signal(self, *_: Any) -> None:
        """SIGTERM / SIGINT: stop, and if the stop has not finished within :attr:`stop_grace_s` (a thread
        stuck for good), write every thread's stack to stderr and exit with status 1 (faulthandler's
        watchdog, a thread of its own). The spool is on disk and ships at the next start."""
        self.stop.set()
        faulthandler.dump_traceback_later(self.stop_grace_s, exit=True)

    def run(self, metrics_port: int = 0, metrics_addr: str = "127.0.0.1") -> None:
        """Run until SIGTERM/SIGINT (or :attr:`stop`); a last cut and shipment on the way out."""
        if metrics_port:
            start_http_server(metrics_port, addr=metrics_addr, registry=self.metrics.registry)
        self.metrics.up.set(1)
        self.repair_drift()
        with self.lock:
            self._save()
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, self._on_signal)
        watcher = threading.Thread(target=self.watch_loop, name="paccp-agent-watch", daemon=True)
        watcher.start()
        next_cut = time.monotonic() + self.usage_period_s
        next_rate = time.monotonic()
        next_ship = 0.0
        next_drift = time.monotonic() + self.drift_period_s
        backoff = 0.5
        while not self.stop.is_set():
            now = time.monotonic()
            if now >= next_rate:
                self.sample_rates()
                next_rate = now + self.rate_period_s
                next_ship = min(next_ship, now)  # rates travel with the next shipment
            if now >= next_drift:
                with self.lock:
                    self.repair_drift()
                next_drift = now + self.drift_period_s
            if now >= next_cut:
                self.cut_usage()
                next_cut = now + self.usage_period_s
                next_ship = min(next_ship, now)
            if now >= next_ship and (self.state["spool"] or self._rates):
                if self.ship():
                    backoff = 0.5
                    next_ship = float("inf")
                else:
                    next_ship = now + backoff
                    backoff = min(backoff * 2, 10.0)
            if next_ship == float("inf") and (self.state["spool"] or self._rates):
                next_ship = now
            self._beat = now
            self.metrics.healthy.set(1 if self._consistent and watcher.is_alive() else 0)
            self.stop.wait(0.1)
        try:
            if self.refused is not None:
                raise self.refused
            self.cut_usage()
            self.ship()
            self.metrics.up.set(0)
        finally:
            faulthandler.cancel_dump_traceback_later()


def _error(r: httpx.Response) -> str:
    try:
        return str(r.json().get("error", r.status_code))
    except ValueError:
        return f"HTTP {r.status_code}"
