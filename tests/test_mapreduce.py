"""The MapReduce shuffle workload (paccp.traffic.mapreduce): trace, task rule, placement, scaling, metrics."""

from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path

import pytest

from paccp.errors import UserError
from paccp.traffic import mapreduce as mr

MB = 2**20


def test_shipped_trace_is_the_swim_file_with_its_licence() -> None:
    p = mr.trace_path()
    digest = hashlib.sha256(p.read_bytes()).hexdigest()
    assert digest == "65f758ecd0495955de30c560b2d57fc351c9b2c89117b82f16b2f8f30fb4e9d9"
    assert (p.parent / "SWIM-LICENSE").read_text().count("Regents of the University of California") == 1
    jobs = mr.load_trace()
    assert len(jobs) == 24442
    assert jobs[2] == mr.Job("job2", 20.0, 53088744165, 1510005522, 5759777)
    # the counts stated in the trace README
    assert sum(1 for j in jobs if j.shuffle_bytes == 0) == 8324
    assert sum(1 for j in jobs if j.shuffle_bytes >= 10**9) == 2299


def test_first_n_jobs_and_malformed_lines(tmp_path: Path) -> None:
    assert [j.id for j in mr.load_trace(max_jobs=3)] == ["job0", "job1", "job2"]
    bad = tmp_path / "t.tsv"
    bad.write_text("job0\t1\t1\t10\t5\t1\njob1\t2\t1\tx\t5\t1\n")
    with pytest.raises(UserError, match="line 2: not numbers"):
        mr.load_trace(bad)
    bad.write_text("job0\t5\t1\t10\t5\t1\njob1\t2\t1\t10\t5\t1\n")
    with pytest.raises(UserError, match="line 2: submit times go backwards"):
        mr.load_trace(bad)
    bad.write_text("job0\t1\t1\t10\t5\n")
    with pytest.raises(UserError, match="6 tab-separated columns"):
        mr.load_trace(bad)


@pytest.mark.parametrize(
    ("input_bytes", "tasks"), [(0, 1), (1, 1), (64 * MB, 1), (64 * MB + 1, 2), (640 * MB, 10)]
)
def test_task_rule_is_input_over_64mb_rounded_up_at_least_one(input_bytes: int, tasks: int) -> None:
    assert mr.task_count(input_bytes) == tasks


def _job(i: int, inp: int, shuf: int, t: float = 0.0) -> mr.Job:
    return mr.Job(f"job{i}", t, inp, shuf, 0)


def test_placement_two_tasks_per_server_and_all_bytes_accounted() -> None:
    hosts = [f"h{i}" for i in range(20)]
    jobs = [_job(0, 7 * 64 * MB, 1_000_003, 1.5), _job(1, 10, 0, 2.0), _job(2, 1, 999, 3.0)]
    plans, flows = mr.plan_shuffle(jobs, hosts, mr.Scaling(jobs=3), seed=4)
    p0 = plans[0]
    assert (p0.mappers, p0.reducers) == (7, 7)
    assert len(p0.mapper_hosts) == 4 and len(set(p0.mapper_hosts)) == 4  # ceil(7 / 2) distinct servers
    per_host = Counter(f.src for f in flows if f.job == "job0")
    # a mapper server sends to each remote reducer once per mapper it holds (at most 2)
    assert max(per_host.values()) <= 2 * 7
    assert p0.network_bytes + p0.local_bytes == 1_000_003
    assert all(f.src != f.dst for f in flows)
    assert all(f.start_ns == 1_500_000_000 for f in flows if f.job == "job0")
    assert plans[1].flow_ids == ()  # no shuffle bytes: no flow
    assert plans[2].mappers == 1 and plans[2].network_bytes + plans[2].local_bytes == 999


def test_scaling_first_jobs_sizes_times_and_cap() -> None:
    hosts = [f"h{i}" for i in range(10)]
    jobs = [_job(i, 100 * 64 * MB, 10_000_000, 10.0 * i) for i in range(5)]
    sc = mr.Scaling(jobs=2, size_scale=0.01, time_scale=0.001, max_tasks=4)
    plans, _ = mr.plan_shuffle(jobs, hosts, sc, seed=1)
    assert len(plans) == 2
    assert (plans[1].mappers, plans[1].reducers) == (4, 4)
    assert plans[1].start_ns == 10_000_000  # 10 s x 0.001
    assert all(p.network_bytes + p.local_bytes == 100_000 for p in plans)
    # the default cap is the cluster's slots: two per server
    big, _ = mr.plan_shuffle(jobs[:1], hosts, mr.Scaling(jobs=1), seed=1)
    assert big[0].mappers == 20


def test_placement_is_deterministic_per_seed() -> None:
    hosts = [f"h{i}" for i in range(30)]
    jobs = mr.load_trace(max_jobs=40)
    sc = mr.Scaling(jobs=40, size_scale=1e-3, max_tasks=6)
    a = mr.plan_shuffle(jobs, hosts, sc, seed=7)
    b = mr.plan_shuffle(jobs, hosts, sc, seed=7)
    c = mr.plan_shuffle(jobs, hosts, sc, seed=8)
    assert a == b
    assert a[1] != c[1]


def test_bad_scaling_is_a_user_error() -> None:
    with pytest.raises(UserError, match="size_scale must be > 0"):
        mr.Scaling(size_scale=0)
    with pytest.raises(UserError, match="jobs must be >= 1"):
        mr.Scaling(jobs=0)


def test_shuffle_time_is_last_flow_finish_minus_job_start() -> None:
    hosts = [f"h{i}" for i in range(8)]
    jobs = [_job(0, 2 * 64 * MB, 2 * 10**9, 1.0), _job(1, 1, 5000, 2.0), _job(2, 1, 0, 3.0)]
    plans, flows = mr.plan_shuffle(jobs, hosts, mr.Scaling(jobs=3), seed=3)
    fin: dict[str, int | None] = {}
    for k, f in enumerate(flows):
        fin[f.id] = f.start_ns + (k + 1) * 1_000_000
    res = mr.shuffle_results(plans, fin)
    by = {r.job: r for r in res}
    last0 = max(fin[f] for f in plans[0].flow_ids)
    assert by["job0"].shuffle_time_s == pytest.approx((last0 - 1_000_000_000) / 1e9)
    assert by["job0"].size_class == "large"
    assert by["job2"].shuffle_time_s is None and by["job2"].network_flows == 0
    if plans[1].flow_ids:  # one mapper and one reducer may share a server (then all local)
        fin[plans[1].flow_ids[0]] = None
        res = mr.shuffle_results(plans, fin)
        assert not {r.job: r for r in res}["job1"].finished
    s = mr.summarize(res)
    assert s["jobs"] == 3 and s["jobs_without_network_shuffle"] >= 1
    assert s["by_class"]["large"]["n"] == 1  # type: ignore[index]
