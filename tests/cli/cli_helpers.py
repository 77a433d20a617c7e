"""Helpers for the CLI tests (a plain module rather than conftest.py, whose module name other
test directories share)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from click.testing import CliRunner, Result

from compactlog.cli.main import main

#: Exit codes the CLI documents (compactlog --help).
DOCUMENTED_EXIT_CODES = frozenset({0, 1, 2, 3, 4, 5, 130})
_STDERR_LINE = re.compile(r"(Error|warning|info): \S.*")


@dataclass
class Cli:
    """``cli("topics", "list")`` runs ``compactlog --data-dir <data_dir> topics list``."""

    data_dir: Path
    runner: CliRunner

    def __call__(
        self, *args: str, input: bytes | str | None = None, data_dir: bool = True
    ) -> Result:
        prefix: list[str] = ["--data-dir", str(self.data_dir)] if data_dir else []
        return self.runner.invoke(main, [*prefix, *args], input=input)

    def ok(self, *args: str, input: bytes | str | None = None) -> Result:
        result = self(*args, input=input)
        assert result.exit_code == 0, (args, result.exit_code, result.stdout, result.stderr)
        return result


def error_lines(result: Result) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("Error:")]


def check_one_line_failure(result: Result, codes: Sequence[int], context: str = "") -> str:
    """The result failed with one of ``codes``, one ``Error:`` line and no traceback."""
    where = f"{context}: " if context else ""
    assert result.exit_code in codes, (
        f"{where}exit {result.exit_code}, expected {list(codes)}; stderr={result.stderr!r}"
    )
    assert isinstance(result.exception, SystemExit), f"{where}{result.exception!r}"
    assert "Traceback" not in result.stderr, f"{where}{result.stderr}"
    errors = error_lines(result)
    assert len(errors) == 1, f"{where}{result.stderr!r}"
    for line in result.stderr.splitlines():
        assert _STDERR_LINE.fullmatch(line), f"{where}unexpected stderr line {line!r}"
    return errors[0]
