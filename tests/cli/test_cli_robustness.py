"""R22: the CLI over 1,000 mutated data directories.

Every copy of a small data directory gets one or two seeded mutations (torn logs, bit and byte
flips, garbage tails, deleted, truncated, zero-filled or shuffled indexes, orphan indexes,
foreign files, damaged metadata), then ``verify``, ``dump-log`` of every file, ``consume`` and
``topics describe`` run on it in-process. Required:

* 0 tracebacks; every failure is one ``Error:`` line with a documented non-zero exit code (and
  never exit 4, which would be a bug somewhere below the CLI);
* ``verify`` exits 1 whenever damage of the R3/R4/R5 kinds was injected: a flip in a
  CRC-covered byte or in the framing fields (length, magic), a torn or garbage tail, and index
  damage (missing, odd length, zero-filled, out of order, orphaned); and 0 when only harmless
  changes were made (none, foreign files).

Flips outside the CRC in the base offset or leader epoch, flips inside index entries and log
truncations at a batch boundary are only detectable by cross-checks; their detection rates are
printed, not asserted. Replay one trial with ``R22_SEED=<seed> R22_TRIALS=<n>``.
"""

from __future__ import annotations

import os
import random
import shutil
import struct
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from cli_helpers import DOCUMENTED_EXIT_CODES, check_one_line_failure
from click.testing import CliRunner, Result

from compactlog.cli.main import main
from compactlog.records import build_batch, read_header
from compactlog.storage.store import Store

SEED = int(os.environ.get("R22_SEED", "22022"))
TRIALS = int(os.environ.get("R22_TRIALS", "1000"))
T0 = 1_700_000_000_000


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        self.now += 1
        return self.now


def build_data_dir(path: Path) -> None:
    with Store.open(path, clock=Clock()) as store:
        store.create_topic("alpha", 2, {"segment.bytes": "1024", "index.interval.bytes": "64"})
        store.create_topic("beta", 1, {"cleanup.policy": "compact", "index.interval.bytes": "90"})
        for i in range(36):
            store.append("alpha", i % 2, [(f"k{i}".encode(), f"value-{i}".encode() * (i % 3 + 1))])
        for i in range(16):
            records = [(f"key{j}".encode(), None if j == i % 4 else b"v" * j) for j in range(3)]
            store.append("beta", 0, records, compression="gzip" if i % 5 == 0 else "none")
        two = build_batch([(b"a", b"1")], timestamps=T0) + build_batch(
            [(b"b", b"2")], timestamps=T0
        )
        store.append_batch("beta", 0, two)


@dataclass
class Mutation:
    description: str
    must_detect: bool = False  # R3/R4/R5 damage: verify must exit 1
    harmless: bool = False  # verify must still exit 0
    measured: str | None = None  # a kind whose detection rate is reported


def files(root: Path, suffix: str) -> list[Path]:
    return sorted(p for p in root.glob(f"*/*{suffix}") if p.is_file())


def boundaries(raw: bytes) -> list[tuple[int, int]]:
    """(position, size) of each batch of an undamaged log."""
    out, position = [], 0
    while position < len(raw):
        size = read_header(raw, position).size_in_bytes
        if position + size > len(raw):
            raise ValueError("a partial batch")
        out.append((position, size))
        position += size
    return out


def flip(path: Path, position: int, rng: random.Random, whole_byte: bool) -> None:
    raw = bytearray(path.read_bytes())
    raw[position] ^= rng.randrange(1, 256) if whole_byte else 1 << rng.randrange(8)
    path.write_bytes(bytes(raw))


def flip_log(root: Path, rng: random.Random, region: str) -> Mutation:
    logs = [p for p in files(root, ".log") if p.stat().st_size and is_pristine_log(p)]
    if not logs:
        return Mutation("nothing to flip", harmless=True)
    log = rng.choice(logs)
    position, size = rng.choice(boundaries(log.read_bytes()))
    if region == "crc":
        offset = rng.randrange(17, size)  # the CRC field and everything it covers
    elif region == "framing":
        offset = rng.choice([8, 9, 10, 11, 16])  # length and magic
    else:
        offset = rng.choice([*range(8), *range(12, 16)])  # base offset, leader epoch
    whole_byte = rng.random() < 0.5
    flip(log, position + offset, rng, whole_byte)
    what = f"{'byte' if whole_byte else 'bit'} flip at {log.name}+{position + offset} ({region})"
    if region == "outside-crc":
        field = "base offset" if offset < 8 else "leader epoch"
        return Mutation(what, measured=f"flip in {field}")
    return Mutation(what, must_detect=True)


def is_pristine_log(path: Path) -> bool:
    try:
        boundaries(path.read_bytes())
    except Exception:
        return False
    return True


def truncate_log(root: Path, rng: random.Random) -> Mutation:
    logs = [p for p in files(root, ".log") if p.stat().st_size and is_pristine_log(p)]
    if not logs:
        return Mutation("nothing to truncate", harmless=True)
    log = rng.choice(logs)
    raw = log.read_bytes()
    cut = rng.randrange(len(raw))
    at_boundary = cut in {position for position, _ in boundaries(raw)}
    log.write_bytes(raw[:cut])
    what = f"truncate {log.parent.name}/{log.name} to {cut}"
    if at_boundary:
        return Mutation(what, measured="truncation at a batch boundary")
    return Mutation(what, must_detect=True)


def append_garbage(root: Path, rng: random.Random) -> Mutation:
    log = rng.choice(files(root, ".log"))
    garbage = rng.randbytes(rng.randrange(1, 120))
    with log.open("ab") as handle:
        handle.write(garbage)
    return Mutation(f"append {len(garbage)} bytes to {log.name}", must_detect=True)


def index_files(root: Path) -> list[Path]:
    return files(root, ".index") + files(root, ".timeindex")


def delete_index(root: Path, rng: random.Random) -> Mutation:
    index = rng.choice(index_files(root))
    index.unlink()
    return Mutation(f"delete {index.parent.name}/{index.name}", must_detect=True)


def odd_index_length(root: Path, rng: random.Random) -> Mutation:
    index = rng.choice(index_files(root))
    entry = 8 if index.suffix == ".index" else 12
    raw = index.read_bytes()
    if raw and rng.random() < 0.5:
        raw = raw[: rng.choice([n for n in range(len(raw)) if n % entry])]
    else:
        raw += rng.randbytes(rng.randrange(1, entry))
    index.write_bytes(raw)
    return Mutation(f"{index.name} to {len(raw)} bytes", must_detect=True)


def zero_index(root: Path, rng: random.Random) -> Mutation:
    candidates = [p for p in index_files(root) if p.stat().st_size]
    if not candidates:
        return Mutation("nothing to zero", harmless=True)
    index = rng.choice(candidates)
    index.write_bytes(bytes(index.stat().st_size))
    return Mutation(f"zero-fill {index.parent.name}/{index.name}", must_detect=True)


def shuffle_index(root: Path, rng: random.Random) -> Mutation:
    candidates = []
    for index in index_files(root):
        entry = 8 if index.suffix == ".index" else 12
        raw = index.read_bytes()
        entries = [raw[i : i + entry] for i in range(0, len(raw) - len(raw) % entry, entry)]
        if len(set(entries)) >= 2:
            candidates.append((index, entries))
    if not candidates:
        return Mutation("nothing to shuffle", harmless=True)
    index, entries = rng.choice(candidates)
    i, j = rng.sample(range(len(entries)), 2)
    while entries[i] == entries[j]:
        i, j = rng.sample(range(len(entries)), 2)
    entries[i], entries[j] = entries[j], entries[i]
    index.write_bytes(b"".join(entries))
    return Mutation(f"swap entries {i} and {j} of {index.name}", must_detect=True)


def flip_index(root: Path, rng: random.Random) -> Mutation:
    candidates = [p for p in index_files(root) if p.stat().st_size]
    if not candidates:
        return Mutation("nothing to flip", harmless=True)
    index = rng.choice(candidates)
    position = rng.randrange(index.stat().st_size)
    flip(index, position, rng, whole_byte=False)
    return Mutation(f"bit flip in {index.name}+{position}", measured="flip in an index")


def orphan_index(root: Path, rng: random.Random) -> Mutation:
    directory = rng.choice(sorted(p for p in root.iterdir() if p.is_dir()))
    suffix = rng.choice([".index", ".timeindex"])
    orphan = directory / f"{rng.randrange(10**6, 10**7):020d}{suffix}"
    orphan.write_bytes(struct.pack(">ii", 1, 100) if suffix == ".index" else b"")
    return Mutation(f"orphan {orphan.name}", must_detect=True)


def delete_log(root: Path, rng: random.Random) -> Mutation:
    log = rng.choice(files(root, ".log"))
    log.unlink()
    # Its .index and .timeindex remain, as orphans.
    return Mutation(f"delete {log.parent.name}/{log.name}", must_detect=True)


def foreign_files(root: Path, rng: random.Random) -> Mutation:
    directory = rng.choice([root, *sorted(p for p in root.iterdir() if p.is_dir())])
    name = rng.choice(
        ["notes.txt", "core", "x.log.swp", "lost+found", "00000000000000000007.snapshot"]
    )
    target = directory / name
    if target.exists():
        return Mutation("foreign file exists", harmless=True)
    if name == "lost+found":
        target.mkdir()
    else:
        target.write_bytes(rng.randbytes(rng.randrange(0, 64)))
    if name.endswith(".snapshot") and directory != root:
        # Random bytes where a producer snapshot belongs: verify checks snapshots (the loader
        # would delete this one and rebuild the state from the log).
        return Mutation(f"damaged snapshot {target.relative_to(root)}", must_detect=True)
    return Mutation(f"foreign {target.relative_to(root)}", harmless=True)


def damage_metadata(root: Path, rng: random.Random) -> Mutation:
    candidates = [p for p in root.iterdir() if p.is_file() and p.stat().st_size] + files(
        root, "partition.metadata"
    )
    target = rng.choice(candidates)
    flip(target, rng.randrange(target.stat().st_size), rng, whole_byte=True)
    return Mutation(f"byte flip in {target.name}", measured="damaged metadata")


def nothing(root: Path, rng: random.Random) -> Mutation:
    return Mutation("no change", harmless=True)


MUTATIONS: list[tuple[float, Callable[[Path, random.Random], Mutation]]] = [
    (3, lambda root, rng: flip_log(root, rng, "crc")),
    (1, lambda root, rng: flip_log(root, rng, "framing")),
    (1, lambda root, rng: flip_log(root, rng, "outside-crc")),
    (2, truncate_log),
    (1, append_garbage),
    (1, delete_index),
    (1, odd_index_length),
    (1, zero_index),
    (1, shuffle_index),
    (1, flip_index),
    (0.5, orphan_index),
    (0.5, delete_log),
    (0.7, foreign_files),
    (0.5, damage_metadata),
    (0.5, nothing),
]


def run(runner: CliRunner, args: list[str], context: str) -> Result:
    result = runner.invoke(main, args)
    assert isinstance(result.exception, SystemExit | None), f"{context}: {result.exception!r}"
    assert result.exit_code in DOCUMENTED_EXIT_CODES, f"{context}: exit {result.exit_code}"
    assert result.exit_code != 4, f"{context}: internal error: {result.stderr}"
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout, context
    return result


@pytest.mark.slow
def test_r22_cli_over_mutated_data_dirs(tmp_path: Path) -> None:
    pristine = tmp_path / "pristine"
    build_data_dir(pristine)
    runner = CliRunner()
    rng = random.Random(SEED)
    measured: Counter[str] = Counter()
    detected: Counter[str] = Counter()
    outcomes: Counter[str] = Counter()
    for trial in range(TRIALS):
        trial_seed = rng.randrange(2**32)
        trial_rng = random.Random(trial_seed)
        copy = tmp_path / "copy"
        shutil.copytree(pristine, copy)
        weights, choices = zip(*MUTATIONS, strict=True)
        count = 1 if trial_rng.random() < 0.7 else 2
        mutations = [trial_rng.choices(choices, weights)[0](copy, trial_rng) for _ in range(count)]
        context = f"R22 seed={SEED} trial={trial} trial_seed={trial_seed}: " + "; ".join(
            m.description for m in mutations
        )
        data = ["--data-dir", str(copy)]

        verified = run(runner, [*data, "verify"], f"{context} [verify]")
        assert verified.exit_code in (0, 1), f"{context}: verify exit {verified.exit_code}"
        if any(m.must_detect for m in mutations):
            assert verified.exit_code == 1, f"{context}: damage not detected\n{verified.stdout}"
        if all(m.harmless for m in mutations):
            assert verified.exit_code == 0, f"{context}: false alarm\n{verified.stdout}"
        if len(mutations) == 1 and mutations[0].measured:
            measured[mutations[0].measured] += 1
            detected[mutations[0].measured] += verified.exit_code == 1
        for line in verified.stdout.splitlines()[:-1]:
            assert line.startswith((f"{copy}", "note: ")), f"{context}: {line!r}"

        every_file = sorted(str(p) for p in copy.rglob("*") if p.is_file())
        dumped = run(runner, ["dump-log", *every_file], f"{context} [dump-log]")
        if dumped.exit_code:
            assert dumped.exit_code in (2, 3), context
            assert "Traceback" not in dumped.stderr, context
            for line in dumped.stderr.splitlines():
                assert line.startswith(("Error: ", "warning: ")), f"{context}: {line!r}"

        for args in (["consume", "alpha", "-f", "%p %o %k\\n"], ["consume", "beta"],
                     ["topics", "describe"]):  # fmt: skip
            result = run(runner, [*data, *args], f"{context} [{' '.join(args)}]")
            outcomes[f"{args[0]} exit {result.exit_code}"] += 1
            if result.exit_code:
                check_one_line_failure(result, [2, 3], f"{context} [{' '.join(args)}]")
        shutil.rmtree(copy)

    print(f"\nR22 seed={SEED}, {TRIALS} trials; outcomes: {dict(sorted(outcomes.items()))}")
    for kind in sorted(measured):
        rate = detected[kind] / measured[kind]
        print(f"  verify detected {detected[kind]}/{measured[kind]} ({rate:.0%}) of: {kind}")
