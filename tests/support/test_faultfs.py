"""The fault-injecting filesystem: numbering, crashes, torn writes, injected I/O errors.

The reference for "what state should the directory be in before call k" is computed without the
fault-injecting layer: the workload is a list of steps, each making exactly one mutating call, and
replaying the first k-1 steps on the real filesystem gives the expected state.
"""

from __future__ import annotations

import errno
import os
import random
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from compactlog.errors import StorageError
from compactlog.storage.fs import FileHandle, FileSystem, OsFileSystem
from tests.support.faultfs import (
    MUTATING_OPS,
    PAGE,
    FaultInjectingFileSystem,
    MutatingCall,
    PowerLossFileSystem,
    SimulatedCrash,
    count_mutations,
)

MTIME_MS = 1_000_000_000_000  # 2001-09-09, far from "now", so a test can tell it was set

# -- a workload that makes one mutating call per step ----------------------------------------------

Ctx = dict[str, Any]
Step = tuple[str, Callable[[FileSystem, Path, Ctx], None]]


def _open_a(fs: FileSystem, d: Path, ctx: Ctx) -> None:
    ctx["a"] = fs.open(str(d / "sub" / "a"), create=True)


def _close_a_and_rename(fs: FileSystem, d: Path, ctx: Ctx) -> None:
    ctx.pop("a").close()  # not numbered
    fs.rename(str(d / "sub" / "a"), str(d / "b"))


STEPS: list[Step] = [
    ("makedirs", lambda fs, d, ctx: fs.makedirs(str(d / "sub"))),
    ("create", _open_a),
    ("append", lambda fs, d, ctx: ctx["a"].append(b"hello world, ")),
    ("append", lambda fs, d, ctx: ctx["a"].append(b"this is the second append")),
    ("write_at", lambda fs, d, ctx: ctx["a"].write_at(6, b"WORLD")),
    ("truncate", lambda fs, d, ctx: ctx["a"].truncate(20)),
    ("sync", lambda fs, d, ctx: ctx["a"].sync()),
    ("rename", _close_a_and_rename),
    ("set_mtime_ms", lambda fs, d, ctx: fs.set_mtime_ms(str(d / "b"), MTIME_MS)),
    ("sync_dir", lambda fs, d, ctx: fs.sync_dir(str(d))),
    ("create", lambda fs, d, ctx: fs.open(str(d / "c"), create=True).close()),
    ("remove", lambda fs, d, ctx: fs.remove(str(d / "c"))),
    ("remove", lambda fs, d, ctx: fs.remove(str(d / "never-existed"))),
    ("rmdir", lambda fs, d, ctx: fs.rmdir(str(d / "sub"))),
]
N = len(STEPS)


def expected_trace(d: Path) -> list[MutatingCall]:
    paths = {
        "makedirs": d / "sub",
        "sync_dir": d,
        "set_mtime_ms": d / "b",
        "rmdir": d / "sub",
    }
    trace = []
    for number, (op, _) in enumerate(STEPS, start=1):
        if op in paths:
            path = paths[op]
        elif op == "create" and number > 2:
            path = d / "c"
        elif op == "remove":
            path = d / ("c" if STEPS[number - 2][0] == "create" else "never-existed")
        else:
            path = d / "sub" / "a"
        trace.append(MutatingCall(number, op, str(path)))
    return trace


def run_steps(fs: FileSystem, d: Path, count: int = N) -> None:
    ctx: Ctx = {}
    try:
        for _, step in STEPS[:count]:
            step(fs, d, ctx)
    finally:
        for handle in ctx.values():
            handle.close()


def workload(fs: FileSystem, d: Path) -> None:
    # Read-only calls sprinkled in: they must not be numbered.
    fs.exists(str(d))
    fs.listdir(str(d))
    run_steps(fs, d)
    fs.read_file(str(d / "b"))


def snapshot(d: Path) -> dict[str, object]:
    """Everything a step can change: the tree, file bytes, and whether the mtime was set."""
    state: dict[str, object] = {}
    for root, dirs, files in os.walk(d):
        for name in dirs:
            state[os.path.relpath(os.path.join(root, name), d) + "/"] = "dir"
        for name in files:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                data = f.read()
            mtime_set = os.stat(path).st_mtime_ns // 1_000_000 == MTIME_MS
            state[os.path.relpath(path, d)] = (data, mtime_set)
    return state


def state_before_call(tmp_path: Path, k: int) -> dict[str, object]:
    """The directory after steps 1..k-1, made with the real filesystem only."""
    ref = tmp_path / f"reference-{k}"
    ref.mkdir()
    run_steps(OsFileSystem(), ref, k - 1)
    return snapshot(ref)


def fresh_dir(tmp_path: Path, name: str) -> Path:
    d = tmp_path / name
    d.mkdir()
    return d


# -- numbering -------------------------------------------------------------------------------------


def test_numbering_follows_the_calls(tmp_path: Path) -> None:
    fs = FaultInjectingFileSystem()
    workload(fs, tmp_path)
    assert fs.calls == N
    assert fs.trace == expected_trace(tmp_path)
    assert fs.crashed is None
    assert {call.op for call in fs.trace} == set(MUTATING_OPS)  # the workload covers every op


def test_numbering_is_deterministic(tmp_path: Path) -> None:
    traces = []
    for run in range(3):
        d = fresh_dir(tmp_path, f"run{run}")
        fs = FaultInjectingFileSystem()
        workload(fs, d)
        assert fs.trace is not None
        traces.append([(n, op, os.path.relpath(path, d)) for n, op, path in fs.trace])
    assert traces[0] == traces[1] == traces[2]


def test_count_mutations_matches_the_trace(tmp_path: Path) -> None:
    assert count_mutations(lambda fs: workload(fs, fresh_dir(tmp_path, "a"))) == N
    assert count_mutations(lambda fs: None) == 0


def test_trace_can_be_switched_off(tmp_path: Path) -> None:
    fs = FaultInjectingFileSystem(trace=False)
    workload(fs, tmp_path)
    assert fs.trace is None
    assert fs.calls == N


def test_non_mutating_calls_are_not_numbered(tmp_path: Path) -> None:
    path = str(tmp_path / "f")
    OsFileSystem().open(path, create=True).close()
    with open(path, "wb") as f:
        f.write(b"0123456789")
    fs = FaultInjectingFileSystem()
    assert fs.exists(path)
    assert not fs.exists(str(tmp_path / "missing"))
    assert fs.is_dir(str(tmp_path))
    assert fs.listdir(str(tmp_path)) == ["f"]
    assert fs.file_size(path) == 10
    assert fs.read_file(path) == b"0123456789"
    assert fs.mtime_ms(path) > 0
    for create in (False, True):  # create=True on an existing file creates nothing
        handle = fs.open(path, create=create)
        assert handle.path == path
        assert handle.read_at(2, 3) == b"234"
        buffer = bytearray(4)
        assert handle.readinto_at(8, buffer) == 2
        assert handle.size() == 10
        handle.close()
    assert fs.calls == 0
    assert fs.trace == []


def test_open_create_is_numbered_only_when_the_file_is_new(tmp_path: Path) -> None:
    fs = FaultInjectingFileSystem()
    path = str(tmp_path / "f")
    fs.open(path, create=True).close()
    fs.open(path, create=True).close()
    assert fs.trace == [MutatingCall(1, "create", path)]


def test_append_returns_the_start_position(tmp_path: Path) -> None:
    fs = FaultInjectingFileSystem()
    handle = fs.open(str(tmp_path / "f"), create=True)
    assert handle.append(b"abc") == 0
    assert handle.append(bytearray(b"de")) == 3
    assert handle.append(memoryview(b"f")) == 5
    assert handle.size() == 6
    handle.close()
    assert (tmp_path / "f").read_bytes() == b"abcdef"


# -- crashes ---------------------------------------------------------------------------------------


def test_simulated_crash_is_not_an_exception() -> None:
    assert issubclass(SimulatedCrash, BaseException)
    assert not issubclass(SimulatedCrash, Exception)


def test_except_exception_does_not_swallow_a_crash(tmp_path: Path) -> None:
    fs = FaultInjectingFileSystem()
    fs.crash_at(1)

    def storage_code() -> str:
        try:
            fs.makedirs(str(tmp_path / "x"))
        except Exception:
            return "swallowed"
        return "finished"

    with pytest.raises(SimulatedCrash):
        storage_code()


@pytest.mark.parametrize("k", range(1, N + 1))
def test_crash_at_k_performs_exactly_calls_before_k(tmp_path: Path, k: int) -> None:
    d = fresh_dir(tmp_path, "run")
    fs = FaultInjectingFileSystem()
    fs.crash_at(k)
    with pytest.raises(SimulatedCrash) as info:
        workload(fs, d)
    trace = expected_trace(d)
    # What propagates may be a later "filesystem is dead" error, from a finally block that closed
    # a handle while unwinding; it names the same call.
    assert info.value.call == trace[k - 1]
    assert info.value.torn_length is None
    assert fs.crashed is not None and fs.crashed.call == trace[k - 1]
    assert fs.calls == k
    assert fs.trace == trace[:k]
    assert snapshot(d) == state_before_call(tmp_path, k), f"crash at call #{k}"


def test_enumerating_every_crash_point(tmp_path: Path) -> None:
    n = count_mutations(lambda fs: workload(fs, fresh_dir(tmp_path, "count")))
    for k in range(1, n + 1):
        fs = FaultInjectingFileSystem()
        fs.crash_at(k)
        with pytest.raises(SimulatedCrash):
            workload(fs, fresh_dir(tmp_path, f"k{k}"))
        assert fs.calls == k
    fs = FaultInjectingFileSystem()
    fs.crash_at(n + 1)  # past the end: the workload completes
    workload(fs, fresh_dir(tmp_path, "past-the-end"))
    assert fs.crashed is None


def test_dead_after_crash(tmp_path: Path) -> None:
    path = str(tmp_path / "f")
    fs = FaultInjectingFileSystem()
    handle = fs.open(path, create=True)  # call 1
    handle.append(b"kept")  # call 2
    other = fs.open(path)
    fs.crash_at(3)
    with pytest.raises(SimulatedCrash):
        handle.sync()
    calls: list[Callable[[], object]] = [
        lambda: fs.open(path),
        lambda: fs.open(str(tmp_path / "g"), create=True),
        lambda: fs.exists(path),
        lambda: fs.is_dir(str(tmp_path)),
        lambda: fs.listdir(str(tmp_path)),
        lambda: fs.file_size(path),
        lambda: fs.read_file(path),
        lambda: fs.rename(path, path + ".x"),
        lambda: fs.remove(path),
        lambda: fs.makedirs(str(tmp_path / "dir")),
        lambda: fs.rmdir(str(tmp_path / "dir")),
        lambda: fs.sync_dir(str(tmp_path)),
        lambda: fs.mtime_ms(path),
        lambda: fs.set_mtime_ms(path, MTIME_MS),
        lambda: handle.read_at(0, 4),
        lambda: handle.readinto_at(0, bytearray(4)),
        lambda: handle.write_at(0, b"lost"),
        lambda: handle.append(b"lost"),
        lambda: handle.truncate(0),
        handle.size,
        handle.sync,
        handle.close,
        lambda: other.read_at(0, 4),
        other.close,
    ]
    for i, call in enumerate(calls):
        with pytest.raises(SimulatedCrash) as info:
            call()
        assert info.value.call == MutatingCall(3, "sync", path), f"call {i}"
    assert fs.calls == 3  # nothing after the crash was numbered
    assert handle.path == path  # not a filesystem call
    assert sorted(os.listdir(tmp_path)) == ["f"]
    assert (tmp_path / "f").read_bytes() == b"kept"
    # The crash kept nothing alive: a "restarted" filesystem reads the directory normally.
    assert OsFileSystem().read_file(path) == b"kept"


def test_crash_closes_inner_descriptors(tmp_path: Path) -> None:
    if not os.path.isdir("/proc/self/fd"):
        pytest.skip("needs /proc/self/fd")
    before = len(os.listdir("/proc/self/fd"))
    for i in range(50):
        fs = FaultInjectingFileSystem()
        handles = [fs.open(str(tmp_path / f"f{i}-{j}"), create=True) for j in range(3)]
        fs.crash_at(fs.calls + 1)
        with pytest.raises(SimulatedCrash):
            handles[0].append(b"x")
    assert len(os.listdir("/proc/self/fd")) <= before


def test_crash_in_finally_unwinding_writes_nothing(tmp_path: Path) -> None:
    path = str(tmp_path / "f")
    fs = FaultInjectingFileSystem()
    fs.crash_at(2)
    with pytest.raises(SimulatedCrash):
        handle = fs.open(path, create=True)
        try:
            handle.append(b"data")
        finally:
            handle.append(b"cleanup")  # a crashed process does not run this
    assert (tmp_path / "f").read_bytes() == b""


@pytest.mark.parametrize("op", ["write_at", "append"])
@pytest.mark.parametrize("seed", range(40))
def test_torn_write_writes_a_strict_prefix(tmp_path: Path, op: str, seed: int) -> None:
    rng = random.Random(seed)
    old = rng.randbytes(rng.randrange(0, 64))
    data = rng.randbytes(rng.randrange(1, 300))
    position = rng.randrange(0, len(old) + 1) if op == "write_at" else len(old)
    path = tmp_path / "f"
    path.write_bytes(old)
    fs = FaultInjectingFileSystem()
    handle = fs.open(str(path))
    fs.crash_at(1, partial_write=random.Random(seed))
    with pytest.raises(SimulatedCrash) as info:
        if op == "write_at":
            handle.write_at(position, data)
        else:
            handle.append(data)
    n = info.value.torn_length
    assert n is not None and 0 <= n < len(data), f"seed={seed}"
    expected = bytearray(old)
    expected[position : position + n] = data[:n]
    assert path.read_bytes() == bytes(expected), f"seed={seed} torn_length={n}"
    assert info.value.call == MutatingCall(1, op, str(path))


def test_torn_writes_replay_from_the_seed(tmp_path: Path) -> None:
    lengths = []
    for run in range(2):
        path = tmp_path / f"f{run}"
        path.write_bytes(b"")
        fs = FaultInjectingFileSystem()
        handle = fs.open(str(path))
        fs.crash_at(1, partial_write=random.Random(1234))
        with pytest.raises(SimulatedCrash) as info:
            handle.append(bytes(1000))
        lengths.append(info.value.torn_length)
    assert lengths[0] == lengths[1]


def test_torn_write_true_writes_half(tmp_path: Path) -> None:
    path = tmp_path / "f"
    fs = FaultInjectingFileSystem()
    handle = fs.open(str(path), create=True)
    handle.append(b"old:")
    handle.sync()
    fs.crash_at(4, partial_write=True)
    with pytest.raises(SimulatedCrash) as info:
        handle.write_at(2, b"0123456789")
    assert info.value.torn_length == 5
    assert path.read_bytes() == b"ol01234"


def test_partial_write_does_not_affect_other_ops(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"content")
    fs = FaultInjectingFileSystem()
    handle = fs.open(str(path))
    fs.crash_at(1, partial_write=random.Random(0))
    with pytest.raises(SimulatedCrash) as info:
        handle.truncate(0)
    assert info.value.torn_length is None
    assert path.read_bytes() == b"content"


def test_crash_at_rejects_past_calls(tmp_path: Path) -> None:
    fs = FaultInjectingFileSystem()
    with pytest.raises(ValueError):
        fs.crash_at(0)
    fs.makedirs(str(tmp_path / "a"))
    with pytest.raises(ValueError):
        fs.crash_at(1)
    with pytest.raises(ValueError):
        fs.fail_at(1)
    fs.crash_at(2)


# -- injected I/O errors ---------------------------------------------------------------------------

ERROR_LABELS = {
    "create": "open",
    "write_at": "write",
    "append": "write",
    "truncate": "truncate",
    "sync": "fsync",
    "rename": "rename",
    "remove": "remove",
    "makedirs": "mkdir",
    "rmdir": "rmdir",
    "sync_dir": "fsync directory",
    "set_mtime_ms": "utime",
}


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EIO])
@pytest.mark.parametrize("k", range(1, N + 1))
def test_fail_at_raises_storage_error_without_performing(tmp_path: Path, k: int, code: int) -> None:
    d = fresh_dir(tmp_path, "run")
    fs = FaultInjectingFileSystem()
    fs.fail_at(k, code)
    ctx: Ctx = {}
    try:
        for number, (op, step) in enumerate(STEPS, start=1):
            if number == k:
                before = snapshot(d)
                with pytest.raises(StorageError) as info:
                    step(fs, d, ctx)
                call = expected_trace(d)[k - 1]
                name = errno.errorcode[code]
                shown = str(info.value)
                assert shown.startswith(f"{ERROR_LABELS[op]} '{call.path}")  # rename adds "-> dst"
                assert shown.endswith(f"' failed: {name} ({os.strerror(code)})")
                cause = info.value.__cause__
                assert isinstance(cause, OSError) and cause.errno == code
                assert snapshot(d) == before, f"failed call #{k} ({op}) was performed"
                break
            step(fs, d, ctx)
    finally:
        for handle in ctx.values():
            handle.close()
    assert fs.crashed is None
    assert fs.calls == k


def test_injected_error_reads_like_a_real_one(tmp_path: Path) -> None:
    real, fake = OsFileSystem(), FaultInjectingFileSystem()
    missing = str(tmp_path / "missing")
    fake.fail_at(1, errno.ENOENT)
    with pytest.raises(StorageError) as real_error:
        real.rename(missing, missing + ".x")
    with pytest.raises(StorageError) as fake_error:
        fake.rename(missing, missing + ".x")
    assert str(fake_error.value) == str(real_error.value)
    assert type(fake_error.value) is type(real_error.value)

    in_missing_dir = str(tmp_path / "no-such-dir" / "f")
    fake.fail_at(2, errno.ENOENT)
    with pytest.raises(StorageError) as real_error:
        real.open(in_missing_dir, create=True)
    with pytest.raises(StorageError) as fake_error:
        fake.open(in_missing_dir, create=True)
    assert str(fake_error.value) == str(real_error.value)


def test_single_failure_then_the_call_works(tmp_path: Path) -> None:
    fs = FaultInjectingFileSystem()
    handle = fs.open(str(tmp_path / "f"), create=True)
    fs.fail_at(2, errno.ENOSPC)
    with pytest.raises(StorageError, match="ENOSPC"):
        handle.append(b"first")
    assert handle.size() == 0
    assert handle.append(b"retry") == 0
    handle.close()
    assert (tmp_path / "f").read_bytes() == b"retry"
    assert fs.calls == 3


def test_persistent_failure_keeps_failing_the_same_kind_on_the_same_path(tmp_path: Path) -> None:
    fs = FaultInjectingFileSystem()
    a = fs.open(str(tmp_path / "a"), create=True)
    b = fs.open(str(tmp_path / "b"), create=True)
    fs.fail_at(3, errno.EIO, persistent=True)
    with pytest.raises(StorageError, match="EIO"):
        a.append(b"x")
    for attempt in (lambda: a.append(b"y"), lambda: a.write_at(0, b"z")):
        with pytest.raises(StorageError, match=r"^write .*EIO"):
            attempt()
    assert b.append(b"other file is fine") == 0  # another path
    a.truncate(0)  # another kind of call
    a.sync()
    assert (tmp_path / "a").read_bytes() == b""
    fs.clear_faults()  # space was freed
    assert a.append(b"healed") == 0
    a.close()
    b.close()
    assert (tmp_path / "a").read_bytes() == b"healed"


def test_non_persistent_failure_fails_once(tmp_path: Path) -> None:
    fs = FaultInjectingFileSystem()
    handle = fs.open(str(tmp_path / "a"), create=True)
    fs.fail_at(2, errno.EIO)
    with pytest.raises(StorageError):
        handle.sync()
    handle.sync()
    handle.close()


def test_fail_when_matches_on_number_op_and_path(tmp_path: Path) -> None:
    seen: list[tuple[int, str, str]] = []

    def every_sync(number: int, op: str, path: str) -> bool:
        seen.append((number, op, path))
        return op == "sync"

    fs = FaultInjectingFileSystem()
    fs.fail_when(every_sync, errno.EIO)
    path = str(tmp_path / "f")
    handle = fs.open(path, create=True)
    handle.append(b"data")
    for _ in range(3):
        with pytest.raises(StorageError, match=r"^fsync .*EIO"):
            handle.sync()
    handle.close()
    assert seen == [
        (1, "create", path),
        (2, "append", path),
        (3, "sync", path),
        (4, "sync", path),
        (5, "sync", path),
    ]


def test_fail_when_by_path(tmp_path: Path) -> None:
    fs = FaultInjectingFileSystem()
    fs.fail_when(lambda n, op, path: path.endswith(".tmp"))
    with pytest.raises(StorageError, match="ENOSPC"):
        fs.open(str(tmp_path / "x.tmp"), create=True)
    assert not (tmp_path / "x.tmp").exists()
    fs.open(str(tmp_path / "x"), create=True).close()
    assert (tmp_path / "x").exists()


def test_crash_takes_precedence_over_failure(tmp_path: Path) -> None:
    fs = FaultInjectingFileSystem()
    fs.fail_at(1, errno.EIO)
    fs.crash_at(1)
    with pytest.raises(SimulatedCrash):
        fs.makedirs(str(tmp_path / "d"))
    assert not (tmp_path / "d").exists()


def test_wraps_any_inner_filesystem(tmp_path: Path) -> None:
    """Layers stack: faults of the outer layer apply before the inner one sees the call."""
    inner = FaultInjectingFileSystem()
    outer = FaultInjectingFileSystem(inner)
    outer.fail_at(2)
    handle = outer.open(str(tmp_path / "f"), create=True)
    with pytest.raises(StorageError):
        handle.append(b"x")
    handle.append(b"y")
    handle.close()
    assert outer.calls == 3
    assert inner.calls == 2


# -- power loss (PowerLossFileSystem) ----------------------------------------------------------


def _files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir()) if p.is_file()}


def _synced_file(fs: FileSystem, path: Path, data: bytes) -> FileHandle:
    """Create ``path`` with ``data``, fsync it and its directory; the handle stays open."""
    handle = fs.open(str(path), create=True)
    handle.write_at(0, data)
    handle.sync()
    fs.sync_dir(str(path.parent))
    return handle


@pytest.mark.parametrize("mode", ["drop", "keep"])
def test_power_cut_drops_or_keeps_unsynced_data(tmp_path: Path, mode: str) -> None:
    fs = PowerLossFileSystem()
    handle = _synced_file(fs, tmp_path / "a", b"synced")
    handle.append(b"+more")
    handle.write_at(0, b"S")
    assert fs.unsynced() == {str(tmp_path / "a"): 2}
    cut = fs.power_cut(random.Random(1), files=mode, dirs="keep")
    want = b"synced" if mode == "drop" else b"Synced+more"
    assert _files(tmp_path) == {"a": want}, cut
    with pytest.raises(SimulatedCrash):
        handle.append(b"x")  # the filesystem is dead after the cut


def test_power_cut_keeps_everything_fsynced(tmp_path: Path) -> None:
    fs = PowerLossFileSystem()
    handle = _synced_file(fs, tmp_path / "a", b"one")
    handle.append(b"two")
    handle.truncate(4)
    handle.sync()
    assert fs.unsynced() == {}
    fs.power_cut(random.Random(2))  # random models: nothing is unsynced, nothing can go
    assert _files(tmp_path) == {"a": b"onet"}


def test_unsynced_truncate_is_undone(tmp_path: Path) -> None:
    fs = PowerLossFileSystem()
    handle = _synced_file(fs, tmp_path / "a", b"0123456789")
    handle.truncate(3)
    handle.truncate(20)  # extends with zeros
    fs.power_cut(random.Random(3), files="drop", dirs="keep")
    assert _files(tmp_path) == {"a": b"0123456789"}


@pytest.mark.parametrize("seed", range(20))
def test_prefix_and_torn_keep_an_ordered_prefix(tmp_path: Path, seed: int) -> None:
    fs = PowerLossFileSystem()
    handle = _synced_file(fs, tmp_path / "a", b"")
    chunks = [bytes([65 + i]) * 5 for i in range(6)]
    for chunk in chunks:
        handle.append(chunk)
    mode = "prefix" if seed % 2 else "torn"
    fs.power_cut(random.Random(seed), files=mode, dirs="keep")
    data = _files(tmp_path)["a"]
    full = b"".join(chunks)
    assert full.startswith(data)
    if mode == "torn":
        assert len(data) < len(full), data  # at least the last write is torn


def test_torn_can_tear_the_last_write(tmp_path: Path) -> None:
    lengths = set()
    for seed in range(40):
        d = tmp_path / f"d{seed}"
        d.mkdir()
        fs = PowerLossFileSystem()
        handle = _synced_file(fs, d / "a", b"")
        handle.append(b"x" * 10)
        cut = fs.power_cut(random.Random(seed), files="torn", dirs="keep")
        lengths.add(len(_files(d)["a"]))
        assert "torn 0/1" in cut.describe()
    assert lengths <= set(range(10)) and len(lengths) > 3


def test_reorder_lands_pages_independently(tmp_path: Path) -> None:
    seen = set()
    for seed in range(30):
        d = tmp_path / f"d{seed}"
        d.mkdir()
        fs = PowerLossFileSystem()
        handle = _synced_file(fs, d / "a", b"")
        handle.append(b"a" * PAGE + b"b" * PAGE)  # one write, two pages
        fs.power_cut(random.Random(seed), files="reorder", dirs="keep")
        data = _files(d)["a"]
        assert data in (b"", b"a" * PAGE, b"\0" * PAGE + b"b" * PAGE, b"a" * PAGE + b"b" * PAGE)
        seen.add(data)
    assert len(seen) == 4, "each page lands or not on its own"


def test_unsynced_create_vanishes_with_its_fsynced_data(tmp_path: Path) -> None:
    fs = PowerLossFileSystem()
    handle = fs.open(str(tmp_path / "new"), create=True)
    handle.append(b"data")
    handle.sync()  # the data is durable, the directory entry is not
    fs.power_cut(random.Random(4), files="keep", dirs="drop")
    assert _files(tmp_path) == {}


@pytest.mark.parametrize("mode", ["drop", "keep"])
def test_unsynced_rename_reverts_to_the_old_name(tmp_path: Path, mode: str) -> None:
    fs = PowerLossFileSystem()
    handle = _synced_file(fs, tmp_path / "x.cleaned", b"new")
    fs.rename(str(tmp_path / "x.cleaned"), str(tmp_path / "x.swap"))
    handle.append(b"!")  # written through the handle opened under the old name
    handle.sync()
    fs.power_cut(random.Random(5), files="drop", dirs=mode)
    want = {"x.cleaned": b"new!"} if mode == "drop" else {"x.swap": b"new!"}
    assert _files(tmp_path) == want


def test_write_then_rename_over_an_old_file_reverts(tmp_path: Path) -> None:
    (tmp_path / "cp").write_bytes(b"old")  # predates the journal: durable
    fs = PowerLossFileSystem()
    write_file_atomically_without_dir_sync(fs, tmp_path / "cp", b"new")
    fs.power_cut(random.Random(6), files="keep", dirs="drop")
    assert _files(tmp_path) == {"cp": b"old"}


def write_file_atomically_without_dir_sync(fs: FileSystem, path: Path, data: bytes) -> None:
    handle = fs.open(str(path) + ".tmp", create=True)
    handle.write_at(0, data)
    handle.sync()
    handle.close()
    fs.rename(str(path) + ".tmp", str(path))


def test_prefix_of_directory_changes_in_order(tmp_path: Path) -> None:
    (tmp_path / "cp").write_bytes(b"old")
    outcomes = set()
    for seed in range(30):
        d = tmp_path / f"d{seed}"
        d.mkdir()
        (d / "cp").write_bytes(b"old")
        fs = PowerLossFileSystem()
        write_file_atomically_without_dir_sync(fs, d / "cp", b"new")
        cut = fs.power_cut(random.Random(seed), files="keep", dirs="prefix")
        files = _files(d)
        assert files in ({"cp": b"old"}, {"cp": b"old", "cp.tmp": b"new"}, {"cp": b"new"}), cut
        outcomes.add(tuple(sorted(files.items())))
    assert len(outcomes) == 3


def test_unsynced_remove_brings_the_file_back(tmp_path: Path) -> None:
    (tmp_path / "a.deleted").write_bytes(b"segment")
    fs = PowerLossFileSystem()
    fs.remove(str(tmp_path / "a.deleted"))
    fs.power_cut(random.Random(7), files="keep", dirs="drop")
    assert _files(tmp_path) == {"a.deleted": b"segment"}
    fs2 = PowerLossFileSystem()
    fs2.remove(str(tmp_path / "a.deleted"))
    fs2.sync_dir(str(tmp_path))
    fs2.power_cut(random.Random(7), files="keep", dirs="drop")
    assert _files(tmp_path) == {}


def test_crash_then_power_cut_journals_the_torn_write(tmp_path: Path) -> None:
    fs = PowerLossFileSystem()
    handle = _synced_file(fs, tmp_path / "a", b"base")
    fs.crash_at(fs.calls + 1, partial_write=True)
    with pytest.raises(SimulatedCrash):
        handle.append(b"12345678")
    assert (tmp_path / "a").read_bytes() == b"base1234"  # the page cache has the tear
    fs.power_cut(random.Random(8), files="drop", dirs="keep")
    assert _files(tmp_path) == {"a": b"base"}


def test_crash_at_op_counts_only_those_ops(tmp_path: Path) -> None:
    fs = FaultInjectingFileSystem()
    handle = fs.open(str(tmp_path / "a"), create=True)
    fs.crash_at_op(2)
    handle.append(b"x")
    handle.sync()
    handle.append(b"y")
    with pytest.raises(SimulatedCrash) as info:
        fs.sync_dir(str(tmp_path))
    assert info.value.call.op == "sync_dir"
    assert (tmp_path / "a").read_bytes() == b"xy"


def test_unknown_power_cut_model_is_refused(tmp_path: Path) -> None:
    fs = PowerLossFileSystem()
    handle = _synced_file(fs, tmp_path / "a", b"")
    handle.append(b"x")
    with pytest.raises(ValueError, match="unknown power-cut model 'lose'"):
        fs.power_cut(random.Random(9), files="lose")


def test_call_waiting_while_another_thread_crashes_raises_simulated_crash(tmp_path: Path) -> None:
    """A write that passed the liveness check, then waited for the journal while another thread
    crashed, must not reach its (now closed) descriptor: it never happened."""
    fs = PowerLossFileSystem()
    handle = fs.open(str(tmp_path / "a"), create=True)
    other = fs.open(str(tmp_path / "b"), create=True)
    outcome: list[BaseException | None] = []

    def write() -> None:
        try:
            handle.append(b"late")
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    fs._journal_lock.acquire()  # as if a third thread were inside a call
    try:
        before = fs.calls
        thread = threading.Thread(target=write)
        thread.start()
        for _ in range(1000):  # until the write is numbered and waits for the journal
            if fs.calls > before:
                break
            threading.Event().wait(0.001)
        fs.crash_at(fs.calls + 1)
        with pytest.raises(SimulatedCrash):
            other.append(b"x")  # this thread dies: the descriptors are closed
    finally:
        fs._journal_lock.release()
    thread.join(5)
    assert len(outcome) == 1 and isinstance(outcome[0], SimulatedCrash), outcome
    fs.power_cut(random.Random(0), files="keep", dirs="keep")
    assert _files(tmp_path) == {"a": b"", "b": b""}


@pytest.mark.parametrize("mode", ["drop", "keep"])
def test_unsynced_mkdir_vanishes_with_its_fsynced_files(tmp_path: Path, mode: str) -> None:
    fs = PowerLossFileSystem()
    fs.makedirs(str(tmp_path / "t-0" / "sub"))
    _synced_file(fs, tmp_path / "t-0" / "a", b"acked").close()  # file and t-0 fsynced
    fs.remove(str(tmp_path / "t-0" / "a.old"))  # a missing file: no entry change
    handle = fs.open(str(tmp_path / "t-0" / "b"), create=True)  # unsynced, in t-0's journal
    handle.append(b"b")
    cut = fs.power_cut(random.Random(10), files="keep", dirs=mode)
    if mode == "drop":
        assert os.listdir(tmp_path) == [], cut
        assert "vanished" in cut.describe()
    else:
        assert _files(tmp_path / "t-0") == {"a": b"acked", "b": b"b"}
        assert (tmp_path / "t-0" / "sub").is_dir()


def test_mkdir_made_durable_by_the_parent_fsync(tmp_path: Path) -> None:
    fs = PowerLossFileSystem()
    fs.makedirs(str(tmp_path / "t-0"))
    fs.sync_dir(str(tmp_path))
    _synced_file(fs, tmp_path / "t-0" / "a", b"acked").close()
    fs.power_cut(random.Random(11), files="drop", dirs="drop")
    assert _files(tmp_path / "t-0") == {"a": b"acked"}


def test_failed_rename_or_remove_leaves_the_journal_as_it_was(tmp_path: Path) -> None:
    (tmp_path / "cp").write_bytes(b"old")
    fs = PowerLossFileSystem()
    with pytest.raises(StorageError):
        fs.rename(str(tmp_path / "missing"), str(tmp_path / "cp"))
    fs.remove(str(tmp_path / "missing"))  # not an error, and nothing to undo
    assert fs.unsynced() == {}
    fs.power_cut(random.Random(12), files="drop", dirs="drop")
    assert _files(tmp_path) == {"cp": b"old"}
