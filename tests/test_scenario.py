"""Scenario schema: defaults, conversion to engine JSON, and one-line errors naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from paccp.cli import main
from paccp.errors import UserError
from paccp.scenario import load_scenario, parse_scenario, to_engine, to_toml

REPO = Path(__file__).resolve().parents[1]

BASE = """
[run]
duration = "50ms"
warmup = "10ms"

[topology]
kind = "dumbbell"
left_hosts = 2
right_hosts = 2
bottleneck_rate = "10Gbit"

[[flows]]
id = "a"
src = "l0"
dst = "r0"
"""


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        main(argv)
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def _error(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str) -> str:
    p = tmp_path / "s.toml"
    p.write_text(text)
    code, _, err = _cli(["run", str(p), "--out", str(tmp_path / "out")], capsys)
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("paccp: error:"), err
    assert not (tmp_path / "out").exists()
    return lines[0]


def test_defaults_and_engine_json() -> None:
    import tomllib

    sc = parse_scenario(tomllib.loads(BASE))
    eng = to_engine(sc)
    assert eng["duration_ns"] == 50_000_000
    assert eng["packet"] == {"mtu_bytes": 1500, "header_bytes": 40, "ack_bytes": 40}
    assert eng["cc"] == {"kind": "paccp", "rcos": 3.0, "min_cwnd_pkts": 1.0}
    assert eng["topology"]["bottleneck_link"] == {
        "rate_bps": 10**10,
        "delay_ns": 20_000,
        "buffer": {"packets": 100},
    }
    f = eng["flows"][0]
    assert (f["size_bytes"], f["theta_bps"], f["omega"], f["label"], f["vm"]) == (None, 0, 1.0, "BE", None)
    assert eng["sampling"] == {"interval_ns": 1_000_000, "flows": "long_lived", "cwnd": False}


def test_paper_leaf_spine_defaults_and_load() -> None:
    sc = parse_scenario(
        {
            "topology": {"kind": "leaf_spine"},
            "routing": {"kind": "leaf_spine_paper"},
            "arrivals": [{"workload": "websearch", "load": 0.5}],
        }
    )
    eng = to_engine(sc)
    t = eng["topology"]
    assert (t["leaves"], t["spines"], t["hosts_per_leaf"]) == (6, 5, 40)
    assert t["host_link"] == {"rate_bps": 10**10, "delay_ns": 10_000, "buffer": {"packets": 100}}
    assert t["fabric_link"] == {"rate_bps": 4 * 10**10, "delay_ns": 20_000, "buffer": {"packets": 400}}
    from paccp.traffic.workload import load_cdf

    a = eng["arrivals"][0]
    mean = load_cdf("websearch").mean_bytes
    # load = offered inter-rack bytes / (L * S * fabric rate)
    assert a["rate_per_s"] * 8 * mean == pytest.approx(0.5 * 6 * 5 * 40e9)
    assert a["destination"] == "other_leaf" and len(a["sources"]) == 240
    assert a["cos"] == {"kind": "by_vm"}


def test_buffer_units() -> None:
    import tomllib

    sc = parse_scenario(
        tomllib.loads(
            BASE.replace(
                'bottleneck_rate = "10Gbit"',
                'bottleneck_rate = "10Gbit"\nbottleneck_buffer = "150KB"\nnic_buffer = 64',
            )
        )
    )
    t = to_engine(sc)["topology"]
    assert t["bottleneck_link"]["buffer"] == {"bytes": 150_000}
    assert t["nic_buffer"] == {"packets": 64}


@pytest.mark.parametrize(
    ("patch", "needle"),
    [
        ("[run\n", "malformed TOML"),
        ("[run]\nbogus = 1\n", "run.bogus: unknown key"),
        ('[[flows]]\nid = "b"\nsrc = "l1"\ndst = "r1"\ntheta = "-1Gbit"\n', "flows[1].theta"),
        ('[[flows]]\nid = "b"\nsrc = "l1"\ndst = "r1"\nomega = 0\n', "flows[1].omega"),
        (
            '[[flows]]\nid = "b"\nsrc = "l1"\ndst = "r1"\ntheta = "20Gbit"\n',
            "flows[1].theta: 20000000000 bit/s is above",
        ),
        ('[[flows]]\nid = "b"\nsrc = "x9"\ndst = "r1"\n', "flows[1].src: unknown host 'x9'"),
        ('[[flows]]\nid = "b"\nsrc = "l1"\ndst = "r7"\n', "flows[1].dst: unknown host 'r7'"),
        ('[[flows]]\nid = "a"\nsrc = "l1"\ndst = "r1"\n', "flows[1].id: duplicate"),
        ('[[flows]]\nid = "b"\nsrc = "l1"\ndst = "r1"\nsize = "1.5XB"\n', "flows[1].size"),
        ('[[flows]]\nid = "b"\nsrc = "l1"\ndst = "r1"\nvm = "nope"\n', "flows[1].vm: unknown VM"),
        ('[[flows]]\nid = "b"\nsrc = "l1"\ndst = "r1"\ncos = "mrg"\n', "flows[1].cos"),
        ('[[vms]]\nid = "v"\nhost = "l1"\ntheta = "11Gbit"\n', "vms[0].theta"),
        ('[[arrivals]]\nworkload = "nosuch"\nload = 0.3\n', "arrivals[0].workload"),
        ('[[arrivals]]\nworkload = "websearch"\n', "arrivals[0]: give exactly one of load and rate_per_s"),
        ('[routing]\nkind = "leaf_spine_paper"\n', "routing.kind"),
        ("[cc]\nrcos = 0.5\n", "cc.rcos"),
        ("[transport]\nhost_backpressure = false\nhost_fq = 2\n", "host_fq needs host_backpressure"),
        ("[transport]\nhost_fq = -1\n", "transport.host_fq"),
    ],
)
def test_validation_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], patch: str, needle: str
) -> None:
    text = patch if patch.startswith("[run\n") else BASE + "\n" + patch
    if patch.startswith("[run]"):
        text = BASE.replace("[run]\n", patch)
    line = _error(tmp_path, capsys, text)
    assert needle in line, line


def test_explicit_topology_no_route(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = """
[topology]
kind = "explicit"
nodes = [{name = "a", kind = "host"}, {name = "b", kind = "host"}, {name = "s1", kind = "switch"},
         {name = "c", kind = "host"}, {name = "s2", kind = "switch"}]
links = [{a = "a", b = "s1", rate = "10Gbit", delay = "1us"},
         {a = "b", b = "s1", rate = "10Gbit", delay = "1us"},
         {a = "c", b = "s2", rate = "10Gbit", delay = "1us"}]

[[flows]]
id = "x"
src = "a"
dst = "c"
"""
    assert "flows[0]: no route from 'a' to 'c'" in _error(tmp_path, capsys, text)
    ok = text.replace('dst = "c"', 'dst = "b"')
    (tmp_path / "ok.toml").write_text(ok)
    eng = to_engine(load_scenario(tmp_path / "ok.toml"))
    assert eng["topology"]["kind"] == "explicit" and len(eng["topology"]["links"]) == 3


def test_missing_file() -> None:
    with pytest.raises(UserError, match="no such scenario file"):
        load_scenario("/nonexistent/x.toml")


def test_shipped_scenarios_validate() -> None:
    files = sorted((REPO / "scenarios").glob("*.toml"))
    assert files
    for p in files:
        if p.name.startswith("compare-"):  # comparison files: tests/test_compare.py validates them
            continue
        to_engine(load_scenario(p))


def test_to_toml_round_trip() -> None:
    import tomllib

    obj = {
        "run": {"seed": 3, "duration": "20ms", "warmup": "5ms"},
        "topology": {"kind": "dumbbell", "left_hosts": 1, "right_hosts": 1, "bottleneck_rate": "1Gbit"},
        "flows": [{"id": "f", "src": "l0", "dst": "r0", "changes": [{"at": "5ms", "omega": 2.0}]}],
    }
    again = tomllib.loads(to_toml(obj, header="generated"))
    assert again == obj
    assert to_engine(parse_scenario(again)) == to_engine(parse_scenario(obj))
