"""Usage records of the MPTCP BG/WC and SoftBW testbeds, in PACCP's schema (:mod:`paccp.common.usage`).

Each measured window of an experiment gives, per VM (server):

- MPTCP BG/WC: one record for its BG subflows (``cos`` mrg, theta = the VM's guarantee, ``guarantee``
  strict, ``flow_id`` ``<vm>/bg``) and one for its WC subflows (``cos`` be, theta 0, ``flow_id``
  ``<vm>/wc``), bytes = the subflows' acknowledged bytes over the window;
- SoftBW: one VM-level record (``cos`` mrg, theta = B, ``guarantee`` strict), bytes = what the receiver
  got from the VM over the window.

``source`` is ``datapath``, the tenant ``testbed``; record ids name the experiment, the run, the VM and
the window start (``tb:<experiment>:<run>:<vm>[:<class>]:<start_ns>``), so a re-run gives new ids. The
file is ``usage.jsonl`` next to the experiment's ``summary.json`` (``paccp bill ingest`` reads it).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from paccp.common.usage import UsageRecord, write_usage

TENANT = "testbed"


@dataclass(frozen=True)
class Window:
    """A measured window in ns since the Unix epoch."""

    start_ns: int
    end_ns: int


def mptcp_records(
    experiment: str,
    run: str,
    window: Window,
    guarantees_bps: dict[str, int],
    bg_bps: dict[str, float],
    wc_bps: dict[str, float],
) -> list[UsageRecord]:
    """BG and WC records per server of one MPTCP run window (rates in bit/s over the window)."""
    span_s = (window.end_ns - window.start_ns) / 1e9
    out = []
    for vm, g in guarantees_bps.items():
        for cls, rate, cos, theta, kind in (
            ("bg", bg_bps.get(vm, 0.0), "mrg", g, "strict"),
            ("wc", wc_bps.get(vm, 0.0), "be", 0, "none"),
        ):
            out.append(
                UsageRecord(
                    record_id=f"tb:{experiment}:{run}:{vm}:{cls}:{window.start_ns}",
                    source="datapath",
                    tenant=TENANT,
                    vm=vm,
                    flow_id=f"{vm}/{cls}",
                    cos=cos,  # type: ignore[arg-type]
                    theta_bps=int(theta),
                    omega=Decimal(1),
                    start_ns=window.start_ns,
                    end_ns=window.end_ns,
                    bytes=max(0, round(rate * span_s / 8)),
                    guarantee=kind,  # type: ignore[arg-type]
                )
            )
    return out


def softbw_records(
    experiment: str, run: str, window: Window, guarantee_bps: int | None, goodput_bps: dict[str, float]
) -> list[UsageRecord]:
    """One record per VM of one SoftBW (or best-effort: ``guarantee_bps`` None) run window."""
    span_s = (window.end_ns - window.start_ns) / 1e9
    return [
        UsageRecord(
            record_id=f"tb:{experiment}:{run}:{vm}:{window.start_ns}",
            source="datapath",
            tenant=TENANT,
            vm=vm,
            cos="be" if guarantee_bps is None else "mrg",
            theta_bps=0 if guarantee_bps is None else int(guarantee_bps),
            omega=Decimal(1),
            start_ns=window.start_ns,
            end_ns=window.end_ns,
            bytes=max(0, round(rate * span_s / 8)),
            guarantee="none" if guarantee_bps is None else "strict",
        )
        for vm, rate in goodput_bps.items()
    ]


def write(out: Path, records: list[UsageRecord]) -> Path:
    """``out/usage.jsonl`` (the directory is created)."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "usage.jsonl"
    write_usage(records, path)
    return path
