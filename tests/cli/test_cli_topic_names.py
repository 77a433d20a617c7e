"""R18 through the CLI: bad topic names exit with 2 and one line, and nothing outside the data
directory changes (the listing of the surrounding tree is hashed before and after)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import check_one_line_failure
from click.testing import CliRunner

from compactlog.cli.main import main
from compactlog.errors import InvalidTopicError
from compactlog.storage.store import Store

CORPUS = {
    "dot": ".",
    "dot-dot": "..",
    "parent": "../x",
    "grandparent": "../../x",
    "absolute": "/tmp/x",
    "slash": "a/b",
    "backslash": "a\\b",
    "nul": "a\x00b",
    "empty": "",
    "250 chars": "x" * 250,
    "cyrillic a": "fruit-pric\u0435s",  # a Cyrillic "е" in place of "e"
    "fullwidth": "\uff46ruit",
    "zero width space": "fr\u200buit",
    "space": "fruit prices",
    "newline": "fruit\nprices",
    "tab": "a\tb",
    "colon": "a:b",
    "star": "*",
    "percent": "100%",
}

# Every command that takes a topic name.
COMMANDS = [
    ["topics", "create", "--"],
    ["topics", "describe", "--"],
    ["topics", "delete", "--"],
    ["configs", "describe", "--"],
    ["configs", "alter", "--set", "segment.ms=1000", "--"],
    ["produce", "--"],
    ["consume", "--"],
]


def tree_hash(root: Path, skip: Path) -> str:
    """A hash of every path (and file size) under ``root`` except inside ``skip``."""
    entries = []
    for directory, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if Path(directory, d) != skip]
        for name in dirs + files:
            full = Path(directory, name)
            entries.append(
                f"{full.relative_to(root)}:{full.lstat().st_size if full.is_file() else 'd'}"
            )
    return hashlib.sha256("\n".join(sorted(entries)).encode()).hexdigest()


@pytest.fixture
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """tmp_path/sandbox/data is the data directory; the working directory is the sandbox."""
    sandbox = tmp_path / "sandbox"
    (sandbox / "data").mkdir(parents=True)
    monkeypatch.chdir(sandbox)
    with Store.open(sandbox / "data") as store:
        store.create_topic("a.b")
    return sandbox


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c[:2]))
@pytest.mark.parametrize("name", list(CORPUS.values()), ids=list(CORPUS))
def test_bad_names_exit_2_and_touch_nothing(sandbox: Path, command: list[str], name: str) -> None:
    data = sandbox / "data"
    outside = tree_hash(sandbox.parent.parent, skip=data)
    inside = tree_hash(data, skip=data / "nothing")
    args = ["--data-dir", str(data), *command, name]
    result = CliRunner().invoke(main, args, input="k=v\n")
    line = check_one_line_failure(result, [2], repr(name))
    assert line.endswith("(INVALID_TOPIC_EXCEPTION)"), line
    assert "\n" not in line and "\x00" not in line
    assert tree_hash(sandbox.parent.parent, skip=data) == outside
    assert tree_hash(data, skip=data / "nothing") == inside


def test_a_dot_underscore_collision(sandbox: Path) -> None:
    data = sandbox / "data"
    outside = tree_hash(sandbox.parent.parent, skip=data)
    result = CliRunner().invoke(main, ["--data-dir", str(data), "topics", "create", "a_b"])
    line = check_one_line_failure(result, [2])
    assert "collides with existing topic" in line and line.endswith("(INVALID_TOPIC_EXCEPTION)")
    assert not (data / "a_b-0").exists()
    assert tree_hash(sandbox.parent.parent, skip=data) == outside


def test_names_that_look_like_options(sandbox: Path) -> None:
    """``-rf`` is a legal Kafka topic name: as an argument it is an unknown option (exit 2),
    after ``--`` it is a topic whose directory is an ordinary child of the data directory."""
    data = sandbox / "data"
    result = CliRunner().invoke(main, ["--data-dir", str(data), "topics", "create", "-rf"])
    check_one_line_failure(result, [2])
    assert not (data / "-rf-0").exists()
    result = CliRunner().invoke(main, ["--data-dir", str(data), "topics", "create", "--", "-rf"])
    assert result.exit_code == 0
    assert (data / "-rf-0").is_dir()


def test_nul_cannot_even_reach_a_real_process(sandbox: Path) -> None:
    """argv cannot carry NUL (the in-process tests above cover the library path)."""
    with pytest.raises(ValueError, match="null byte"):
        subprocess.run([sys.executable, "-m", "compactlog.cli.main", "topics", "create", "a\x00b"],
                       check=False)  # fmt: skip
    with Store.open(sandbox / "data") as store, pytest.raises(InvalidTopicError):
        store.create_topic("a\x00b")


def test_bad_name_in_a_real_process(sandbox: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "compactlog.cli.main", "--data-dir", "data", "topics", "create",
         "../escape"],
        capture_output=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stdout == b""
    assert result.stderr.count(b"\n") == 1 and result.stderr.startswith(b"Error: Topic name ")
    assert not (sandbox / "escape-0").exists()
