"""The cleaner's offset maps: Kafka's SkimpyOffsetMap and the 16-byte CompactOffsetMap.

Every behaviour test runs with both kernels (the Python reference and numba) and, where the
behaviour is shared, with both maps.
"""

from __future__ import annotations

import hashlib
import importlib.util
import itertools
import mmap
import random
import struct
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compactlog.cleaner import _map_kernels as _k
from compactlog.cleaner import offset_map as offset_map_module
from compactlog.cleaner.offset_map import (
    CompactOffsetMap,
    OffsetMap,
    SkimpyOffsetMap,
    keys_per_mib,
)
from compactlog.errors import CompactlogError, ConfigError, OffsetMapFullError, OffsetMapRangeError

KERNEL_NAMES = ["python", "numba"]
MAP_CLASSES = [SkimpyOffsetMap, CompactOffsetMap]
MapClass = type[SkimpyOffsetMap] | type[CompactOffsetMap]
# Lengths around MD5's padding boundaries: one block holds at most 55 message bytes.
MD5_EDGE_LENGTHS = [0, 1, 55, 56, 63, 64, 65, 119, 120, 1000]
HYPOTHESIS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@pytest.fixture(params=KERNEL_NAMES)
def kernel(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(params=MAP_CLASSES, ids=lambda c: c.__name__)
def map_class(request: pytest.FixtureRequest) -> MapClass:
    cls: MapClass = request.param
    return cls


def kernels(name: str) -> _k.MapKernels:
    return _k.numba_kernels() if name == "numba" else _k.PYTHON_KERNELS


def as_data(kernel: str, data: bytes) -> Any:
    return np.frombuffer(data, np.uint8) if kernel == "numba" else data


def scratch(kernel: str, n: int) -> Any:
    return np.zeros(n, np.int64) if kernel == "numba" else [0] * n


def columns(
    keys: list[bytes | None], offsets: list[int] | None = None
) -> tuple[bytes, np.ndarray, np.ndarray, np.ndarray]:
    """Record columns for keys (None = null key); offsets default to 0, 1, 2, ..."""
    data = bytearray(b"\xee")  # keys do not start at 0
    pos, lens = [], []
    for key in keys:
        pos.append(len(data))
        lens.append(-1 if key is None else len(key))
        data += key or b""
    offs = list(range(len(keys))) if offsets is None else offsets
    return (
        bytes(data),
        np.array(pos, np.int64),
        np.array(lens, np.int32),
        np.array(offs, np.int64),
    )


def map_of_slots(cls: MapClass, slots: int, kernel: str, load_factor: float = 0.9) -> OffsetMap:
    m = cls(slots * cls.entry_size, load_factor, kernel=kernel)
    assert m.slots == slots
    return m


# --- MD5 ---------------------------------------------------------------------------------------


def md5_of(kernel: str, data: bytes, start: int = 0, length: int | None = None) -> bytes:
    length = len(data) - start if length is None else length
    out = scratch(kernel, 20)
    kernels(kernel).md5_digest(as_data(kernel, data), start, length, scratch(kernel, 16), out, 3)
    return bytes(int(b) for b in out[3:19])


@pytest.mark.parametrize("length", MD5_EDGE_LENGTHS)
def test_md5_padding_boundaries(kernel: str, length: int) -> None:
    data = random.Random(length).randbytes(length)
    assert md5_of(kernel, data) == hashlib.md5(data).digest()


@HYPOTHESIS
@given(
    data=st.one_of(
        st.binary(max_size=300),
        st.sampled_from(MD5_EDGE_LENGTHS).flatmap(lambda n: st.binary(min_size=n, max_size=n)),
    ),
    prefix=st.integers(0, 5),
)
def test_md5_matches_hashlib(kernel: str, data: bytes, prefix: int) -> None:
    assert md5_of(kernel, b"x" * prefix + data + b"yz", prefix, len(data)) == (
        hashlib.md5(data).digest()
    )


@HYPOTHESIS
@given(
    keys=st.lists(
        st.one_of(
            st.none(),
            st.binary(max_size=70),
            st.sampled_from(MD5_EDGE_LENGTHS).flatmap(lambda n: st.binary(min_size=n, max_size=n)),
        ),
        max_size=12,
    ),
    start=st.integers(0, 2),
)
def test_hash_keys_digests_are_md5(kernel: str, keys: list[bytes | None], start: int) -> None:
    """Kafka's map hashes one-block keys two at a time (pairs, a leftover, longer keys in
    between): every digest is still MD5's, and every home slot Kafka's."""
    m = SkimpyOffsetMap(97 * SkimpyOffsetMap.entry_size, kernel=kernel)
    start = min(start, len(keys))
    data, pos, lens, _ = columns(keys)
    digests, _, home = m.hash_keys(data, pos, lens, start).hashes
    for i, key in enumerate(keys[start:]):
        if key is None:
            continue
        digest = bytes(int(b) for b in digests[16 * i : 16 * i + 16])
        assert digest == hashlib.md5(key).digest()
        assert home[i] == kernels(kernel).skimpy_slot(digests, 16 * i, 0, 97)


# --- MurmurHash3_x64_128 -------------------------------------------------------------------------

M64 = (1 << 64) - 1


def _fmix64(k: int) -> int:
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & M64
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & M64
    return k ^ (k >> 33)


def _rotl64(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & M64


def murmur3_x64_128_reference(key: bytes, seed: int = 0) -> bytes:
    """MurmurHash3_x64_128 written from Appleby's published C (SMHasher), on Python ints."""
    c1, c2 = 0x87C37B91114253D5, 0x4CF5AD432745937F
    h1 = h2 = seed
    nblocks = len(key) // 16
    for i in range(nblocks):
        k1, k2 = struct.unpack_from("<QQ", key, 16 * i)
        k1 = (_rotl64((k1 * c1) & M64, 31) * c2) & M64
        h1 ^= k1
        h1 = (_rotl64(h1, 27) + h2) & M64
        h1 = (h1 * 5 + 0x52DCE729) & M64
        k2 = (_rotl64((k2 * c2) & M64, 33) * c1) & M64
        h2 ^= k2
        h2 = (_rotl64(h2, 31) + h1) & M64
        h2 = (h2 * 5 + 0x38495AB5) & M64
    tail = key[16 * nblocks :]
    k1 = int.from_bytes(tail[:8], "little")
    k2 = int.from_bytes(tail[8:], "little")
    if len(tail) > 8:
        h2 ^= (_rotl64((k2 * c2) & M64, 33) * c1) & M64
    if len(tail) > 0:
        h1 ^= (_rotl64((k1 * c1) & M64, 31) * c2) & M64
    h1 ^= len(key)
    h2 ^= len(key)
    h1 = (h1 + h2) & M64
    h2 = (h2 + h1) & M64
    h1 = _fmix64(h1)
    h2 = _fmix64(h2)
    h1 = (h1 + h2) & M64
    h2 = (h2 + h1) & M64
    return struct.pack("<QQ", h1, h2)


def murmur_of(kernel: str, data: bytes, start: int = 0, length: int | None = None) -> bytes:
    length = len(data) - start if length is None else length
    words = kernels(kernel).murmur3_x64_128(as_data(kernel, data), start, length, 0)
    return b"".join(int(w).to_bytes(4, "little") for w in words)


# From the mmh3 package (mmh3.hash_bytes(key, 0, x64arch=True), mmh3 5.3.1); the fox is also
# the value other MurmurHash3 ports publish.
MURMUR_VECTORS = [
    (b"", "00000000000000000000000000000000"),
    (b"0", "80a346d5bedec92a095e873ce5e98d3a"),
    (b"hello", "029bbd41b3a7d8cb191dae486a901e5b"),
    (b"0123456789abcdef", "a7d14acf946de04bda08a7635c5bc387"),
    (b"The quick brown fox jumps over the lazy dog", "6c1b07bc7bbc4be347939ac4a93c437a"),
    (bytes(range(31)), "94d02ca3e1d33d05905400b4ef9ae59e"),
]


@pytest.mark.parametrize(("key", "expected"), MURMUR_VECTORS)
def test_murmur3_known_vectors(kernel: str, key: bytes, expected: str) -> None:
    assert murmur3_x64_128_reference(key).hex() == expected
    assert murmur_of(kernel, key).hex() == expected


@HYPOTHESIS
@given(data=st.binary(max_size=100), prefix=st.integers(0, 5))
def test_murmur3_matches_reference(kernel: str, data: bytes, prefix: int) -> None:
    got = murmur_of(kernel, b"x" * prefix + data + b"yz", prefix, len(data))
    assert got == murmur3_x64_128_reference(data)


@pytest.mark.skipif(importlib.util.find_spec("mmh3") is None, reason="mmh3 is not installed")
@HYPOTHESIS
@given(data=st.binary(max_size=100))
def test_murmur3_matches_mmh3(data: bytes) -> None:
    import mmh3

    assert murmur_of("python", data) == mmh3.hash_bytes(data, 0, x64arch=True)


def test_compact_hash_remaps_the_all_zero_hash(kernel: str) -> None:
    # The empty key hashes to zero with seed 0, which would look like an empty slot.
    assert murmur_of(kernel, b"") == bytes(16)
    assert tuple(kernels("python").murmur3_x64_128(b"", 0, 0, 0)) == (0, 0, 0, 0)
    assert _k.compact_hash(b"", 0, 0) == (1, 0, 0)
    m = CompactOffsetMap(4096, kernel=kernel)
    m.put(b"", 7)
    assert m.get(b"") == 7
    assert m.size == 1
    m.put(b"", 8)
    assert (m.get(b""), m.size) == (8, 1)


# --- Kafka's probe sequence and entry layout -------------------------------------------------


def test_spec_probe_sequence_example(kernel: str) -> None:
    """Spec 5.1: slots = 170, key "0" (MD5 cfcd2084...f98764da)."""
    digest = hashlib.md5(b"0").digest()
    assert digest.hex().startswith("cfcd2084") and digest.hex().endswith("f98764da")
    slot = kernels(kernel).skimpy_slot
    d = as_data(kernel, bytes(3) + digest)  # the digest at position 3 of its scratch
    probes = [slot(d, 3, attempt, 170) for attempt in range(15)]
    assert probes == [20, 163, 101, 1, 149, 26, 163, 141, 125, 69, 165, 118, 64, 63, 62]


def test_probe_window_of_int32_min_is_slot_zero() -> None:
    # Utils.abs(Integer.MIN_VALUE) is 0, not a negative number.
    digest = [0x80, 0, 0, 0] + [0x11] * 12
    assert _k.skimpy_slot(digest, 0, 0, 170) == 0
    # Past attempt 12 the window is incremented with int32 wrap-around: 0x7FFFFFFF + 1 = MIN.
    digest = [0x11] * 12 + [0x7F, 0xFF, 0xFF, 0xFE]
    assert [_k.skimpy_slot(digest, 0, a, 1000) for a in (12, 13, 14, 15)] == [
        0x7FFFFFFE % 1000,
        0x7FFFFFFF % 1000,
        0,
        0x7FFFFFFF % 1000,
    ]


def test_skimpy_entries_follow_the_probe_sequence(kernel: str) -> None:
    m = SkimpyOffsetMap(170 * 24, kernel=kernel)
    table = m._table
    digest = hashlib.md5(b"0").digest()
    m.put(b"0", 0x0102030405060708)
    assert bytes(table[20 * 24 : 21 * 24]) == digest + bytes(range(1, 9))
    # Occupy slot 20 and 163 with other entries: the key lands on its third probe, 101.
    m.clear()
    table = m._table  # clear() gives the map a fresh zeroed table
    table[20 * 24] = 1
    table[163 * 24] = 1
    m.put(b"0", -2)
    assert bytes(table[101 * 24 : 102 * 24]) == digest + (-2).to_bytes(8, "big", signed=True)
    assert m.get(b"0") == -2


# --- put / get / clear ---------------------------------------------------------------------------


def test_put_get_overwrite(map_class: MapClass, kernel: str) -> None:
    m = map_class(4096, kernel=kernel)
    assert (m.size, m.latest_offset, m.utilization) == (0, -1, 0.0)
    assert m.get(b"a") == -1
    m.put(b"a", 5)
    m.put(b"b", 7)
    assert (m.get(b"a"), m.get(b"b"), m.get(b"c")) == (5, 7, -1)
    assert (m.size, m.latest_offset) == (2, 7)
    m.put(b"a", 9)
    assert (m.get(b"a"), m.size, m.latest_offset) == (9, 2, 9)
    m.put(b"b", 3)  # the latest offset is the last put's, even when lower
    assert (m.get(b"b"), m.latest_offset) == (3, 3)
    assert m.utilization == 2 / m.slots
    m.update_latest_offset(100)
    assert (m.latest_offset, m.size) == (100, 2)


def test_keys_are_bytes_exactly(map_class: MapClass, kernel: str) -> None:
    m = map_class(4096, kernel=kernel)
    keys = [b"", b"\x00", b"\x00\x00", b"a", b"a\x00", b"A", b"x" * 1000]
    for i, key in enumerate(keys):
        m.put(key, i)
    assert [m.get(key) for key in keys] == list(range(len(keys)))
    assert m.size == len(keys)


def test_clear(map_class: MapClass, kernel: str) -> None:
    m = map_class(2048, kernel=kernel)
    for i in range(20):
        m.put(b"k%d" % i, i)
    m.clear()
    assert (m.size, m.latest_offset) == (0, -1)
    assert not m._table.any()
    assert m.get(b"k3") == -1
    m.put(b"k3", 1)
    assert (m.get(b"k3"), m.size) == (1, 1)


@pytest.mark.parametrize("expected_puts", [0, 10, 10**6])
def test_clear_for_many_puts_gives_the_same_empty_map(
    map_class: MapClass, kernel: str, expected_puts: int
) -> None:
    """Only the table depends on ``expected_puts``: its size (room for the promised puts at
    half load, when that is smaller) and its pages (an own mapping, huge pages advised, once the
    puts would touch most 4 KiB pages of it); never anything visible."""
    m = map_class(4 << 20, kernel=kernel)
    m.put(b"old", 3)
    m.clear(expected_puts=expected_puts)
    many = expected_puts >= (4 << 20) // mmap.PAGESIZE
    own_mapping = not m._table.flags.owndata  # np.frombuffer of an anonymous mmap
    assert own_mapping == (many and hasattr(mmap, "MADV_HUGEPAGE"))
    assert m._table.nbytes == (4096 if expected_puts == 10 else m.slots) * m.entry_size
    assert (m.size, m.latest_offset, m.max_desired_size) == (0, -1, int(m.slots * 0.9))
    assert not m._table.any()
    assert m.get(b"old") == -1
    puts = min(100, expected_puts or 100)
    for i in range(puts):
        m.put(b"k%d" % i, 10 + i)
    assert [m.get(b"k%d" % i) for i in range(puts)] == list(range(10, 10 + puts))


def test_full_map(map_class: MapClass, kernel: str) -> None:
    m = map_of_slots(map_class, 4, kernel)
    for i in range(4):
        m.put(b"k%d" % i, i)
    assert m.size == m.slots == 4
    with pytest.raises(OffsetMapFullError, match="Attempted to add a new entry to a full offset"):
        m.put(b"new", 9)
    # Kafka checks fullness before looking the key up: even an existing key is refused.
    with pytest.raises(OffsetMapFullError):
        m.put(b"k1", 9)
    assert isinstance(OffsetMapFullError("x"), CompactlogError)
    # get still terminates on a table with no empty slot: its probes are bounded.
    assert [m.get(b"k%d" % i) for i in range(4)] == [0, 1, 2, 3]
    assert [m.get(b"absent%d" % i) for i in range(20)] == [-1] * 20
    data, pos, lens, _ = columns([b"absent", None, b"k2"])
    assert m.get_batch(data, pos, lens).tolist() == [-1, -1, 2]


@pytest.mark.parametrize("memory", [48, 100, 1024, 4096])
def test_tiny_maps(map_class: MapClass, kernel: str, memory: int) -> None:
    if memory // map_class.entry_size * 0.9 <= 1:
        pytest.skip("too small for this entry size")
    m = map_class(memory, kernel=kernel)
    keys = [b"key-%d" % i for i in range(m.max_desired_size + 5)]
    data, pos, lens, offs = columns(list(keys))
    assert m.put_batch(data, pos, lens, offs, 0, len(keys), 0) == m.max_desired_size
    assert m.size == m.max_desired_size
    got = m.get_batch(data, pos, lens).tolist()
    assert got == [*range(m.max_desired_size), *[-1] * 5]


def test_construction_preconditions(map_class: MapClass) -> None:
    with pytest.raises(ConfigError, match="too small to fit in even a single message"):
        map_class(map_class.entry_size, 0.9)  # one slot: 1 * 0.9 is not > 1
    with pytest.raises(ConfigError, match="too small"):
        map_class(0)
    with pytest.raises(ConfigError, match="too small"):
        map_class(10 * map_class.entry_size, 0.1)
    assert map_class(2 * map_class.entry_size, 0.9).max_desired_size == 1
    for bad in (0.0, -0.5, 1.5):
        with pytest.raises(ConfigError, match="load factor"):
            map_class(4096, bad)
    with pytest.raises(ValueError, match="unknown kernel"):
        map_class(4096, kernel="cuda")


def test_sizes() -> None:
    kafka = SkimpyOffsetMap(128 * 1024 * 1024)
    assert (kafka.entry_size, kafka.slots, kafka.max_desired_size) == (24, 5592405, 5033164)
    compact = CompactOffsetMap(128 * 1024 * 1024)
    assert (compact.entry_size, compact.slots, compact.max_desired_size) == (16, 8388608, 7549747)
    assert compact.max_desired_size >= 1.5 * kafka.max_desired_size
    assert CompactOffsetMap.entry_size <= 16
    assert keys_per_mib(SkimpyOffsetMap) == 39321.0
    assert keys_per_mib(CompactOffsetMap) == pytest.approx(58982.4)
    assert keys_per_mib(CompactOffsetMap) >= 1.5 * keys_per_mib(SkimpyOffsetMap)
    assert keys_per_mib(CompactOffsetMap, 0.5) == 32768.0


# --- put_batch: Kafka's map-building rule ----------------------------------------------------


def test_put_batch_stops_where_the_map_is_full(map_class: MapClass, kernel: str) -> None:
    m = map_of_slots(map_class, 10, kernel, load_factor=0.3)
    assert m.max_desired_size == 3
    keys: list[bytes | None] = [b"a", None, b"b", b"x", b"c", b"a", b"d"]
    data, pos, lens, offs = columns(keys, [10, 11, 12, 5, 13, 14, 15])
    # x is below the first dirty offset and skipped; after a, b, c the map is full, and the put
    # of a (already present) is refused all the same: Kafka tests size before every put.
    assert m.put_batch(data, pos, lens, offs, 0, 7, 10) == 5
    assert (m.size, m.latest_offset) == (3, 13)
    assert m.get_batch(data, pos, lens).tolist() == [10, -1, 12, -1, 13, 10, -1]
    # The next pass starts at the record it stopped at.
    m.clear()
    assert m.put_batch(data, pos, lens, offs, 5, 7, 10) == 7
    assert m.get_batch(data, pos, lens).tolist() == [14, -1, -1, -1, -1, 14, 15]


def test_put_batch_returns_stop_when_everything_fits(map_class: MapClass, kernel: str) -> None:
    m = map_class(4096, kernel=kernel)
    keys: list[bytes | None] = [b"a", None, b"b", b"a", None]
    data, pos, lens, offs = columns(keys, [0, 1, 2, 3, 4])
    assert m.put_batch(data, pos, lens, offs, 1, 4, 0) == 4
    assert (m.size, m.latest_offset) == (2, 3)
    assert m.get(b"a") == 3
    # Skipped records do not move the latest offset; an empty range does nothing.
    assert m.put_batch(data, pos, lens, offs, 4, 5, 0) == 5
    assert m.put_batch(data, pos, lens, offs, 2, 2, 0) == 2
    assert m.latest_offset == 3


def test_put_batch_accepts_arrays_and_lists(map_class: MapClass, kernel: str) -> None:
    m = map_class(4096, kernel=kernel)
    data, pos, lens, offs = columns([b"a", b"b"])
    u8 = np.frombuffer(data, np.uint8)
    assert m.put_batch(u8, pos.tolist(), lens.tolist(), offs.tolist(), 0, 2, 0) == 2
    assert m.get_batch(bytearray(data), pos, lens.astype(np.int64)).tolist() == [0, 1]
    assert m.get_batch(memoryview(data), pos, lens).dtype == np.int64


def test_put_batch_rejects_bad_columns(map_class: MapClass, kernel: str) -> None:
    m = map_class(4096, kernel=kernel)
    data, pos, lens, offs = columns([b"a", b"bb"])
    with pytest.raises(ValueError, match="outside data"):
        m.put_batch(data[:-1], pos, lens, offs, 0, 2, 0)
    with pytest.raises(ValueError, match="outside data"):
        m.get_batch(data, pos - 2, lens)
    with pytest.raises(ValueError, match="record range"):
        m.put_batch(data, pos, lens, offs, 1, 3, 0)
    with pytest.raises(ValueError, match="same length"):
        m.put_batch(data, pos, lens[:1], offs, 0, 1, 0)
    with pytest.raises(ValueError, match="uint8"):
        m.get_batch(np.zeros(4, np.int16), pos, lens)
    # Only the records in [start, stop) need to lie inside data.
    assert m.put_batch(data[:-1], pos, lens, offs, 0, 1, 0) == 1


# --- the model: a dict with Kafka's rule ---------------------------------------------------------


def model_put_batch(
    model: dict[bytes, int],
    keys: list[bytes | None],
    offsets: list[int],
    start: int,
    stop: int,
    first_dirty: int,
    max_desired: int,
) -> tuple[int, int | None]:
    latest = None
    for i in range(start, stop):
        key = keys[i]
        if key is None or offsets[i] < first_dirty:
            continue
        if len(model) >= max_desired:
            return i, latest
        model[key] = offsets[i]
        latest = offsets[i]
    return stop, latest


records = st.lists(
    st.tuples(
        st.one_of(st.none(), st.binary(max_size=3), st.sampled_from([b"hot", b"cold", b""])),
        st.integers(0, 3),
    ),
    max_size=60,
)


@HYPOTHESIS
@given(
    recs=records,
    slots=st.integers(2, 40),
    load_factor=st.sampled_from([0.5, 0.75, 0.9, 1.0]),
    first_dirty=st.integers(0, 60),
    cuts=st.lists(st.integers(0, 60), max_size=4),
    absent=st.lists(st.binary(min_size=4, max_size=6), max_size=5),
)
def test_put_batch_and_get_batch_match_a_dict(
    map_class: MapClass,
    kernel: str,
    recs: list[tuple[bytes | None, int]],
    slots: int,
    load_factor: float,
    first_dirty: int,
    cuts: list[int],
    absent: list[bytes],
) -> None:
    if slots * load_factor <= 1:
        return
    keys = [key for key, _ in recs]
    offsets = list(np.cumsum([gap for _, gap in recs], dtype=np.int64).tolist())
    data, pos, lens, offs = columns(keys, offsets)
    m = map_of_slots(map_class, slots, kernel, load_factor)
    model: dict[bytes, int] = {}
    latest = -1
    # The cleaner calls put_batch once per batch of records; cut the records into such batches.
    bounds = sorted({0, len(keys), *(c for c in cuts if c < len(keys))})
    for lo, hi in itertools.pairwise(bounds):
        expected, model_latest = model_put_batch(
            model, keys, offsets, lo, hi, first_dirty, m.max_desired_size
        )
        latest = latest if model_latest is None else model_latest
        assert m.put_batch(data, pos, lens, offs, lo, hi, first_dirty) == expected
        assert (m.size, m.latest_offset) == (len(model), latest)
        if expected < hi:
            break
    probe_keys = [*keys, *absent, None]
    pdata, ppos, plens, _ = columns(probe_keys)
    expected_gets = [-1 if k is None else model.get(k, -1) for k in probe_keys]
    assert m.get_batch(pdata, ppos, plens).tolist() == expected_gets
    assert [m.get(k) for k in probe_keys if k is not None] == [
        g for k, g in zip(probe_keys, expected_gets, strict=True) if k is not None
    ]


@HYPOTHESIS
@given(
    recs=records,
    slots=st.integers(2, 300),
    load_factor=st.sampled_from([0.1, 0.5, 0.9, 1.0]),
    first_dirty=st.integers(0, 60),
    cuts=st.lists(st.integers(0, 60), max_size=4),
    absent=st.lists(st.binary(min_size=4, max_size=6), max_size=5),
)
def test_a_table_sized_for_the_promised_puts_changes_nothing(
    map_class: MapClass,
    kernel: str,
    monkeypatch: pytest.MonkeyPatch,
    recs: list[tuple[bytes | None, int]],
    slots: int,
    load_factor: float,
    first_dirty: int,
    cuts: list[int],
    absent: list[bytes],
) -> None:
    """The cleaner promises at most one put per offset of the dirty segments; a map whose
    table was sized for that promise stops, answers and counts exactly as a full one."""
    if slots * load_factor <= 1:
        return
    monkeypatch.setattr(offset_map_module, "_MIN_TABLE_SLOTS", 2)
    keys = [key for key, _ in recs]
    offsets = list(np.cumsum([gap for _, gap in recs], dtype=np.int64).tolist())
    data, pos, lens, offs = columns(keys, offsets)
    puts = sum(k is not None and o >= first_dirty for k, o in zip(keys, offsets, strict=True))
    full = map_of_slots(map_class, slots, kernel, load_factor)
    sized = map_of_slots(map_class, slots, kernel, load_factor)
    sized.clear(expected_puts=max(1, puts))
    if 2 * max(1, puts) < slots:
        assert len(sized._table) < len(full._table)
    bounds = sorted({0, len(keys), *(c for c in cuts if c < len(keys))})
    for lo, hi in itertools.pairwise(bounds):
        stopped = full.put_batch(data, pos, lens, offs, lo, hi, first_dirty)
        assert sized.put_batch(data, pos, lens, offs, lo, hi, first_dirty) == stopped
        assert (sized.size, sized.latest_offset) == (full.size, full.latest_offset)
        if stopped < hi:
            break
    pdata, ppos, plens, _ = columns([*keys, *absent, None])
    assert sized.get_batch(pdata, ppos, plens).tolist() == (
        full.get_batch(pdata, ppos, plens).tolist()
    )


def test_more_puts_than_promised_are_refused(map_class: MapClass, kernel: str) -> None:
    m = map_class(4 << 20, kernel=kernel)
    m.clear(expected_puts=3)
    data, pos, lens, offs = columns([b"a", b"b", b"a", b"c", b"d"])
    with pytest.raises(ValueError, match="more than the 3 puts promised"):
        m.put_batch(data, pos, lens, offs, 0, 5, 0)
    assert [m.get(k) for k in (b"a", b"b", b"c")] == [2, 1, 3]
    # A promise no smaller than half the table changes nothing: the full table, Kafka's limits.
    m.clear(expected_puts=m.slots // 2)
    assert m.put_batch(data, pos, lens, offs, 0, 5, 0) == 5
    assert [m.get(k) for k in (b"a", b"b", b"c", b"d")] == [2, 1, 3, 4]


def test_keys_hashed_ahead_build_the_same_map(map_class: MapClass, kernel: str) -> None:
    """The cleaner hashes a region's keys while the map still takes the previous region's
    puts: hashing must not depend on what the table holds."""
    rng = random.Random(3)
    keys: list[bytes | None] = [
        None if rng.random() < 0.1 else b"k%d" % rng.randrange(150) for _ in range(600)
    ]
    data, pos, lens, offs = columns(keys)
    ahead = map_of_slots(map_class, 400, kernel)
    hashed = [ahead.hash_keys(data, pos, lens, lo, lo + 200) for lo in (0, 200, 400)]
    stops = [ahead.put_hashed(h, offs, 5) for h in hashed]
    in_order = map_of_slots(map_class, 400, kernel)
    assert stops == [
        in_order.put_batch(data, pos, lens, offs, lo, lo + 200, 5) for lo in (0, 200, 400)
    ]
    assert np.array_equal(ahead._table, in_order._table)
    assert (ahead.size, ahead.latest_offset) == (in_order.size, in_order.latest_offset)


def test_put_hashed_refuses_keys_of_another_map(map_class: MapClass, kernel: str) -> None:
    data, pos, lens, offs = columns([b"a", b"b"])
    one, other = map_of_slots(map_class, 10, kernel), map_of_slots(map_class, 10, kernel)
    with pytest.raises(ValueError, match="another offset map"):
        other.put_hashed(one.hash_keys(data, pos, lens), offs, 0)
    with pytest.raises(ValueError, match="same length"):
        one.put_hashed(one.hash_keys(data, pos, lens), offs[:1], 0)
    assert other.size == one.size == 0


@pytest.mark.parametrize("cls", MAP_CLASSES, ids=lambda c: c.__name__)
def test_kernels_build_identical_tables(cls: MapClass) -> None:
    rng = random.Random(7)
    keys: list[bytes | None] = [
        None if rng.random() < 0.1 else rng.randbytes(rng.randrange(0, 80)) for _ in range(400)
    ]
    keys += keys[:100]  # overwrites
    data, pos, lens, offs = columns(keys)
    maps = [cls(300 * cls.entry_size, kernel=k) for k in KERNEL_NAMES]
    stops = [m.put_batch(data, pos, lens, offs, 0, len(keys), 3) for m in maps]
    assert stops[0] == stops[1] < len(keys)
    assert np.array_equal(maps[0]._table, maps[1]._table)
    assert [m.size for m in maps] == [270, 270]
    gets = [m.get_batch(data, pos, lens) for m in maps]
    assert np.array_equal(gets[0], gets[1])


# --- CompactOffsetMap: the relative offset -------------------------------------------------------


def test_compact_relative_offset_overflow_stops_put_batch(kernel: str) -> None:
    m = CompactOffsetMap(4096, kernel=kernel)
    base = 1_000
    m.clear(base_offset=base)
    assert (m.base_offset, m.max_offset) == (base, base + 2**32 - 1)
    keys: list[bytes | None] = [b"a", b"b", None, b"c", b"d"]
    offsets = [base, base + 2**32 - 1, base + 2**32 + 5, base + 2**32, base + 2**32 + 1]
    data, pos, lens, offs = columns(keys, offsets)
    # The null key at index 2 is skipped before its offset is looked at.
    assert m.put_batch(data, pos, lens, offs, 0, 5, 0) == 3
    assert (m.size, m.latest_offset, m.base_offset) == (2, base + 2**32 - 1, base)
    assert m.get_batch(data, pos, lens).tolist() == [base, base + 2**32 - 1, -1, -1, -1]
    with pytest.raises(OffsetMapRangeError, match="does not fit"):
        m.put(b"c", base + 2**32)
    with pytest.raises(OffsetMapRangeError):
        m.put(b"c", base - 1)
    # An offset below the base also ends the pass.
    data, pos, lens, offs = columns([b"e"], [base - 1])
    assert m.put_batch(data, pos, lens, offs, 0, 1, 0) == 0
    # A new pass with a new base maps them.
    m.clear(base_offset=base + 2**32)
    assert m.put_batch(*columns([b"c", b"d"], [base + 2**32, base + 2**32 + 1]), 0, 2, 0) == 2
    assert (m.get(b"c"), m.get(b"d"), m.get(b"a")) == (base + 2**32, base + 2**32 + 1, -1)


def test_compact_empty_map_adopts_an_out_of_range_base(kernel: str) -> None:
    m = CompactOffsetMap(4096, kernel=kernel)
    far = 5 * 2**40
    assert m.put_batch(*columns([b"a", b"b"], [far, far + 3]), 0, 2, 0) == 2
    assert (m.base_offset, m.get(b"a"), m.get(b"b")) == (far, far, far + 3)
    m.clear()  # the base stays
    assert m.base_offset == far
    m.put(b"z", 7)
    assert (m.base_offset, m.get(b"z")) == (7, 7)
    with pytest.raises(ValueError, match="base offset"):
        m.clear(base_offset=-1)


def test_skimpy_clear_ignores_base_offset(kernel: str) -> None:
    m = SkimpyOffsetMap(4096, kernel=kernel)
    m.clear(base_offset=10**15)
    m.put(b"a", 2**62)
    m.put(b"b", 0)
    assert (m.get(b"a"), m.get(b"b")) == (2**62, 0)
