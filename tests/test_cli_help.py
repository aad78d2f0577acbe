"""What the help says (issue 29): every choice listed, clean one-line option help, --version, units."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from paccp.cli import main

# every command and group with options of its own, as a user would type them
COMMANDS = [
    [], ["run"], ["reproduce"], ["optimum"], ["sweep"], ["report"], ["compare"], ["crosscheck"],
    ["price", "quote"], ["price", "buy"], ["price", "consistency"], ["bill", "ingest"], ["bill", "invoice"],
    ["bill", "tenant", "add"], ["datapath"], ["datapath", "load"], ["datapath", "vm", "set"], ["testbed"],
]  # fmt: skip


def _help(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    try:
        main([*args, "--help"])
    except SystemExit as exc:
        assert exc.code in (0, None)
    return capsys.readouterr().out


def test_reproduce_help_lists_every_experiment(capsys: pytest.CaptureFixture[str]) -> None:
    from paccp.experiments import load_all
    from paccp.sim.cli import EXPERIMENT_IDS

    assert sorted(EXPERIMENT_IDS) == sorted(load_all())
    text = _help(["reproduce"], capsys)
    for exp_id in EXPERIMENT_IDS:
        assert exp_id in text.split() or f"{exp_id}" in text, exp_id
    assert "[transport]" in text  # not eaten as markup


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a) or "paccp")
def test_help_is_clean(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    text = _help(args, capsys)
    assert "``" not in text, "literal double backticks"
    assert "<bool>" not in text, "a flag shown as taking a value"
    assert "\x1b" not in text
    for bad in ("(; ", "must be its\n", "must be its ", "s.t.\n"):
        assert bad not in text, bad


def test_fixed_help_strings(capsys: pytest.CaptureFixture[str]) -> None:
    assert "[compare.quick] table" in " ".join(_help(["compare"], capsys).split())
    assert "every record must name it" in " ".join(_help(["bill", "ingest"], capsys).split())


def test_version() -> None:
    res = subprocess.run([sys.executable, "-m", "paccp.cli", "--version"], capture_output=True, text=True)
    assert res.returncode == 0 and res.stdout.startswith("paccp ") and res.stdout.split()[1][0].isdigit()


def test_optimum_accepts_human_units(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prob = {
        "links": {"l": "40Gbit", "m": 10e9},
        "flows": [
            {"id": "a", "route": ["l"], "theta_bps": "25Gbit", "omega": 1},
            {"id": "b", "route": ["l", "m"], "omega": 1},
        ],
    }
    f = tmp_path / "p.json"
    f.write_text(json.dumps(prob))
    main(["optimum", str(f)])
    sol = json.loads(capsys.readouterr().out)
    assert sol["rates_bps"]["a"] == pytest.approx(30e9, rel=1e-6)  # 40 Gb/s shared, b capped at 10 by m
    assert sol["rates_bps"]["b"] == pytest.approx(10e9, rel=1e-6)
    f.write_text(json.dumps({"links": {"l": "40 furlongs"}, "flows": []}))
    with pytest.raises(SystemExit) as exc:
        main(["optimum", str(f)])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "links.'l': capacity" in err and len(err.splitlines()) == 1


def test_compare_help_lists_every_scheme(capsys: pytest.CaptureFixture[str]) -> None:
    from paccp.compare.cli import DEFAULT_SCHEMES
    from paccp.compare.host_scheme import VARIANTS
    from paccp.compare.schemes import DIAGNOSTICS, SCHEMES

    # the default runs every scheme but paccp-host's ablations and variants and the diagnostics; the
    # help lists them all
    variants = {f"paccp-host-{n}" for n in VARIANTS}
    assert set(DEFAULT_SCHEMES.split(",")) == {
        s for s in SCHEMES if not s.startswith("paccp-host-no-") and s not in variants | set(DIAGNOSTICS)
    }
    assert set(DIAGNOSTICS) <= set(SCHEMES)
    # the help wraps at 80 columns and may break a name after a hyphen
    text = re.sub(r"-\s+", "-", " ".join(_help(["compare"], capsys).split()))
    assert all(s in text for s in SCHEMES), text
