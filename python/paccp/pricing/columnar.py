"""A columnar reader of plain JSON Lines usage files: the ledger's fast path for ``bill ingest``.

Reading a file record by record (``json.loads`` then :class:`~paccp.common.usage.UsageRecord`, then the
canonical JSON line for the content hash) costs about 50 us per record in Python. This reader parses the
whole file with Arrow's JSON reader (C++), checks the rules of :class:`UsageRecord` on whole columns, and
builds the canonical lines (:meth:`UsageRecord.to_json_line`) with Arrow string kernels; only the SHA-256
of each line is a Python call per record.

It is conservative: it only *accepts*. Whenever a file is not the plain case it handles (not ASCII, any
backslash escape or control byte, a field of another JSON type, a number out of int64, duplicate record
ids, a SoftBW tenant, an omega that fails its rule, any record breaking any rule, a Parquet file), it
returns None and the ledger reads the file record by record, which gives the exact one-line error or
accepts what this reader would not. Where it accepts, it yields exactly the rows and content hashes of the
record-by-record path (``tests/pricing/test_columnar.py`` checks it on generated files, valid and not).
Rules with a single home are not rewritten here: the omega rule runs on each distinct omega
(:func:`paccp.common.usage.canonical_omega`), the class/theta rule on each distinct (cos, theta)
(:func:`paccp.common.cos.pair_error`); the bounds are read from the model's field constraints.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, get_args

from paccp.common.cos import pair_error
from paccp.common.usage import (
    ACK_BURST_BYTES,
    MAX_LINK_BPS,
    CoS,
    GuaranteeKind,
    Source,
    UsageRecord,
    canonical_omega,
)
from paccp.pricing.charging import per_record_rules

#: The bytes of a plain file: printable ASCII but the backslash, and the newline. Any other byte (non-ASCII,
#: a control byte, a backslash escape) leaves the file to the record-by-record path, so no string here
#: holds an escape and the canonical line needs no escaping.
_PLAIN = bytes([0x0A, *range(0x20, 0x5C), *range(0x5D, 0x7F)])

#: The canonical line's fields, in sorted key order (``json.dumps(..., sort_keys=True)``).
_KEYS = sorted(UsageRecord.model_fields)
_STRINGS = ("record_id", "source", "tenant", "vm", "flow_id", "cos", "guarantee")
_INTS = ("schema_version", "theta_bps", "start_ns", "end_ns", "bytes", "deadline_ns")


@dataclass(frozen=True)
class Columns:
    """Validated records as columns (Python lists, one value per record) and their content hashes."""

    data: dict[str, list[Any]]
    hashes: list[str]

    def __len__(self) -> int:
        return len(self.hashes)

    def keys(self) -> tuple[list[str], list[str]]:
        """(tenant, record_id) of every record, as two lists."""
        return self.data["tenant"], self.data["record_id"]

    def columns(self, lo: int, hi: int) -> Columns:
        """Records ``lo`` to ``hi``."""
        if (lo, hi) == (0, len(self)):
            return self
        return Columns({k: v[lo:hi] for k, v in self.data.items()}, self.hashes[lo:hi])


def _arrow_schema() -> Any:
    import pyarrow as pa

    types = {"deadline_met": pa.bool_(), "omega": pa.string()}
    return pa.schema(
        [(k, types.get(k, pa.string() if k in _STRINGS else pa.int64())) for k in UsageRecord.model_fields]
    )


def _bounds(field: str) -> tuple[int | None, int | None]:
    """(min_length, max_length) of a string field, or (ge, le) of an integer field, from the model."""
    lo = hi = None
    for m in UsageRecord.model_fields[field].metadata:
        lo = getattr(m, "min_length", None) if lo is None else lo
        hi = getattr(m, "max_length", None) if hi is None else hi
        lo = getattr(m, "ge", None) if lo is None else lo
        hi = getattr(m, "le", None) if hi is None else hi
    return lo, hi


def read_plain(data: bytes, models: Callable[[list[str]], Mapping[str, str]]) -> PlainUsage | None:
    """The validated records of a plain JSONL file's bytes, or None: read it record by record instead.

    ``models(names)`` gives the pricing model of each of the named tenants that exists; a file naming an
    unknown tenant, or one whose model checks each record when charging (SoftBW,
    :func:`~paccp.pricing.charging.per_record_rules`), is left to the record path.
    """
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.json as pj

    if not data.isascii() or data.translate(None, _PLAIN):
        return None
    try:
        tb = pj.read_json(
            pa.BufferReader(data),
            read_options=pj.ReadOptions(use_threads=True, block_size=1 << 24),
            parse_options=pj.ParseOptions(explicit_schema=_arrow_schema(), unexpected_field_behavior="error"),
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
    n = tb.num_rows
    if n == 0:
        return None
    col = {k: tb.column(k).combine_chunks() for k in tb.column_names}

    def all_(mask: Any) -> bool:
        return bool(pc.all(mask, skip_nulls=False).as_py()) if len(mask) else True

    # schema_version and guarantee have defaults; every other field without a default must be present.
    sv = col["schema_version"]
    if not all_(pc.or_kleene(pc.is_null(sv), pc.equal(sv, 1))):
        return None
    for k, f in UsageRecord.model_fields.items():
        if f.is_required() and col[k].null_count:
            return None
    for k, choices in (("source", Source), ("cos", CoS), ("guarantee", GuaranteeKind)):
        if not all_(pc.or_kleene(pc.is_null(col[k]), pc.is_in(col[k], pa.array(get_args(choices))))):
            return None
    for k in ("record_id", "tenant", "vm", "flow_id"):
        lo, hi = _bounds(k)
        ln = pc.utf8_length(col[k])  # ASCII only: characters are bytes
        ok = pc.and_kleene(pc.greater_equal(ln, lo or 0), pc.less_equal(ln, hi if hi is not None else 2**31))
        if not all_(pc.or_kleene(pc.is_null(col[k]), ok)):
            return None
    for k in ("theta_bps", "start_ns", "end_ns", "bytes", "deadline_ns"):
        lo, hi = _bounds(k)
        ok = pc.and_kleene(pc.greater_equal(col[k], lo or 0), pc.less_equal(col[k], hi or 2**63 - 1))
        if not all_(pc.or_kleene(pc.is_null(col[k]), ok)):
            return None
    if not all_(pc.greater_equal(col["end_ns"], col["start_ns"])):
        return None
    # bytes <= rate x time + one burst, checked exactly in Python for any record the float bound cannot clear
    # (integers above 2^53 round when made floats: safe=False, the 1e-9 margin covers the rounding)
    as_float = pc.CastOptions(pa.float64(), allow_float_truncate=True)
    dur_s = pc.divide(pc.cast(pc.subtract(col["end_ns"], col["start_ns"]), options=as_float), 1e9)
    room = pc.add(pc.multiply(dur_s, MAX_LINK_BPS / 8 * (1 - 1e-9)), float(ACK_BURST_BYTES))
    close = pc.indices_nonzero(pc.greater(pc.cast(col["bytes"], options=as_float), room)).to_pylist()
    for i in close:
        b, s, e = (col[k][i].as_py() for k in ("bytes", "start_ns", "end_ns"))
        if (b - ACK_BURST_BYTES) * 8 * 10**9 > MAX_LINK_BPS * (e - s):
            return None
    dm = col["deadline_met"]
    if not all_(pc.or_kleene(pc.is_null(dm), pc.is_valid(col["deadline_ns"]))):
        return None
    pairs = pa.table({"c": col["cos"], "t": col["theta_bps"]}).group_by(["c", "t"]).aggregate([])
    if any(pair_error(c, t) for c, t in zip(pairs["c"].to_pylist(), pairs["t"].to_pylist(), strict=True)):
        return None
    # omega: the one rule on each distinct value, then every record gets its value's canonical text
    distinct = pc.unique(col["omega"]).to_pylist()
    canon: list[str] = []
    for text in distinct:
        try:
            canon.append(format(canonical_omega(Decimal(text)), "f"))
        except (ValueError, ArithmeticError):
            return None
    omega = pc.take(pa.array(canon, pa.string()), pc.index_in(col["omega"], pa.array(distinct)))
    tenant_names = pc.unique(col["tenant"]).to_pylist()
    tenants = models(tenant_names)
    if any(t not in tenants or per_record_rules(tenants[t]) for t in tenant_names):
        return None
    if pc.count_distinct(col["record_id"]).as_py() != n:  # the same id twice: the record path decides
        return None

    sv = pc.fill_null(sv, 1)
    guarantee = pc.fill_null(col["guarantee"], "none")
    return PlainUsage({**col, "schema_version": sv, "guarantee": guarantee, "omega": omega})


def read_plain_jsonl(data: bytes, models: Callable[[list[str]], Mapping[str, str]]) -> Columns | None:
    """:func:`read_plain` as :class:`Columns` of the whole file (hashes and Python values), or None."""
    plain = read_plain(data, models)
    return None if plain is None else plain.columns(0, len(plain))


@dataclass(frozen=True)
class PlainUsage:
    """A plain file's records, validated, as Arrow columns (omega canonical, defaults filled in).

    The content hashes and the values are made slice by slice (:meth:`columns`, :meth:`table`), so the
    ledger can write one slice while the next is made (Arrow works outside the interpreter lock, and the
    database drivers release it while the database works).
    """

    values: dict[str, Any]

    def __len__(self) -> int:
        return len(self.values["record_id"])

    def keys(self) -> tuple[list[str], list[str]]:
        """(tenant, record_id) of every record, as two lists."""
        return self.values["tenant"].to_pylist(), self.values["record_id"].to_pylist()

    def tenant_names(self) -> set[str]:
        """The tenants the records belong to."""
        import pyarrow.compute as pc

        return set(pc.unique(self.values["tenant"]).to_pylist())

    def hashes(self, lo: int, hi: int) -> list[str]:
        """SHA-256 (hex) of the canonical line of each of records ``lo`` to ``hi``."""
        part = {k: v.slice(lo, hi - lo) for k, v in self.values.items()}
        return [hashlib.sha256(x).hexdigest() for x in _canonical_lines(part).to_pylist()]

    def columns(self, lo: int, hi: int) -> Columns:
        """Records ``lo`` to ``hi`` as :class:`Columns` (Python values, content hashes)."""
        out = {
            k: self.values[k].slice(lo, hi - lo).to_pylist()
            for k in UsageRecord.model_fields
            if k != "schema_version"
        }
        return Columns(out, self.hashes(lo, hi))

    def table(self, lo: int, hi: int, names: list[str], extra: Mapping[str, Any]) -> Any:
        """Records ``lo`` to ``hi`` as an Arrow table of the columns ``names``; ``extra`` gives further
        columns (Arrow arrays or Python lists of that length)."""
        import pyarrow as pa

        cols = [extra[k] if k in extra else self.values[k].slice(lo, hi - lo) for k in names]
        return pa.table(cols, names=names)


def _canonical_lines(values: dict[str, Any]) -> Any:
    """:meth:`UsageRecord.to_json_line` of every record, as Arrow binary (the strings need no escaping)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    parts: list[Any] = []
    for i, k in enumerate(_KEYS):
        v = values[k]
        if k in _STRINGS or k == "omega":
            text = pc.binary_join_element_wise('"', v, '"', "")
        elif k == "deadline_met":
            text = pc.cast(v, pa.string())  # "true" / "false"
        else:
            text = pc.cast(v, pa.string())
        parts.append(("{" if i == 0 else ",") + f'"{k}":')
        parts.append(pc.fill_null(text, "null"))
    parts.append("}")
    return pc.cast(pc.binary_join_element_wise(*parts, ""), pa.binary())
