"""Disk full and I/O errors in the write paths: a failed append leaves no trace, no offset is
handed out twice (issue 17, finding 3).

Every test runs the store over :class:`~tests.support.faultfs.FaultInjectingFileSystem` and
makes one mutating call of an operation fail (ENOSPC and EIO), at every call the operation
makes, then checks:

* an append or roll that failed was undone: the partition directory is byte for byte what it
  was, the log end offset did not move, the error names the file and the errno, and once the
  fault is gone ("space returns") appends continue at the same offset;
* when the undo cannot be done either (every later call fails too), or an fsync failed, the log
  is offline: writes are refused with a StorageError saying so, reads serve what was
  acknowledged, the close writes no clean-shutdown marker, and the reopened store has every
  acknowledged record; a refused record found there was reported as possibly present;
* after reopening, from a clean close and from an abandoned store (a kill), every acknowledged
  record is read back with its offset and value and no offset is there twice;
* a failed checkpoint or topics-file write leaves the old file as it was.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from compactlog.errors import StorageError
from compactlog.records import build_batch
from compactlog.storage.checkpoint import RECOVERY_POINT_CHECKPOINT
from compactlog.storage.datadir import CLEAN_SHUTDOWN_FILE
from compactlog.storage.fs import OsFileSystem
from compactlog.storage.store import Store
from compactlog.storage.topic_catalog import TOPICS_FILE
from tests.support.faultfs import FaultInjectingFileSystem

NOW = 1_700_000_000_000
TOPIC = "t"
ERRNOS = pytest.mark.parametrize("code", [errno.ENOSPC, errno.EIO], ids=["ENOSPC", "EIO"])
CLOSE_KINDS = ("clean", "kill")

Acked = dict[int, bytes]


def _clock() -> int:
    return NOW


def _open(data: Path, fs: Any = None) -> Store:
    return Store.open(data, _clock, fs=fs if fs is not None else OsFileSystem())


def _setup(data: Path, fs: FaultInjectingFileSystem, **config: Any) -> tuple[Store, Acked]:
    """A store with topic ``t`` (an index entry for every batch after the first) and 5 acked
    one-record appends, plus topic ``u`` to show other logs are not affected."""
    store = _open(data, fs)
    small = {"segment.bytes": 1 << 20, "segment.index.bytes": 1 << 16}  # quick to compare
    store.create_topic(TOPIC, 1, {"index.interval.bytes": 1, **small, **config})
    store.create_topic("u", 1)
    acked: Acked = {}
    for i in range(5):
        value = b"a%d" % i
        acked[store.append(TOPIC, 0, [(b"k%d" % (i % 3), value)])] = value
    return store, acked


def _several_batches(tag: bytes, batches: int, per_batch: int = 2) -> tuple[bytes, list[bytes]]:
    """``batches`` batches of ``per_batch`` records (one append of several batches)."""
    data, values = [], []
    offset = 0
    for b in range(batches):
        records = [(b"k%d" % r, tag + b"-%d-%d" % (b, r)) for r in range(per_batch)]
        data.append(build_batch(records, base_offset=offset, timestamps=NOW + b))
        values += [v for _, v in records]
        offset += per_batch
    return b"".join(data), values


def _files(store: Store, topic: str = TOPIC) -> dict[str, bytes]:
    directory = os.path.dirname(store.segments(topic, 0)[0].path)
    return {name: Path(directory, name).read_bytes() for name in sorted(os.listdir(directory))}


def _append_values(store: Store, values: list[bytes]) -> Acked:
    acked: Acked = {}
    for value in values:
        acked[store.append(TOPIC, 0, [(b"k", value)])] = value
    return acked


def _stop(store: Store, kind: str) -> None:
    if kind == "clean":
        store.close()
    else:
        store.abandon()


def _check_reopened(data: Path, acked: Acked, refused: list[bytes], *, may_hold: bool) -> Store:
    """Reopen (real filesystem): every acknowledged record at its offset, no offset twice, and
    a refused record only where it was reported as possibly there (``may_hold``)."""
    store = _open(data)
    records = list(store.read(TOPIC, 0))
    offsets = [r.offset for r in records]
    assert offsets == sorted(set(offsets)), f"an offset twice or out of order: {offsets}"
    found = {r.offset: r.value for r in records}
    for offset, value in acked.items():
        assert found.get(offset) == value, f"acknowledged offset {offset} lost: {found}"
    extra = {o: v for o, v in found.items() if o not in acked}
    if not may_hold:
        assert not extra, f"refused records survived: {extra}"
    assert set(extra.values()) <= set(refused), f"records nobody wrote: {extra}"
    # And the log takes appends at its end, after everything in it.
    end = store.log_end_offset(TOPIC, 0)
    assert store.append(TOPIC, 0, [(b"k", b"after")]) == end >= max(found, default=-1) + 1
    return store


def _calls_of(operation: Callable[[Store], object], data: Path, **config: Any) -> int:
    """How many mutating calls ``operation`` makes on a fresh setup."""
    fs = FaultInjectingFileSystem()
    store, _ = _setup(data, fs, **config)
    before = fs.calls
    operation(store)
    n = fs.calls - before
    store.close()
    shutil.rmtree(data)
    return n


def _error_names_file_and_errno(exc: StorageError, code: int, fs: FaultInjectingFileSystem) -> None:
    trace = fs.trace
    assert trace is not None
    failed = [c for c in trace if c.path in str(exc)]
    assert failed, f"the error names no file: {exc}"
    assert errno.errorcode[code] in str(exc), f"the error names no errno: {exc}"


def _fail_nth_call_on(fs: FaultInjectingFileSystem, prefix: str, k: int, code: int) -> None:
    """Fail the ``k``-th mutating call from now on a path starting with ``prefix``."""
    seen = [0]

    def predicate(number: int, op: str, path: str) -> bool:
        if not path.startswith(prefix):
            return False
        seen[0] += 1
        return seen[0] == k

    fs.fail_when(predicate, code)


# --- finding 3 ------------------------------------------------------------------------------------
@pytest.mark.parametrize("close", CLOSE_KINDS)
def test_finding_3_index_write_fails_then_space_returns(tmp_path: Path, close: str) -> None:
    """The reproduction of finding 3: the ``.index`` write of an append fails with ENOSPC; then
    space returns and three appends are acknowledged; reopened, all of them are there and the
    refused one is not (before: the refused batch stayed in the ``.log``, the next append reused
    its offset, and the reopen cut the three acknowledged records)."""
    data = tmp_path / "data"
    fs = FaultInjectingFileSystem()
    store, acked = _setup(data, fs)
    end = store.log_end_offset(TOPIC, 0)
    before = _files(store)
    fs.fail_when(lambda n, op, path: op == "write_at" and path.endswith(".index"), errno.ENOSPC)
    with pytest.raises(StorageError, match=r"\.index' failed: ENOSPC") as info:
        store.append(TOPIC, 0, [(b"k", b"refused")])
    assert "was undone" in str(info.value)
    assert store.log_end_offset(TOPIC, 0) == end
    assert _files(store) == before, "the refused append left bytes behind"
    fs.clear_faults()
    more = _append_values(store, [b"b0", b"b1", b"b2"])
    assert sorted(more) == [end, end + 1, end + 2], "no offset handed out twice"
    acked |= more
    assert {r.offset: r.value for r in store.read(TOPIC, 0)} == acked
    _stop(store, close)
    _check_reopened(data, acked, [b"refused"], may_hold=False).close()


# --- appends: every mutating call ---------------------------------------------------------------
@ERRNOS
@pytest.mark.parametrize("batches", [3, 40], ids=["3-batches", "40-batches-vectorized"])
@pytest.mark.parametrize("preallocate", [False, True], ids=["plain", "preallocate"])
def test_append_failing_at_every_call_is_undone(
    tmp_path: Path, code: int, batches: int, preallocate: bool
) -> None:
    config = {"preallocate": preallocate}
    payload, values = _several_batches(b"refused", batches)

    def append(store: Store) -> object:
        return store.append_batch(TOPIC, 0, payload, from_client=False)

    n = _calls_of(append, tmp_path / "count", **config)
    assert n >= 3  # the .log, the .index and the .timeindex
    for k in range(1, n + 1):
        data = tmp_path / f"k{k}"
        fs = FaultInjectingFileSystem()
        store, acked = _setup(data, fs, **config)
        end = store.log_end_offset(TOPIC, 0)
        before = _files(store)
        fs.fail_at(fs.calls + k, code)
        with pytest.raises(StorageError) as info:
            append(store)
        _error_names_file_and_errno(info.value, code, fs)
        log = store.log(TOPIC, 0)
        assert log.offline is None, f"call {k}: {log.offline}"
        assert store.log_end_offset(TOPIC, 0) == end, f"call {k}"
        assert _files(store) == before, f"call {k} ({fs.trace[-1] if fs.trace else ''}) left bytes"
        # Space returns: the same append now works, at the same offsets.
        fs.clear_faults()
        assert append(store) == end, f"call {k}"
        acked |= {end + i: v for i, v in enumerate(values)}
        acked |= _append_values(store, [b"c%d" % k])
        _stop(store, CLOSE_KINDS[k % 2])
        _check_reopened(data, acked, [], may_hold=False).close()
        shutil.rmtree(data)


@ERRNOS
def test_append_whose_undo_fails_takes_the_log_offline(tmp_path: Path, code: int) -> None:
    """From call k of the append on, every mutating call fails (the disk is gone): the undo
    cannot be done, so the log goes offline; reads keep working, other logs keep working, and
    the reopened store has every acknowledged record."""
    payload, values = _several_batches(b"refused", 3)

    def append(store: Store) -> object:
        return store.append_batch(TOPIC, 0, payload, from_client=False)

    n = _calls_of(append, tmp_path / "count")
    for k in range(1, n + 1):
        data = tmp_path / f"k{k}"
        fs = FaultInjectingFileSystem()
        store, acked = _setup(data, fs)
        end = store.log_end_offset(TOPIC, 0)
        first = fs.calls + k
        fs.fail_when(lambda number, op, path, first=first: number >= first, code)
        with pytest.raises(StorageError, match="is offline") as info:
            append(store)
        assert "undoing it failed too" in str(info.value)
        fs.clear_faults()  # even with space back, the log stays offline until reopened
        with pytest.raises(StorageError, match="refused: t-0 is offline"):
            store.append(TOPIC, 0, [(b"k", b"later")])
        with pytest.raises(StorageError, match="is offline"):
            store.roll(TOPIC, 0)
        assert store.log_end_offset(TOPIC, 0) == end
        assert {r.offset: r.value for r in store.read(TOPIC, 0)} == acked, "reads keep working"
        assert store.append("u", 0, [(b"k", b"v")]) == 0, "other logs are not offline"
        assert set(store.offline_logs()) == {(TOPIC, 0)}
        with pytest.raises(StorageError, match="could not be flushed"):
            store.flush()
        _stop(store, CLOSE_KINDS[k % 2])
        assert not (data / CLEAN_SHUTDOWN_FILE).exists(), "an offline log is not a clean stop"
        _check_reopened(data, acked, values, may_hold=True).close()
        shutil.rmtree(data)


def test_idempotent_producer_retry_after_a_refused_append(tmp_path: Path) -> None:
    """The producer state is not advanced by a refused append: the producer's retry of the same
    batch (same sequence) is accepted, at the offset the refused one would have had."""
    fs = FaultInjectingFileSystem()
    store, acked = _setup(tmp_path / "data", fs)
    end = store.log_end_offset(TOPIC, 0)

    def batch(seq: int, value: bytes) -> bytes:
        return build_batch(
            [(b"k", value)], timestamps=NOW, producer_id=7, producer_epoch=0, base_sequence=seq
        )

    fs.fail_when(lambda n, op, path: op == "write_at" and path.endswith(".log"), errno.ENOSPC)
    with pytest.raises(StorageError, match=r"\.log' failed: ENOSPC"):
        store.append_batch_info(TOPIC, 0, batch(0, b"p0"))
    fs.clear_faults()
    info = store.append_batch_info(TOPIC, 0, batch(0, b"p0"))
    assert (info.first_offset, info.duplicate) == (end, False)
    assert store.append_batch_info(TOPIC, 0, batch(1, b"p1")).first_offset == end + 1
    assert store.append_batch_info(TOPIC, 0, batch(1, b"p1")).duplicate
    acked |= {end: b"p0", end + 1: b"p1"}
    store.close()
    _check_reopened(tmp_path / "data", acked, [], may_hold=False).close()


# --- rolls ---------------------------------------------------------------------------------------
@ERRNOS
@pytest.mark.parametrize("preallocate", [False, True], ids=["plain", "preallocate"])
def test_roll_failing_at_every_call(tmp_path: Path, code: int, preallocate: bool) -> None:
    """A roll that fails is undone (no new segment, the active one as it was), except when only
    the producer snapshot failed: then the new empty segment stands, the partial snapshot is
    removed, and the error says so."""
    config = {"preallocate": preallocate}

    def roll(store: Store) -> object:
        store.roll(TOPIC, 0)
        return None

    n = _calls_of(roll, tmp_path / "count", **config)
    assert n >= 5
    for k in range(1, n + 1):
        data = tmp_path / f"k{k}"
        fs = FaultInjectingFileSystem()
        store, acked = _setup(data, fs, **config)
        end = store.log_end_offset(TOPIC, 0)
        before = _files(store)
        fs.fail_at(fs.calls + k, code)
        with pytest.raises(StorageError) as info:
            roll(store)
        _error_names_file_and_errno(info.value, code, fs)
        segments = store.segments(TOPIC, 0)
        failed = fs.trace[-1] if fs.trace else None
        if failed is not None and failed.op in ("sync", "sync_dir"):
            # The fsync of the rolled segment before the new one exists: a failed fsync cannot
            # be retried, so the log goes offline, with nothing changed on disk.
            assert store.log(TOPIC, 0).offline is not None
            assert [s.base_offset for s in segments] == [0]
            assert _files(store) == before
            _stop(store, CLOSE_KINDS[k % 2])
            _check_reopened(data, acked, [], may_hold=False).close()
            shutil.rmtree(data)
            continue
        assert store.log(TOPIC, 0).offline is None
        if "rolled to a new segment" in str(info.value):
            assert [s.base_offset for s in segments] == [0, end]
            assert not (data / "t-0" / f"{end:020d}.snapshot").exists()
        else:
            assert "was undone" in str(info.value)
            assert [s.base_offset for s in segments] == [0]
            assert _files(store) == before, f"call {k} ({fs.trace[-1] if fs.trace else ''})"
        fs.clear_faults()
        acked |= _append_values(store, [b"r0", b"r1"])
        assert sorted(acked)[-2:] == [end, end + 1]
        store.roll(TOPIC, 0)  # and a roll works again
        acked |= _append_values(store, [b"r2"])
        _stop(store, CLOSE_KINDS[k % 2])
        _check_reopened(data, acked, [], may_hold=False).close()
        shutil.rmtree(data)


@ERRNOS
def test_roll_inside_an_append_failing_refuses_the_append(tmp_path: Path, code: int) -> None:
    """``segment.bytes`` forces a roll at the next append: a failure in the roll refuses the
    append, and nothing of it is written."""
    fs = FaultInjectingFileSystem()
    store, acked = _setup(tmp_path / "data", fs, **{"segment.bytes": 400})
    while len(store.segments(TOPIC, 0)) == 1:
        acked |= _append_values(store, [b"fill%d" % len(acked)])
    last = store.segments(TOPIC, 0)[-1]
    while store.segments(TOPIC, 0)[-1].base_offset == last.base_offset:
        fs.fail_when(lambda n, op, path: op == "create" and path.endswith(".log"), code)
        end = store.log_end_offset(TOPIC, 0)
        try:
            store.append(TOPIC, 0, [(b"k", b"refused")])
        except StorageError as exc:
            assert "a roll to a new segment" in str(exc)
            assert store.log_end_offset(TOPIC, 0) == end
            break
        acked[end] = b"refused"  # this one fit without a roll
    else:  # pragma: no cover
        pytest.fail("no roll was attempted")
    fs.clear_faults()
    acked |= _append_values(store, [b"after-roll"])
    assert len(store.segments(TOPIC, 0)) >= 2
    store.close()
    refused = [b"refused"]
    reopened = _check_reopened(tmp_path / "data", acked, refused, may_hold=False)
    reopened.close()


# --- flushes -------------------------------------------------------------------------------------
@ERRNOS
def test_append_with_flush_failing_at_every_call(tmp_path: Path, code: int) -> None:
    """``flush.messages=1``: a write failure is undone as above; an fsync failure takes the log
    offline (a failed fsync cannot be retried), and the unacknowledged append is withdrawn."""
    config = {"flush.messages": 1}

    def append(store: Store) -> object:
        return store.append(TOPIC, 0, [(b"k", b"refused")])

    n = _calls_of(append, tmp_path / "count", **config)
    assert n >= 4  # the .log and .index writes and their fsyncs
    outcomes = set()
    for k in range(1, n + 1):
        data = tmp_path / f"k{k}"
        fs = FaultInjectingFileSystem()
        store, acked = _setup(data, fs, **config)
        end = store.log_end_offset(TOPIC, 0)
        fs.fail_at(fs.calls + k, code)
        with pytest.raises(StorageError) as info:
            append(store)
        _error_names_file_and_errno(info.value, code, fs)
        assert store.log_end_offset(TOPIC, 0) == end
        assert {r.offset: r.value for r in store.read(TOPIC, 0)} == acked
        fs.clear_faults()
        if store.log(TOPIC, 0).offline is None:
            outcomes.add("undone")
            acked |= _append_values(store, [b"f0"])
            may_hold = False
        else:
            outcomes.add("offline")
            assert "withdrawn" in str(info.value)
            with pytest.raises(StorageError, match="is offline"):
                append(store)
            may_hold = "withdrawn from the log and its file" not in str(info.value)
        _stop(store, CLOSE_KINDS[k % 2])
        _check_reopened(data, acked, [b"refused"], may_hold=may_hold).close()
        shutil.rmtree(data)
    assert outcomes == {"undone", "offline"}


def test_background_flush_failure_takes_only_that_log_offline(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fs = FaultInjectingFileSystem()
    store, acked = _setup(tmp_path / "data", fs)
    store.append("u", 0, [(b"k", b"u0")])
    fs.fail_when(lambda n, op, path: op == "sync" and "/t-0/" in path, errno.EIO)
    with (
        caplog.at_level(logging.ERROR, logger="compactlog.storage"),
        pytest.raises(StorageError, match="t-0 is offline: a flush failed"),
    ):
        store.flush()
    assert [r.message for r in caplog.records if r.levelno == logging.ERROR] == [
        str(store.log(TOPIC, 0).offline)
    ], "going offline is logged once, as an error"
    fs.clear_faults()
    assert store.log(TOPIC, 0).offline is not None
    assert store.log("u", 0).offline is None
    assert store.log("u", 0).recovery_point == 1, "the other log was flushed"
    store.flush_due_logs()  # skips the offline log
    store.remove_deleted_files()
    store.run_retention()
    store.close()
    assert not (tmp_path / "data" / CLEAN_SHUTDOWN_FILE).exists()
    _check_reopened(tmp_path / "data", acked, [], may_hold=False).close()


# --- checkpoints and the topics file --------------------------------------------------------------
@ERRNOS
def test_checkpoint_write_failure_keeps_the_old_file(tmp_path: Path, code: int) -> None:
    data = tmp_path / "data"
    fs = FaultInjectingFileSystem()
    store, _ = _setup(data, fs)
    path = data / RECOVERY_POINT_CHECKPOINT
    store.write_recovery_point_checkpoint()
    old = path.read_bytes()
    store.flush()  # the recovery points move: the next checkpoint differs
    first = fs.calls
    store.write_recovery_point_checkpoint()
    new = path.read_bytes()
    assert new != old
    n = fs.calls - first
    assert n == 6  # create .tmp, truncate, write, fsync, rename, fsync directory
    for k in range(1, n + 1):
        path.write_bytes(old)
        fs.fail_at(fs.calls + k, code)
        with pytest.raises(StorageError) as info:
            store.write_recovery_point_checkpoint()
        assert RECOVERY_POINT_CHECKPOINT in str(info.value)
        assert errno.errorcode[code] in str(info.value)
        if k < n:  # before the rename: the old file, whole; the .tmp is gone
            assert path.read_bytes() == old, f"call {k}"
            assert not Path(str(path) + ".tmp").exists(), f"call {k}"
        else:  # the rename happened, only the directory's fsync failed
            assert path.read_bytes() == new
    store.close()


@ERRNOS
@pytest.mark.parametrize("change", ["create", "alter", "delete"])
def test_topics_file_write_failure_keeps_the_old_file_and_topics(
    tmp_path: Path, code: int, change: str
) -> None:
    data = tmp_path / "data"
    fs = FaultInjectingFileSystem()
    store, _ = _setup(data, fs)
    path = data / TOPICS_FILE
    old = path.read_bytes()
    operations: dict[str, Callable[[], object]] = {
        "create": lambda: store.create_topic("v", 1),
        "alter": lambda: store.alter_config(TOPIC, {"retention.ms": 1234}),
        "delete": lambda: store.delete_topic("u"),
    }
    for k in range(1, 5):  # create .tmp, truncate, write, fsync: all before the rename
        _fail_nth_call_on(fs, str(path), k, code)
        with pytest.raises(StorageError, match=errno.errorcode[code]):
            operations[change]()
        fs.clear_faults()
        assert path.read_bytes() == old, f"call {k}"
        assert store.topics() == ["t", "u"]
        assert store.describe_config(TOPIC)["retention.ms"] != "1234"
    store.close()
    reopened = _open(data)
    assert reopened.topics() == ["t", "u"]
    reopened.close()


def test_close_with_a_failing_checkpoint_writes_no_marker(tmp_path: Path) -> None:
    data = tmp_path / "data"
    fs = FaultInjectingFileSystem()
    store, acked = _setup(data, fs)
    fs.fail_when(lambda n, op, path: RECOVERY_POINT_CHECKPOINT in path, errno.ENOSPC)
    with pytest.raises(StorageError, match="ENOSPC"):
        store.close()
    assert not (data / CLEAN_SHUTDOWN_FILE).exists()
    _check_reopened(data, acked, [], may_hold=False).close()


# --- a real, full tmpfs (optional) ----------------------------------------------------------------
@pytest.fixture
def small_tmpfs(tmp_path: Path) -> Iterator[Path]:
    mount_point = tmp_path / "tmpfs"
    mount_point.mkdir()
    try:
        result = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount_point)],
            check=False,
            capture_output=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"cannot mount a tmpfs here: {exc}")
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {result.stderr.decode().strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False, capture_output=True)


def test_real_full_tmpfs(small_tmpfs: Path) -> None:
    """Finding 3 on a real 2 MB tmpfs: append until ENOSPC, free space, append three more,
    reopen: every acknowledged record is there, no offset twice, the refused ones are not."""
    data = small_tmpfs / "data"
    store = _open(data)
    store.create_topic(TOPIC, 1, {"index.interval.bytes": 1, "segment.bytes": 256 * 1024})
    filler = small_tmpfs / "filler"
    acked: Acked = {}
    value = b"x" * 3000
    refused = 0
    with filler.open("wb") as f:
        f.write(b"\0" * (1536 * 1024))
    for i in range(10_000):
        try:
            acked[store.append(TOPIC, 0, [(b"k%d" % i, value + b"%d" % i)])] = value + b"%d" % i
        except StorageError as exc:
            assert "ENOSPC" in str(exc)
            refused += 1
            if refused == 3:
                break
    assert refused == 3, "the disk never filled"
    assert store.log(TOPIC, 0).offline is None
    filler.unlink()  # space returns
    end = store.log_end_offset(TOPIC, 0)
    more = _append_values(store, [b"b0", b"b1", b"b2"])
    assert sorted(more) == [end, end + 1, end + 2]
    acked |= more
    store.close()
    _check_reopened(data, acked, [], may_hold=False).close()
