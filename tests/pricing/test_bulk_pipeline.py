"""The sliced bulk write (:mod:`paccp.pricing.bulk`) on both backends: a file of many slices goes in whole,
re-ingesting it changes nothing, a changed record in a LATE slice refuses the whole file after earlier
slices were written (the transaction rolls back), and ids that need quoting survive the stored-ids query."""

from __future__ import annotations

from pathlib import Path

import pytest
from pricing_fixtures import BOOK, T0, H, rec

from paccp.common.usage import write_usage
from paccp.errors import UserError
from paccp.pricing import bulk
from paccp.pricing.ledger import Ledger, pg_text_array

N = 3500


def _file(path: Path, n: int, changed: int | None = None, newest_first: bool = False) -> Path:
    recs = [
        rec(record_id=f"id{i}", flow_id=f"f{i}", start_ns=T0 + i * H, end_ns=T0 + (i + 1) * H,
            bytes=1000 + (1 if i == changed else 0))
        for i in range(n)
    ]  # fmt: skip
    write_usage(recs[::-1] if newest_first else recs, path)
    return path


def _batches(led: Ledger) -> int:
    with led.engine.connect() as conn:
        return int(conn.exec_driver_sql("SELECT COUNT(*) FROM ingest_batch").scalar() or 0)


def test_slices_cover_every_record_once_with_a_cut() -> None:
    for n, cut in ((0, None), (1, None), (25_000, None), (60_001, 30_000), (10, 5), (10, 10)):
        got = bulk.slices(n, cut)
        flat = [i for lo, hi in got for i in range(lo, hi)]
        assert flat == list(range(n))
        assert all(hi - lo <= bulk.SLICE for lo, hi in got)
        if cut is not None and 0 < cut < n:
            assert cut in {hi for _lo, hi in got}


def test_many_slices_all_or_nothing_and_idempotent(
    db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bulk, "SLICE", 500)  # 7 slices, several made ahead while others are written
    led = Ledger(db)
    led.add_tenant("acme", "vbp", BOOK)
    first = _file(tmp_path / "a.jsonl", N // 2)
    res = led.ingest_file(first, tenant="acme")
    assert (res.new, res.unchanged) == (N // 2, 0)
    whole = _file(tmp_path / "b.jsonl", N)  # the first half again, then new records
    res = led.ingest_file(whole, tenant="acme")
    assert (res.new, res.unchanged) == (N - N // 2, N // 2)
    assert led.count_usage() == N and _batches(led) == 2
    again = led.ingest_file(whole, tenant="acme")
    assert (again.new, again.unchanged, again.batch_id) == (0, N, None)
    # 1000 new records first (two slices written), then a stored one changed: refused whole, rolled back
    bad = _file(tmp_path / "c.jsonl", N + 1000, changed=N - 1, newest_first=True)
    with pytest.raises(UserError, match="already ingested with different content"):
        led.ingest_file(bad, tenant="acme")
    assert led.count_usage() == N and _batches(led) == 2
    late_new = _file(tmp_path / "d.jsonl", N + 1000)
    res = led.ingest_file(late_new, tenant="acme")
    assert (res.new, res.unchanged) == (1000, N)
    stored = led.usage("acme", 0, 2**62)
    assert [r.record_id for r in stored] == [f"id{i}" for i in range(N + 1000)]
    led.close()


def test_ids_needing_quotes_are_found_again(db: str) -> None:
    led = Ledger(db)
    led.add_tenant("acme", "vbp", BOOK)
    ids = ['a"b', "c\\d", "e,f", "{g}", "h i", "NULL", "j'k"]
    recs = [rec(record_id=x, start_ns=T0 + i * H, end_ns=T0 + (i + 1) * H) for i, x in enumerate(ids)]
    assert led.ingest(recs, tenant="acme").new == len(ids)
    assert led.ingest(recs, tenant="acme").unchanged == len(ids)
    changed = [
        *recs[:-1],
        rec(record_id=ids[-1], start_ns=recs[-1].start_ns, end_ns=recs[-1].end_ns, bytes=7),
    ]
    with pytest.raises(UserError, match="different content"):
        led.ingest(changed, tenant="acme")
    assert led.count_usage() == len(ids)
    led.close()


def test_pg_text_array_literal() -> None:
    assert pg_text_array([]) == "{}"
    assert pg_text_array(['a"b', "c\\d", "e,f"]) == '{"a\\"b","c\\\\d","e,f"}'
