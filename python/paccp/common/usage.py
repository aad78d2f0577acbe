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

import decimal
import json
from collections.abc import Iterable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    Strict,
    ValidationError,
    field_serializer,
    field_validator,
    model_validator,
)

from paccp import limits
from paccp.common.cos import pair_error
from paccp.errors import UserError, validation_error
from paccp.limits import INT64_MAX

SCHEMA_VERSION = 1

#: Physical bounds a record must respect (checked before anything is stored; docs/usage-records.md).
#: The fastest link a record may describe (the simulator's rate limit, :data:`paccp.limits.MAX_RATE_BPS`):
#: theta at most this, and ``bytes`` at most what it carries in the record's interval.
MAX_LINK_BPS = limits.MAX_RATE_BPS
#: omega range (a VM's pair split over many flows gives small fractions; no sane purchase exceeds 1e6).
#: Bytes one acknowledgement may cover at once (a 64 KiB segmentation-offload burst sent before a very
#: short interval began): the allowance on top of rate x time, so a metered slice of a few ns is not refused.
ACK_BURST_BYTES = 65_536
MIN_OMEGA = Decimal("1e-9")
MAX_OMEGA = Decimal(int(limits.MAX_OMEGA))
MAX_OMEGA_DIGITS = 40


def _no_control(v: str) -> str:
    """Ids and names: printable (no control characters, no NUL) and encodable as UTF-8."""
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in v):
        raise ValueError("must not contain control characters")
    try:
        v.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("must be valid Unicode text (no lone surrogates)") from None
    return v


def canonical_omega(v: Decimal) -> Decimal:
    """omega as a finite decimal in range, in canonical form: "2.0", "2" and "2E+0" are all 2."""
    if not v.is_finite():
        raise ValueError("must be a finite number")
    if not MIN_OMEGA <= v <= MAX_OMEGA:
        raise ValueError(f"must be between {MIN_OMEGA} and {MAX_OMEGA:.0E}")
    n = v.normalize(decimal.Context(prec=max(28, len(v.as_tuple().digits))))  # exact: no rounding
    if len(n.as_tuple().digits) > MAX_OMEGA_DIGITS:
        raise ValueError(f"has more than {MAX_OMEGA_DIGITS} significant digits")
    return Decimal(format(n, "f"))


#: A non-negative integer that fits int64 (the database column); booleans and floats are not integers.
Int64 = Annotated[int, Strict(), Field(ge=0, le=INT64_MAX)]
Name = Annotated[str, AfterValidator(_no_control)]

CoS = Literal["be", "ds", "mrg"]
Source = Literal["sim", "datapath", "manual"]
GuaranteeKind = Literal["strict", "dynamic", "fair", "none"]


class UsageRecord(BaseModel):
    """One interval of bandwidth use by one flow (or VM) at one (theta, omega) pair."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: Literal[1] = 1
    record_id: Name = Field(min_length=1, max_length=256, description="unique (per tenant), stable id")
    source: Source = Field(description="who metered it: sim, datapath or manual")
    tenant: Name = Field(min_length=1, max_length=128)
    vm: Name = Field(min_length=1, max_length=256, description="VM id (a cgroup path on the datapath)")
    flow_id: Name | None = Field(default=None, max_length=256, description="null for a VM-level record")
    cos: CoS = Field(description="class of service: be, ds or mrg")
    theta_bps: Annotated[int, Strict(), Field(ge=0, le=MAX_LINK_BPS)] = Field(
        description="minimum guaranteed rate in bit/s"
    )
    omega: Decimal = Field(description="utility weight during the interval")
    start_ns: Int64 = Field(description="interval start, ns since the Unix epoch (UTC)")
    end_ns: Int64 = Field(description="interval end, ns since the Unix epoch (UTC)")
    bytes: Int64 = Field(description="payload bytes delivered (acknowledged) in the interval")
    deadline_ns: Int64 | None = Field(default=None, description="absolute deadline, if the flow had one")
    deadline_met: Annotated[bool, Strict()] | None = Field(
        default=None, description="whether the flow finished by its deadline"
    )
    guarantee: GuaranteeKind = Field(default="none", description="SoftBW guarantee kind, if any")

    @field_validator("omega")
    @classmethod
    def _omega(cls, v: Decimal) -> Decimal:
        return canonical_omega(v)

    @model_validator(mode="after")
    def _check(self) -> UsageRecord:
        if self.end_ns < self.start_ns:
            raise ValueError(f"end_ns ({self.end_ns}) is before start_ns ({self.start_ns})")
        if (self.bytes - ACK_BURST_BYTES) * 8 * 10**9 > MAX_LINK_BPS * (self.end_ns - self.start_ns):
            raise ValueError(
                f"bytes ({self.bytes}) is more than a {MAX_LINK_BPS // 10**9} Gb/s link carries in"
                f" {self.end_ns - self.start_ns} ns"
            )
        # omega is not pinned per CoS: VBP splits a VM's omega over its flows (a BE flow may carry 0.5).
        if pair_error(self.cos, self.theta_bps) is not None:  # the class/theta rule of paccp.common.cos
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
        """Serialise as one canonical JSON line (sorted keys, omega as its canonical decimal string).

        The ledger's content hash is the SHA-256 of this line, so two spellings of one record (omega "2.0"
        and "2", keys in another order, spaces) hash the same.
        """
        return json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))


def _fmt_error(exc: ValidationError) -> str:
    loc, msg = validation_error(exc, "record")
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
    if not p.is_file():
        raise UserError(f"{p}: not a usage file (a directory or a special file)")
    if p.suffix == ".parquet":
        for i, row in enumerate(_parquet_rows(p), start=1):
            yield parse_record(row, f"{p} row {i}")
        return
    try:
        with p.open("rb") as fh:
            for lineno, raw in enumerate(fh, start=1):
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise UserError(f"{p} line {lineno}: not UTF-8 text (byte {exc.start + 1})") from None
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line, parse_float=Decimal, parse_constant=_no_constant)
                except (json.JSONDecodeError, ValueError) as exc:
                    why = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
                    raise UserError(f"{p} line {lineno}: not valid JSON ({why})") from None
                except RecursionError:
                    raise UserError(f"{p} line {lineno}: JSON nested too deeply") from None
                yield parse_record(obj, f"{p} line {lineno}")
    except OSError as exc:
        raise UserError(f"{p}: cannot read ({exc.strerror})") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number here")


def _parquet_rows(p: Path) -> Iterator[dict[str, Any]]:
    """Rows of a usage Parquet file as dicts; a file that is not Parquet is a one-line error."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(p)
        for batch in pf.iter_batches(batch_size=10_000):
            for row in batch.to_pylist():
                yield {k: v for k, v in row.items() if v is not None or k == "flow_id"}
    except (pa.ArrowException, OSError, ValueError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UserError(f"{p}: not a readable Parquet usage file ({first})") from None


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
