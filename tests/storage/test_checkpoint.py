"""Offset checkpoint files: Kafka's text format (spec 1.4) and crash atomicity (spec R7).

The R7 tests enumerate a crash at every mutating filesystem call of
``OffsetCheckpointFile.write`` (plain and torn-write variants), then "restart" with a fresh
``OsFileSystem`` and require the file to hold exactly the old or exactly the new entries.
"""

from __future__ import annotations

import errno
import os
import random
import tempfile
from collections.abc import Mapping
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compactlog.errors import MalformedCheckpointError, StorageError
from compactlog.storage.checkpoint import (
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    OffsetCheckpointFile,
    TopicPartition,
    format_checkpoint,
    parse_checkpoint,
)
from compactlog.storage.fs import OsFileSystem
from tests.support.faultfs import FaultInjectingFileSystem, SimulatedCrash, count_mutations

CHECKPOINT_NAMES = [
    RECOVERY_POINT_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    CLEANER_OFFSET_CHECKPOINT,
]

OLD: dict[TopicPartition, int] = {("orders", 0): 100, ("orders", 1): 250, ("payments", 7): 3}
NEW: dict[TopicPartition, int] = {
    ("orders", 0): 4182,
    ("orders", 1): 251,
    ("invoices", 12): 9_000_000_000,
    ("a.b_c-d", 0): 0,
}

topics = st.from_regex(r"[a-zA-Z0-9._-]{1,249}", fullmatch=True)
partitions = st.integers(min_value=0, max_value=2**31 - 1)
offsets = st.integers(min_value=0, max_value=2**63 - 1)
checkpoints = st.dictionaries(st.tuples(topics, partitions), offsets, max_size=20)

# -- format ----------------------------------------------------------------------------------------


def test_format_matches_kafka_bytes() -> None:
    entries = {("orders", 3): 4182, ("payments", 0): 77}
    assert format_checkpoint(entries) == b"0\n2\norders 3 4182\npayments 0 77\n"


def test_format_empty() -> None:
    assert format_checkpoint({}) == b"0\n0\n"
    assert parse_checkpoint(b"0\n0\n") == {}


# -- parse: what reads as "no entries" -------------------------------------------------------------


@pytest.mark.parametrize("data", [b"", b"0\n", b"0"], ids=["empty", "no-count-line", "no-newline"])
def test_empty_or_missing_count_line_reads_as_no_entries(data: bytes) -> None:
    assert parse_checkpoint(data) == {}


def test_parse_example() -> None:
    data = b"0\n3\norders 3 4182\norders 0 0\npayments 1 77\n"
    assert parse_checkpoint(data) == {("orders", 3): 4182, ("orders", 0): 0, ("payments", 1): 77}


def test_fields_split_on_runs_of_whitespace() -> None:
    assert parse_checkpoint(b"0\n1\norders  3\t4182\n") == {("orders", 3): 4182}


def test_crlf_line_endings() -> None:
    assert parse_checkpoint(b"0\r\n1\r\norders 3 4182\r\n") == {("orders", 3): 4182}


def test_missing_final_newline() -> None:
    assert parse_checkpoint(b"0\n1\norders 3 4182") == {("orders", 3): 4182}


# -- parse: malformed ------------------------------------------------------------------------------

MALFORMED = {
    "version-1": b"1\n0\n",
    "version-negative": b"-1\n0\n",
    "version-not-a-number": b"zero\n0\n",
    "count-not-a-number": b"0\ntwo\norders 0 1\norders 1 2\n",
    "two-fields": b"0\n1\norders 3\n",
    "four-fields": b"0\n1\norders 3 4182 9\n",
    "one-field": b"0\n1\norders\n",
    "partition-not-a-number": b"0\n1\norders x 4182\n",
    "offset-not-a-number": b"0\n1\norders 3 x\n",
    "more-entries-than-count": b"0\n1\norders 3 4182\npayments 0 77\n",
    "fewer-entries-than-count": b"0\n2\norders 3 4182\n",
    "entries-but-count-zero": b"0\n0\norders 3 4182\n",
    "count-but-no-entries": b"0\n5\n",
    "not-utf8": b"\xff\xfe\x00\x01garbage",
    "binary-garbage": bytes(range(256)),
    "nul-bytes": b"\x00\x00\x00\x00",
    "torn-utf8": "0\n1\ntopic-\u00e9 0 1\n".encode()[:-5] + b"\xc3",
}


@pytest.mark.parametrize("data", MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_checkpoint_raises(data: bytes) -> None:
    with pytest.raises(MalformedCheckpointError):
        parse_checkpoint(data)


def test_error_names_the_file() -> None:
    with pytest.raises(MalformedCheckpointError, match=RECOVERY_POINT_CHECKPOINT):
        parse_checkpoint(b"1\n0\n", RECOVERY_POINT_CHECKPOINT)


@given(st.binary(max_size=200))
@settings(max_examples=300)
def test_garbage_bytes_parse_or_raise_the_one_error(data: bytes) -> None:
    try:
        result = parse_checkpoint(data)
    except MalformedCheckpointError:
        return
    assert isinstance(result, dict)


@given(checkpoints, st.data())
def test_truncated_checkpoint_is_never_misread(
    entries: dict[TopicPartition, int], data: st.DataObject
) -> None:
    """A checkpoint cut anywhere reads as nothing, as the whole, or as malformed; never a subset.

    This is what a partial file would look like if writes were not atomic: the format itself
    catches most cuts through the count line, but a cut at a line boundary that drops whole entry
    lines must fail the count check.
    """
    full = format_checkpoint(entries)
    cut = data.draw(st.integers(min_value=0, max_value=len(full)), label="cut")
    try:
        parsed = parse_checkpoint(full[:cut])
    except MalformedCheckpointError:
        return
    if parsed:
        # The only non-empty successful parses of a prefix are the whole file, or the whole file
        # minus its final newline, or a last offset cut short (a digit prefix is still a number).
        assert parsed.keys() == entries.keys()


# -- round trip ------------------------------------------------------------------------------------


@given(checkpoints)
def test_round_trip(entries: dict[TopicPartition, int]) -> None:
    data = format_checkpoint(entries)
    assert parse_checkpoint(data) == entries
    lines = data.decode().split("\n")
    assert lines[0] == "0"
    assert lines[1] == str(len(entries))
    assert lines[-1] == ""  # every line ends in a newline
    assert all(len(line.split(" ")) == 3 for line in lines[2:-1])  # single spaces


@given(checkpoints)
@settings(max_examples=50, deadline=None)
def test_file_round_trip(entries: dict[TopicPartition, int]) -> None:
    with tempfile.TemporaryDirectory() as d:
        checkpoint = OffsetCheckpointFile(OsFileSystem(), d, RECOVERY_POINT_CHECKPOINT)
        checkpoint.write(entries)
        assert checkpoint.read() == entries
        assert os.listdir(d) == [RECOVERY_POINT_CHECKPOINT]


# -- the file --------------------------------------------------------------------------------------


def test_missing_file_reads_as_empty(tmp_path: Path) -> None:
    checkpoint = OffsetCheckpointFile(OsFileSystem(), str(tmp_path), CLEANER_OFFSET_CHECKPOINT)
    assert checkpoint.read() == {}
    assert checkpoint.path == str(tmp_path / CLEANER_OFFSET_CHECKPOINT)


def test_write_replaces_and_leaves_no_temporary(tmp_path: Path) -> None:
    checkpoint = OffsetCheckpointFile(OsFileSystem(), str(tmp_path), LOG_START_OFFSET_CHECKPOINT)
    checkpoint.write(NEW)
    checkpoint.write(OLD)
    assert checkpoint.read() == OLD
    assert os.listdir(tmp_path) == [LOG_START_OFFSET_CHECKPOINT]


def test_malformed_file_raises_on_read(tmp_path: Path) -> None:
    (tmp_path / RECOVERY_POINT_CHECKPOINT).write_bytes(b"0\n3\norders 0 1\n")
    checkpoint = OffsetCheckpointFile(OsFileSystem(), str(tmp_path), RECOVERY_POINT_CHECKPOINT)
    with pytest.raises(MalformedCheckpointError, match="expected 3 entries"):
        checkpoint.read()


def test_write_goes_through_the_atomic_discipline(tmp_path: Path) -> None:
    """.tmp is created, truncated, written and fsynced, then renamed and the directory fsynced."""
    OffsetCheckpointFile(OsFileSystem(), str(tmp_path), RECOVERY_POINT_CHECKPOINT).write(OLD)
    fs = FaultInjectingFileSystem()
    OffsetCheckpointFile(fs, str(tmp_path), RECOVERY_POINT_CHECKPOINT).write(NEW)
    target = str(tmp_path / RECOVERY_POINT_CHECKPOINT)
    assert fs.trace is not None
    assert [(op, path) for _, op, path in fs.trace] == [
        ("create", target + ".tmp"),
        ("truncate", target + ".tmp"),
        ("write_at", target + ".tmp"),
        ("sync", target + ".tmp"),
        ("rename", target + ".tmp"),
        ("sync_dir", str(tmp_path)),
    ]


# -- R7: checkpoint atomicity under crashes --------------------------------------------------------


def _prepare(d: Path, name: str, old: Mapping[TopicPartition, int] | None, stale_tmp: bool) -> None:
    d.mkdir()
    if old is not None:
        OffsetCheckpointFile(OsFileSystem(), str(d), name).write(old)
    if stale_tmp:
        # A leftover from an earlier crash, longer than the new content.
        (d / (name + ".tmp")).write_bytes(b"0\n1\nleftover 0 1\n" + b"x" * 4096)


def _read_after_restart(d: Path, name: str, context: str) -> dict[TopicPartition, int] | None:
    """The checkpoint as a restarted broker sees it; ``None`` when the file does not exist."""
    fs = OsFileSystem()
    checkpoint = OffsetCheckpointFile(fs, str(d), name)
    if not fs.exists(checkpoint.path):
        return None
    try:
        return checkpoint.read()
    except MalformedCheckpointError as exc:
        raw = fs.read_file(checkpoint.path)
        pytest.fail(f"{context}: partial checkpoint file {raw!r}: {exc}")


def _crash_points(tmp_path: Path, name: str, old: Mapping[TopicPartition, int] | None) -> int:
    d = tmp_path / "count"
    _prepare(d, name, old, stale_tmp=False)
    n = count_mutations(lambda fs: OffsetCheckpointFile(fs, str(d), name).write(NEW))
    assert n >= 5, "write_file_atomically should make at least truncate/write/sync/rename/sync_dir"
    return n


def _check_crash(
    tmp_path: Path,
    name: str,
    old: Mapping[TopicPartition, int] | None,
    k: int,
    *,
    partial_write: bool | random.Random,
    seed: int | None,
    stale_tmp: bool = False,
) -> dict[TopicPartition, int] | None:
    context = (
        f"{name}: crash at call #{k}, partial_write={partial_write!r}, seed={seed}, "
        f"old file={'yes' if old is not None else 'no'}, stale .tmp={stale_tmp}"
    )
    d = tmp_path / f"{name}-k{k}-{seed}-{partial_write is not False}-{stale_tmp}"
    _prepare(d, name, old, stale_tmp)
    fs = FaultInjectingFileSystem()
    fs.crash_at(k, partial_write=partial_write)
    with pytest.raises(SimulatedCrash):
        OffsetCheckpointFile(fs, str(d), name).write(NEW)
    assert fs.crashed is not None, context
    context += f", trace={fs.trace}"

    after = _read_after_restart(d, name, context)
    if old is None:
        assert after is None or after == NEW, context
    else:
        assert after == dict(old) or after == NEW, f"{context}: read {after}"

    # The restarted broker can write again, whatever the crash left behind.
    OffsetCheckpointFile(OsFileSystem(), str(d), name).write(OLD)
    assert _read_after_restart(d, name, context) == OLD, context
    assert os.listdir(d) == [name], context
    return after


@pytest.mark.parametrize("name", CHECKPOINT_NAMES)
@pytest.mark.parametrize("had_file", [True, False], ids=["old-file", "no-file"])
def test_r7_crash_at_every_call(tmp_path: Path, name: str, had_file: bool) -> None:
    old = OLD if had_file else None
    n = _crash_points(tmp_path, name, old)
    outcomes = [
        _check_crash(tmp_path, name, old, k, partial_write=False, seed=None)
        for k in range(1, n + 1)
    ]
    # Both outcomes really happen: old (or missing) before the rename, new after it.
    assert outcomes[0] == old
    assert outcomes[-1] == NEW


@pytest.mark.parametrize("had_file", [True, False], ids=["old-file", "no-file"])
@pytest.mark.parametrize("seed", range(25))
def test_r7_torn_writes(tmp_path: Path, had_file: bool, seed: int) -> None:
    old = OLD if had_file else None
    name = RECOVERY_POINT_CHECKPOINT
    n = _crash_points(tmp_path, name, old)
    for k in range(1, n + 1):
        _check_crash(tmp_path, name, old, k, partial_write=random.Random(seed), seed=seed)


@pytest.mark.parametrize("name", CHECKPOINT_NAMES)
def test_r7_half_written_and_stale_tmp(tmp_path: Path, name: str) -> None:
    n = _crash_points(tmp_path, name, OLD)
    for k in range(1, n + 1):
        _check_crash(tmp_path, name, OLD, k, partial_write=True, seed=None)
    # With a stale .tmp left by an earlier crash, open() creates nothing: one call fewer.
    for k in range(1, n):
        _check_crash(tmp_path, name, OLD, k, partial_write=random.Random(k), seed=k, stale_tmp=True)


@given(old=checkpoints, new=checkpoints, k=st.integers(1, 6), seed=st.integers(0, 2**32 - 1))
@settings(max_examples=60, deadline=None)
def test_r7_random_contents(
    old: dict[TopicPartition, int], new: dict[TopicPartition, int], k: int, seed: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        name = CLEANER_OFFSET_CHECKPOINT
        OffsetCheckpointFile(OsFileSystem(), tmp, name).write(old)
        fs = FaultInjectingFileSystem()
        fs.crash_at(k, partial_write=random.Random(seed))
        with pytest.raises(SimulatedCrash):
            OffsetCheckpointFile(fs, tmp, name).write(new)
        after = _read_after_restart(d, name, f"crash at call #{k}, seed={seed}")
        assert after in (old, new), f"crash at call #{k}, seed={seed}: read {after}"


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EIO])
def test_io_error_at_every_call_is_reported_and_leaves_old_or_new(
    tmp_path: Path, code: int
) -> None:
    """R19 for checkpoints: an injected error always surfaces, and the file is still whole."""
    name = RECOVERY_POINT_CHECKPOINT
    n = _crash_points(tmp_path, name, OLD)
    for k in range(1, n + 1):
        d = tmp_path / f"fail-{code}-{k}"
        _prepare(d, name, OLD, stale_tmp=False)
        fs = FaultInjectingFileSystem()
        fs.fail_at(k, code)
        with pytest.raises(StorageError, match=errno.errorcode[code]):
            OffsetCheckpointFile(fs, str(d), name).write(NEW)
        context = f"{errno.errorcode[code]} at call #{k}, trace={fs.trace}"
        after = _read_after_restart(d, name, context)
        assert after in (OLD, NEW), context
