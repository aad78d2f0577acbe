"""The usage-record schema: the one format in which metered bandwidth use travels to billing.

Producers: the simulator (one record per flow, or per parameter slice of a flow), the Linux datapath's
metering (one record per flow or cgroup per parameter slice). Consumer: ``paccp bill ingest``.

A record covers one interval during which one flow (or one VM, when ``flow_id`` is null) ran with one
(theta, omega) pair. A flow whose pair changed at run time (FBP upgrade/downgrade) produces one record per
slice, with the same ``flow_id`` and consecutive intervals. Times are integer nanoseconds since the Unix
epoch (UTC); rates are integer bit/s; ``omega`` is a decimal number (fractional under VBP splitting).

Files: JSON Lines (``.jsonl``, one record per line) or Parquet (``.parquet``), same field names.
``record_id`` is unique per record and stable across re-exports, which is what makes ingestion idempotent:
the same ``record_id`` ingested twice is charged once; the same ``record_id`` with different content is
rejected. See ``docs/usage-records.md``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_serializer, model_validator

from paccp.cos import pair_error
from paccp.errors import UserError

SCHEMA_VERSION = 1

CoS = Literal["be", "ds", "mrg"]
Source = Literal["sim", "datapath", "manual"]
GuaranteeKind = Literal["strict", "dynamic", "fair", "none"]


class UsageRecord(BaseModel):
    """One interval of bandwidth use by one flow (or VM) at one (theta, omega) pair."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: Literal[1] = 1
    record_id: str = Field(min_length=1, max_length=256, description="unique, stable id of this record")
    source: Source = Field(description="who metered it: sim, datapath or manual")
    tenant: str = Field(min_length=1, max_length=128)
    vm: str = Field(min_length=1, max_length=256, description="VM id (a cgroup path on the datapath)")
    flow_id: str | None = Field(default=None, max_length=256, description="null for a VM-level record")
    cos: CoS = Field(description="class of service: be, ds or mrg")
    theta_bps: int = Field(ge=0, description="minimum guaranteed rate in bit/s during the interval")
    omega: Decimal = Field(gt=0, description="utility weight during the interval")
    start_ns: int = Field(ge=0, description="interval start, ns since the Unix epoch (UTC)")
    end_ns: int = Field(ge=0, description="interval end, ns since the Unix epoch (UTC)")
    bytes: int = Field(ge=0, description="payload bytes delivered (acknowledged) in the interval")
    deadline_ns: int | None = Field(default=None, ge=0, description="absolute deadline, if the flow had one")
    deadline_met: bool | None = Field(default=None, description="whether the flow finished by its deadline")
    guarantee: GuaranteeKind = Field(default="none", description="SoftBW guarantee kind, if any")

    @model_validator(mode="after")
    def _check(self) -> UsageRecord:
        if self.end_ns < self.start_ns:
            raise ValueError(f"end_ns ({self.end_ns}) is before start_ns ({self.start_ns})")
        # omega is not pinned per CoS: VBP splits a VM's omega over its flows (a BE flow may carry 0.5).
        if pair_error(self.cos, self.theta_bps) is not None:  # the class/theta rule of paccp.cos
            need = "> 0" if self.cos == "mrg" else "= 0"
            raise ValueError(
                f"a{'n' if self.cos == 'mrg' else ''} {self.cos} record must have theta_bps {need}"
            )
        if self.deadline_met is not None and self.deadline_ns is None:
            raise ValueError("deadline_met given without deadline_ns")
        return self

    @field_serializer("omega")
    def _ser_omega(self, v: Decimal) -> str:
        return format(v, "f")

    def to_json_line(self) -> str:
        """Serialise as one JSON line (omega as a decimal string, so it round-trips exactly)."""
        return json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))


def _fmt_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err.get("loc", ())) or "record"
    msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
    return f"{loc}: {msg}"


def parse_record(obj: Any, where: str = "record") -> UsageRecord:
    """Validate one record (a dict); raise UserError naming ``where`` and the field."""
    if not isinstance(obj, dict):
        raise UserError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    try:
        return UsageRecord.model_validate(obj)
    except ValidationError as exc:
        raise UserError(f"{where}: {_fmt_error(exc)}") from None


def read_usage(path: str | Path) -> Iterator[UsageRecord]:
    """Read records from a ``.jsonl`` or ``.parquet`` file, validating each one.

    Raises :class:`UserError` naming the file, the line (or row) and the field of the first bad record.
    """
    p = Path(path)
    if not p.exists():
        raise UserError(f"{p}: no such usage file")
    if p.suffix == ".parquet":
        import pyarrow.parquet as pq

        table = pq.read_table(p)
        for i, row in enumerate(table.to_pylist(), start=1):
            row = {k: v for k, v in row.items() if v is not None or k in ("flow_id",)}
            yield parse_record(row, f"{p} row {i}")
        return
    with p.open("r", encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise UserError(f"{p} line {lineno}: not valid JSON ({exc.msg})") from None
            yield parse_record(obj, f"{p} line {lineno}")


def write_usage(records: Iterable[UsageRecord], path: str | Path) -> int:
    """Write records as ``.jsonl`` or ``.parquet`` (by suffix); return how many were written."""
    p = Path(path)
    recs = list(records)
    if p.suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        rows = [r.model_dump(mode="json") for r in recs]
        pq.write_table(pa.Table.from_pylist(rows, schema=parquet_schema()), p)
        return len(recs)
    with p.open("w", encoding="utf-8") as fh:
        for r in recs:
            fh.write(r.to_json_line() + "\n")
    return len(recs)


def parquet_schema() -> Any:
    """The Arrow schema of a usage Parquet file (omega as a decimal string)."""
    import pyarrow as pa

    return pa.schema(
        [
            ("schema_version", pa.int32()),
            ("record_id", pa.string()),
            ("source", pa.string()),
            ("tenant", pa.string()),
            ("vm", pa.string()),
            ("flow_id", pa.string()),
            ("cos", pa.string()),
            ("theta_bps", pa.int64()),
            ("omega", pa.string()),
            ("start_ns", pa.int64()),
            ("end_ns", pa.int64()),
            ("bytes", pa.int64()),
            ("deadline_ns", pa.int64()),
            ("deadline_met", pa.bool_()),
            ("guarantee", pa.string()),
        ]
    )
