"""The MPTCP connection layer from the scheme down: the scheme's scheduler, receive buffer, penalisation
and WC delay reach the engine's ``connections`` and change the run; ``mptcp-sched`` and ``mptcp-rcvbuf``
end to end with ``--quick``."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from paccp.experiments import mptcp_bgwc as exp
from paccp.scenario import parse_scenario, to_engine
from paccp.sim.engine import run


def test_the_scheme_builds_one_connection_per_flow() -> None:
    spec = exp.rcvbuf_scenario(200, 2, 131072, quick=True)
    spec["scheme"] |= {
        "scheduler": "least_rtt",
        "penalize": False,
        "wc_delay_steps": [{"at": "0.5s", "delay": "3ms"}],
    }
    eng = to_engine(parse_scenario(copy.deepcopy(spec)))
    (c,) = eng["connections"]
    assert c["id"] == "f" and c["size_bytes"] is None
    assert [s["flow"] for s in c["subflows"]] == ["f/bg", "f/wc0"]
    assert (c["scheduler"], c["receive_buffer_bytes"], c["dynamic_beta"], c["penalize"]) == (
        {"kind": "least_rtt"},
        131072,
        None,
        False,
    )
    assert c["subflows"][1]["extra_delay_ns"] == 2_000_000
    assert c["subflows"][1]["delay_steps"] == [{"at_ns": 500_000_000, "delay_ns": 3_000_000}]
    assert all(f["size_bytes"] is None for f in eng["flows"])
    spec["scheme"]["receive_buffer"] = "dynamic"
    (c,) = to_engine(parse_scenario(copy.deepcopy(spec)))["connections"]
    assert (c["receive_buffer_bytes"], c["dynamic_beta"]) == (87_380, 3.0)


def test_scheduler_and_penalize_change_the_run() -> None:
    """Once accepted with no effect; now each one changes what the engine does."""

    def out(**scheme: object) -> tuple[list[int], dict[str, list[Any]]]:
        spec = exp.rcvbuf_scenario(200, 1, 131072, quick=True)
        spec["run"]["duration"] = "0.2s"
        spec["scheme"] |= scheme
        res = run(to_engine(parse_scenario(spec)))
        assert res.connections is not None
        return res.flows.column("bytes_acked").to_pylist(), res.connections.to_pydict()

    base, cb = out()
    lr, _ = out(scheduler="least_rtt")
    _, cn = out(penalize=False)
    assert lr != base
    assert cb["window_blocked"][0] > 0 and cb["penalisations"][0] > 0
    assert cn["penalisations"][0] == 0 and cn["reinjections"][0] == 0
    big, cg = out(receive_buffer="6MiB")
    assert big[1] > 10 * max(base[1], 1), (big, base)  # the WC subflow takes the idle bandwidth
    assert cg["window_blocked"][0] == 0


def test_finite_connections_complete(tmp_path: Path) -> None:
    spec = exp.sched_scenario("bg_first", quick=True)
    for f in spec["flows"]:
        f["size"] = "2MB"
    res = run(to_engine(parse_scenario(spec)))
    assert res.connections is not None
    conns = res.connections.to_pydict()
    assert conns["bytes_delivered"] == [2_000_000] * 3 and all(t is not None for t in conns["finish_ns"])
    fin = dict(
        zip(res.flows.column("id").to_pylist(), res.flows.column("finish_ns").to_pylist(), strict=True)
    )
    assert fin["fA/bg"] == fin["fA/wc0"] == conns["finish_ns"][0]


def _reproduce(tmp_path: Path, *ids: str) -> dict[str, dict[str, object]]:
    from typer.testing import CliRunner

    from paccp.cli import app

    res = CliRunner().invoke(app, ["reproduce", *ids, "--quick", "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    return {i: json.loads((tmp_path / i / "summary.json").read_text()) for i in ids}


def _holds(summary: dict[str, object], words: str) -> list[bool]:
    checks = summary["checks"]
    assert isinstance(checks, list) and checks
    for c in checks:
        assert set(c) == {"statement", "paper", "ours", "holds"}
    found = [bool(c["holds"]) for c in checks if words in str(c["statement"])]
    assert found, words
    return found


def test_sched_and_rcvbuf_experiments(tmp_path: Path) -> None:
    s = _reproduce(tmp_path, "mptcp-sched", "mptcp-rcvbuf")
    sched = s["mptcp-sched"]
    assert all(_holds(sched, "BG-first: A's BG subflow at its guarantee from the first second"))
    assert all(_holds(sched, "every active server's BG subflow at its guarantee"))
    assert (tmp_path / "mptcp-sched" / "fig5_fig16.png").is_file()
    # the subflows' srtts LeastRTT compared are reported with the explanation's check
    srtt = sched["measured_mbps"]["rmem_default-least_rtt"]["srtt_by_phase"]["A + B"]["B"]
    assert srtt["bg_srtt_us"] > 0 and srtt["wc_srtt_us"] > 0
    assert _holds(sched, "why B's BG subflow idles")
    rc = s["mptcp-rcvbuf"]
    assert all(_holds(rc, "BG at its guarantee with every buffer"))
    assert all(_holds(rc, "WC takes the idle bandwidth with the largest buffer"))
    assert all(_holds(rc, "WC small with the smallest buffer"))
    assert all(_holds(rc, "dynamic buffer recovers"))
    for png in ("fig7_fig8.png", "fig17.png"):
        assert (tmp_path / "mptcp-rcvbuf" / png).is_file()


def test_bad_connection_parameters_are_one_line_errors() -> None:
    import pytest

    from paccp.errors import UserError

    cases = {
        "receive_buffer": (-5, "scheme.receive_buffer: must be > 0 bytes or 'dynamic'"),
        "wc_extra_delay": ("-1ms", "scheme.wc_extra_delay: duration must not be negative"),
        "scheduler": ("rr", "scheme.scheduler: Input should be 'bg_first' or 'least_rtt'"),
        "wc_subflows": (2, "scheme.wc_subflows: N = 2 > the 1 disjoint path(s) from S to R"),
        "wc_delay_steps": (
            [{"at": "2s", "delay": "1ms"}, {"at": "1s", "delay": "2ms"}],
            "scheme.wc_delay_steps[1].at: steps must be in time order",
        ),
    }
    for key, (value, msg) in cases.items():
        spec = exp.rcvbuf_scenario(200, 1, 131072, quick=True)
        spec["scheme"][key] = value
        with pytest.raises(UserError) as e:
            to_engine(parse_scenario(spec))
        assert msg in str(e.value) and "\n" not in str(e.value), (key, str(e.value))
