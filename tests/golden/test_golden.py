"""R21's golden corpus: the files compactlog writes, and what dump-log and verify say of them.

* The corpus under ``corpus/`` is regenerated into a scratch directory and must be identical,
  byte for byte: any change to the bytes compactlog writes shows up here first.
* ``dump-log`` of every file and ``verify`` of every case are compared with the snapshots under
  ``snapshots/``. After a deliberate change, regenerate both with
  ``python tests/golden/make_corpus.py && UPDATE_GOLDEN=1 python -m pytest tests/golden``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from compactlog.cli.main import main
from tests.golden.make_corpus import generate

HERE = Path(__file__).parent
CORPUS = HERE / "corpus"
SNAPSHOTS = HERE / "snapshots"
CASES = ["normal", "compacted", "torn-tail", "transactions"]


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def test_the_corpus_is_reproduced_byte_for_byte(tmp_path: Path) -> None:
    generate(tmp_path / "corpus")
    fresh, golden = _files(tmp_path / "corpus"), _files(CORPUS)
    assert sorted(fresh) == sorted(golden)
    changed = [name for name in golden if fresh[name] != golden[name]]
    assert changed == [], f"files that no longer match the golden corpus: {changed}"


def _cli_output(*args: str) -> str:
    result = CliRunner().invoke(main, list(args))
    text = f"$ compactlog {' '.join(args)}\nexit {result.exit_code}\n{result.stdout}{result.stderr}"
    return text.replace(str(CORPUS), "<corpus>")


@pytest.mark.parametrize("case", CASES)
def test_dump_and_verify_match_their_snapshots(case: str) -> None:
    root = CORPUS / case
    parts = [_cli_output("--data-dir", str(root), "verify")]
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.name.startswith("."):
            parts.append(_cli_output("dump-log", str(path)))
    observed = "\n".join(parts)
    snapshot = SNAPSHOTS / f"{case}.txt"
    if os.environ.get("UPDATE_GOLDEN"):
        SNAPSHOTS.mkdir(exist_ok=True)
        snapshot.write_text(observed)
    assert observed == snapshot.read_text(), f"dump/verify output of {case} changed"


def test_the_corpus_reads_back_through_the_store(tmp_path: Path) -> None:
    """Every case opens (the torn tail is cut at its last whole batch) and reads in order."""
    import shutil

    from compactlog.storage.store import Store

    ends: dict[str, int] = {}
    for case in CASES:
        copy = tmp_path / case
        shutil.copytree(CORPUS / case, copy)
        with Store.open(copy) as store:
            for topic in store.topics():
                for partition in range(store.partitions(topic)):
                    offsets = [r.offset for r in store.read(topic, partition)]
                    assert offsets == sorted(set(offsets)), case
            if "orders" in store.topics():
                ends[case] = store.log_end_offset("orders", 0)
            if case == "torn-tail":
                assert store.load_stats[("orders", 0)].bytes_truncated > 0
    # the half-written batch is gone: the log ends where the intact one does
    assert ends["torn-tail"] == ends["normal"]
