"""Fixtures for the CLI tests: an in-process runner bound to a data directory in tmp_path."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_helpers import Cli
from click.testing import CliRunner


@pytest.fixture(autouse=True)
def _no_data_dir_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COMPACTLOG_DATA_DIR", raising=False)
    monkeypatch.delenv("COMPACTLOG_BOOTSTRAP_SERVER", raising=False)


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path / "data", CliRunner())
