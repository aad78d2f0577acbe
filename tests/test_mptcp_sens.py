"""The mptcp-fair sensitivity tool (docs/explanation/mptcp.md, "Host timing and the testbed's RTT"),
scaled down."""

from __future__ import annotations

import json

import pytest


def test_sensitivity_run_prints_one_json_line(capsys: pytest.CaptureFixture[str]) -> None:
    from paccp.experiments import mptcp_sens

    mptcp_sens.main(["--n-c", "3", "--queue", "drop_tail", "--link-delay", "25us", "--seconds", "0.3"])
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["args"]["link_delay"] == "25us"
    assert set(out["wc_mbps"]) == {"S1", "S3", "S4"} and out["wc_mbps"]["S1"] > 0
    assert out["per_server"]["S1"]["subflows"] == 3 and out["per_server"]["S3"]["subflows"] == 1
    spec = mptcp_sens.sens_spec(5, "red", link_delay="50us", ack_delay=None)
    assert spec["transport"] == {} and {link["delay"] for link in spec["topology"]["links"]} == {"50us"}
    assert mptcp_sens.sens_spec(3, "red", linux=True)["transport"]["min_rto"] == "200ms"


def test_a_bad_delay_is_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    from paccp.experiments import mptcp_sens

    with pytest.raises(SystemExit) as e:
        mptcp_sens.main(["--link-delay", "ten", "--seconds", "0.1"])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("mptcp_sens: error: ") and "delay" in err[0]
