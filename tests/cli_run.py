"""Running the real ``paccp`` entry point in the test's process, and its one-line errors."""

from __future__ import annotations

import pytest

from paccp.cli import main


def cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """The real entry point in this process: (exit code, stdout, stderr)."""
    try:
        main(args)
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def one_line_error(code: int, err: str) -> str:
    """Asserts exit code 2 with one ``paccp: error:`` line and no traceback; returns the line."""
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("paccp: error: "), err
    assert "Traceback" not in err
    return lines[0]
