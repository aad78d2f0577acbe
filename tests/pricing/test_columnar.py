"""The columnar JSONL reader (the ledger's fast path) accepts only what the record-by-record path accepts,
and then yields exactly its rows and content hashes; a plain file does take the fast path."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pricing_fixtures import BOOK, T0, H, rec

from paccp.common.usage import UsageRecord, read_usage
from paccp.errors import UserError
from paccp.pricing.columnar import read_plain_jsonl
from paccp.pricing.ledger import _USAGE_COLS, Ledger, _content_hash, _values

MODELS = {"acme": "vbp", "beta": "fbp", "soft": "softbw"}


def _slow(path: Path) -> tuple[dict[str, list[Any]], list[str]] | None:
    """What the record-by-record path makes of a file (None: it refuses it)."""
    try:
        recs = list(read_usage(path))
    except UserError:
        return None
    data: dict[str, list[Any]] = {c: [] for c in _USAGE_COLS}
    hashes: list[str] = []
    for r in recs:
        hashes.append(_content_hash(r))
        for c, v in zip(_USAGE_COLS, _values(r), strict=True):
            data[c].append(v)
    return data, hashes


def _base(i: int) -> dict[str, Any]:
    return {"record_id": f"id{i}", "source": "datapath", "tenant": "acme", "vm": f"vm{i % 3}",
            "cos": "be", "theta_bps": 0, "omega": "1", "start_ns": T0 + i, "end_ns": T0 + i + H,
            "bytes": 1000}  # fmt: skip


#: Changes to one record's JSON object, valid and not (the fast path must refuse or agree on each).
EDITS: list[tuple[str, Any]] = [
    ("omega", "2.0"), ("omega", "0.50"), ("omega", "1E+1"), ("omega", 2), ("omega", "0"), ("omega", "nan"),
    ("omega", "1e-10"), ("omega", "1000001"), ("cos", "mrg"), ("theta_bps", 5), ("cos", "xx"),
    ("theta_bps", -1), ("theta_bps", 1.0), ("theta_bps", True), ("bytes", 2**63), ("bytes", 10**15),
    ("end_ns", T0), ("start_ns", None), ("flow_id", ""), ("flow_id", None), ("flow_id", "f" * 257),
    ("record_id", ""), ("record_id", "r" * 257), ("tenant", "zed"), ("tenant", "soft"), ("tenant", "beta"),
    ("vm", "v\u00e9"), ("vm", "a\\b"), ("vm", "a\tb"), ("deadline_ns", T0 + 5), ("deadline_met", True),
    ("guarantee", "strict"), ("guarantee", "bogus"), ("schema_version", 1), ("schema_version", 2),
    ("source", "sim"), ("source", "x"), ("extra", 1), ("record_id", "id0"), ("deadline_ns", "5"),
]  # fmt: skip


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    n=st.integers(1, 6),
    edits=st.lists(st.tuples(st.integers(0, 5), st.sampled_from(EDITS)), max_size=4),
    drop=st.sampled_from([None, "flow_id", "guarantee", "schema_version", "omega"]),
    shuffle=st.booleans(),
)
def test_fast_path_agrees_with_record_path(
    tmp_path: Path, n: int, edits: list[tuple[int, tuple[str, Any]]], drop: str | None, shuffle: bool
) -> None:
    objs = [_base(i) for i in range(n)]
    for i, (k, v) in edits:
        objs[i % n][k] = v
    if drop is not None:
        objs[0].pop(drop, None)
    lines = [json.dumps(dict(reversed(o.items())) if shuffle else o) for o in objs]
    path = tmp_path / "u.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    fast = read_plain_jsonl(path.read_bytes(), lambda _names: MODELS)
    if fast is None:
        return
    slow = _slow(path)
    assert slow is not None, "the fast path accepted a file the record path refuses"
    assert (fast.data, fast.hashes) == slow


def test_plain_file_takes_the_fast_path_and_stores_the_same_rows(tmp_path: Path) -> None:
    recs = [
        rec(record_id="a", omega="2.50", cos="ds"),
        rec(record_id="b", cos="mrg", theta_bps=7, omega="1E+1", flow_id=None),
        rec(record_id="c", deadline_ns=T0 + H, deadline_met=True),
        rec(record_id="d", omega="0.000000001", start_ns=T0 + 5, end_ns=T0 + 5, bytes=0),
    ]
    path = tmp_path / "u.jsonl"
    path.write_text("".join(r.to_json_line() + "\n" for r in recs), encoding="utf-8")
    cols = read_plain_jsonl(path.read_bytes(), lambda _names: MODELS)
    assert cols is not None and len(cols) == 4
    a, b = tmp_path / "fast.sqlite", tmp_path / "slow.sqlite"
    for db in (a, b):
        led = Ledger(str(db))
        led.add_tenant("acme", "vbp", BOOK)
        res = led.ingest_file(path, tenant="acme") if db == a else led.ingest(recs, str(path), tenant="acme")
        assert (res.new, res.unchanged) == (4, 0)
        assert led.ingest_file(path, tenant="acme").new == 0  # idempotent either way
        led.close()
    q = "SELECT tenant, record_id, content_sha256, source, vm, flow_id, cos, theta_bps, omega, start_ns," \
        " end_ns, bytes, deadline_ns, deadline_met, guarantee FROM usage ORDER BY record_id"  # fmt: skip
    with sqlite3.connect(a) as ca, sqlite3.connect(b) as cb:
        assert ca.execute(q).fetchall() == cb.execute(q).fetchall()
    assert Ledger(str(a)).usage("acme", 0, 2**62) == sorted(recs, key=lambda r: (r.start_ns, r.record_id))


def test_fast_path_refusal_keeps_the_exact_error(tmp_path: Path) -> None:
    path = tmp_path / "u.jsonl"
    objs = [_base(0), {**_base(1), "record_id": "id0", "bytes": 5}]  # same id, other content
    path.write_text("".join(json.dumps(o) + "\n" for o in objs), encoding="utf-8")
    led = Ledger(str(tmp_path / "l.sqlite"))
    led.add_tenant("acme", "vbp", BOOK)
    try:
        led.ingest_file(path, tenant="acme")
    except UserError as exc:
        assert "appears twice with different content" in exc.message
    else:
        raise AssertionError("a file with one id twice, two contents, was ingested")
    assert led.count_usage() == 0


def test_canonical_line_matches_the_model(tmp_path: Path) -> None:
    r = UsageRecord.model_validate({**_base(0), "deadline_ns": T0 + 9, "deadline_met": False})
    path = tmp_path / "u.jsonl"
    path.write_text(json.dumps({**_base(0), "deadline_ns": T0 + 9, "deadline_met": False}) + "\n")
    cols = read_plain_jsonl(path.read_bytes(), lambda _names: MODELS)
    assert cols is not None and cols.hashes == [_content_hash(r)]
