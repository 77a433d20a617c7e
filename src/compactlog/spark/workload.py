"""A workload generator on Spark: an entity changelog published into a topic, in parallel.

    spec = WorkloadSpec(topic="tickets", keys=200_000, value_bytes=1024, updates=200_000,
                        distribution="skewed", skew=1.1, tombstone_fraction=0.05)
    result = generate(spark, "data-dir", spec, progress=print)
    expected_state(spec).live_keys           # what a compacted topic must keep

It is the traffic a service such as a ticketing system puts on a compacted topic: one record per
entity change, keyed by the entity id, and now and then the whole state published again.

Theory of operation
-------------------
The workload is a pure function of its :class:`WorkloadSpec`. No record is built in Python: each
phase is a ``spark.range`` whose rows become records through column expressions (``xxhash64``,
``sha2``, ``pmod``, ``pow``, ``repeat``) of the row's number, the phase and the seed only, never of
a random generator's state or of the row's position in a task. The phases are written one after
the other, each through the ``compactlog`` sink (one commit, exactly once, see
:mod:`compactlog.spark.sink`):

1. ``initial``: every key once, key ``k`` as event ``k + 1``, in key order;
2. ``updates``: event ``N + 1 + j`` updates the key drawn for ``j`` (``j < updates``), in ``j``
   order. ``uniform`` draws ``xxhash64(seed, j) mod N``. ``skewed`` draws a popularity rank from
   the continuous power law with density ``∝ r^-skew`` on ``[1, N]`` by its inverse CDF (a
   zipf-like law: rank 1 is the hottest key) and maps ranks to keys through a seeded affine
   permutation of the key space, so hot keys are spread over the partitions;
3. ``tombstones``: ``round(tombstone_fraction × N)`` keys get a null value: the keys ``k`` with
   ``(a·k + b) mod N < T`` for a seeded ``a`` coprime to ``N``, which is exactly ``T`` keys,
   published in the order of that permutation;
4. ``republish``: every live key once more, in key order, with its latest state: the same bytes
   as the last record of that key, as a service publishes when it rebuilds its changelog.

A value is JSON text of exactly ``value_bytes`` bytes, a function of (seed, key, version) only::

    {"id":"ticket-000000042","version":2017,"status":"open","body":"3f9c…"}

``version`` is the number of the event that produced the state (so it grows with every change of
one key); ``status`` is ``new`` at creation, then one of Zendesk's ticket statuses; ``body`` is
hex digits of SHA-512 digests of the (seed, key, version), up to 1 KiB of them, repeated past
that. Hex text compresses about 2:1 (prose: 2-4:1); values longer than ~1 KiB compress better
than real ones. A value too short for its JSON is cut, then closed: ``{"id":"ticket-0000"}`` for
20 bytes (``{`` for 1).

Determinism: rows are generated and sorted by a number (event or key) with no shuffle, except
the republication, which is a global ``orderBy`` of the key; the sink appends rows in task order,
then row order. So the same spec written into an empty topic gives the same records (key, value,
partition, offset) whatever the number of Spark tasks; only timestamps (the store's clock at
commit) differ. Writing into a topic that holds records appends after them.
"""

from __future__ import annotations

import math
import os
import random
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, NoReturn

import numpy as np
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812 - Spark's own idiom

from compactlog.errors import CompactlogError, ConfigError
from compactlog.records import RECORD_BATCH_OVERHEAD, Compression
from compactlog.spark.datasource import register
from compactlog.spark.sink import RECORD_OVERHEAD
from compactlog.storage.config import LogConfig
from compactlog.storage.store import Store
from compactlog.storage.topic_names import topic_name_problem

PHASES: Final = ("initial", "updates", "tombstones", "republish")
DISTRIBUTIONS: Final = ("uniform", "skewed")
#: Digits of the zero-padded entity number in a key (``ticket-000000042``); it bounds ``keys``.
KEY_DIGITS: Final = 9
MAX_KEYS: Final = 10**KEY_DIGITS
#: Zendesk's ticket statuses after creation (a new entity is ``new``).
STATUSES: Final = ("open", "pending", "hold", "solved", "closed")
#: SHA-512 digests (128 hex digits each) of unique padding per value: 1 KiB, enough to keep a
#: compressor honest on typical entity sizes without an expression per 128 bytes of huge values.
MAX_PAD_DIGESTS: Final = 8
DIGEST_CHARS: Final = 128
#: Rows below which a phase gets fewer Spark tasks than the session's parallelism: a task costs
#: a staging file and some scheduling, worth it only for this many rows.
MIN_ROWS_PER_TASK: Final = 20_000
#: Entity names go into keys and JSON unescaped, so they are kept to plain characters.
_ENTITY = re.compile(r"[A-Za-z0-9._-]{1,64}")
_MAX_SEED: Final = (1 << 63) - 1
_UNIT_BITS: Final = 53  # a double's mantissa: u = (hash & (2^53 - 1)) / 2^53 is uniform in [0, 1)


def _default_topic_config() -> dict[str, str]:
    return {"cleanup.policy": "compact"}


@dataclass(frozen=True)
class WorkloadSpec:
    """What to publish. Construction validates every field (``ConfigError`` names the field).

    ``topic_config`` is used only when the topic does not exist yet (with ``partitions``).
    """

    topic: str
    keys: int
    value_bytes: int = 1024
    distribution: str = "uniform"
    #: The power law's exponent for ``distribution="skewed"`` (1.0: zipf; larger: hotter).
    skew: float = 1.0
    updates: int = 0
    tombstone_fraction: float = 0.0
    republish: bool = False
    partitions: int = 1
    seed: int = 0
    entity: str = "ticket"
    compression: str = "none"
    topic_config: Mapping[str, str] = field(default_factory=_default_topic_config)

    def __post_init__(self) -> None:
        problem = topic_name_problem(self.topic) if isinstance(self.topic, str) else "not a str"
        if problem is not None:
            _bad("topic", self.topic, f"a legal topic name ({problem})")
        _check_int("keys", self.keys, 1, MAX_KEYS)
        _check_int("value_bytes", self.value_bytes, 1, None)
        if self.distribution not in DISTRIBUTIONS:
            _bad("distribution", self.distribution, " or ".join(map(repr, DISTRIBUTIONS)))
        if not _is_number(self.skew) or not math.isfinite(self.skew) or self.skew <= 0:
            _bad("skew", self.skew, "a finite number > 0")
        _check_int("updates", self.updates, 0, None)
        fraction = self.tombstone_fraction
        if not _is_number(fraction) or not 0.0 <= fraction <= 1.0:
            _bad("tombstone_fraction", fraction, "a number from 0 to 1")
        if not isinstance(self.republish, bool):
            _bad("republish", self.republish, "True or False")
        _check_int("partitions", self.partitions, 1, None)
        _check_int("seed", self.seed, 0, _MAX_SEED)
        if not isinstance(self.entity, str) or not _ENTITY.fullmatch(self.entity):
            _bad("entity", self.entity, "1-64 characters of [A-Za-z0-9._-]")
        try:
            Compression.from_name(self.compression)
        except CompactlogError as exc:
            _bad("compression", self.compression, f"a codec name ({exc})")
        try:
            LogConfig.create(dict(self.topic_config))
        except CompactlogError as exc:
            raise ConfigError(f"WorkloadSpec.topic_config: {exc}") from exc

    @property
    def key_bytes(self) -> int:
        """The length of every key (``<entity>-<9 digits>``)."""
        return len(self.entity) + 1 + KEY_DIGITS

    @property
    def tombstones(self) -> int:
        """How many keys the tombstone phase deletes."""
        return round(self.tombstone_fraction * self.keys)

    def key(self, key_id: int) -> bytes:
        """The key of entity number ``key_id`` (0-based), e.g. ``b"ticket-000000042"``."""
        return f"{self.entity}-{key_id:0{KEY_DIGITS}d}".encode()


def _bad(name: str, value: object, expected: str) -> NoReturn:
    raise ConfigError(f"WorkloadSpec.{name} must be {expected}, not {value!r}")


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _check_int(name: str, value: object, low: int, high: int | None) -> None:
    in_range = isinstance(value, int) and low <= value and (high is None or value <= high)
    if in_range and not isinstance(value, bool):
        return
    _bad(name, value, f"an integer >= {low}" + ("" if high is None else f" and <= {high}"))


# --- the expected outcome, without Spark ----------------------------------------------------


@dataclass(frozen=True)
class ExpectedState:
    """What :func:`generate` writes into an empty topic, and what compaction must keep.

    After a complete compaction the topic holds exactly ``live_keys`` records with values plus
    the ``tombstones`` until their ``delete.retention.ms`` passes.
    """

    records: Mapping[str, int]  # per phase, in PHASES order
    live_keys: int
    tombstones: int
    payload_bytes: Mapping[str, int]  # key + value bytes per phase

    @property
    def total_records(self) -> int:
        return sum(self.records.values())


def expected_state(spec: WorkloadSpec) -> ExpectedState:
    """The record counts and the final key state of ``spec``, computed in constant time."""
    tombstones = spec.tombstones
    live = spec.keys - tombstones
    records = {
        "initial": spec.keys,
        "updates": spec.updates,
        "tombstones": tombstones,
        "republish": live if spec.republish else 0,
    }
    record_bytes = spec.key_bytes + spec.value_bytes
    payload = {phase: n * record_bytes for phase, n in records.items()}
    payload["tombstones"] = tombstones * spec.key_bytes
    return ExpectedState(records, live, tombstones, payload)


@dataclass(frozen=True)
class _Permutation:
    """``k -> (a·k + b) mod n``, a bijection of ``[0, n)`` since ``gcd(a, n) = 1``."""

    a: int
    b: int
    a_inverse: int
    n: int

    @classmethod
    def seeded(cls, n: int, seed: int, purpose: str) -> _Permutation:
        if n == 1:
            return cls(1, 0, 1, 1)
        rng = random.Random(f"compactlog.workload/{seed}/{purpose}")  # str seeds are stable
        a = rng.randrange(1, n)
        while math.gcd(a, n) != 1:
            a = a % (n - 1) + 1
        return cls(a, rng.randrange(n), pow(a, -1, n), n)

    # Products stay below n² <= 10^18 < 2^63: no overflow in Spark's ANSI long arithmetic.
    def column(self, k: Column) -> Column:
        return F.pmod(F.lit(self.a) * k + F.lit(self.b), F.lit(self.n))

    def inverse_column(self, r: Column) -> Column:
        shifted = F.pmod(r + F.lit(self.n - self.b), F.lit(self.n))
        return F.pmod(F.lit(self.a_inverse) * shifted, F.lit(self.n))

    def inverse(
        self, r: np.ndarray[Any, np.dtype[np.int64]]
    ) -> np.ndarray[Any, np.dtype[np.int64]]:
        shifted = (r - self.b) % self.n  # numpy's % of an int64 by a positive int is >= 0
        return (shifted * self.a_inverse) % self.n


def _tombstone_permutation(spec: WorkloadSpec) -> _Permutation:
    return _Permutation.seeded(spec.keys, spec.seed, "tombstones")


def _hot_permutation(spec: WorkloadSpec) -> _Permutation:
    return _Permutation.seeded(spec.keys, spec.seed, "popularity")


def tombstoned_key_ids(spec: WorkloadSpec) -> np.ndarray[Any, np.dtype[np.int64]]:
    """The entity numbers the tombstone phase deletes, in the order it publishes them."""
    ranks = np.arange(spec.tombstones, dtype=np.int64)
    return _tombstone_permutation(spec).inverse(ranks)


# --- the records, as Spark columns ----------------------------------------------------------


def _hash(spec: WorkloadSpec, salt: str, *cols: Column) -> Column:
    return F.xxhash64(F.lit(spec.seed), F.lit(salt), *cols)


def _key(spec: WorkloadSpec, key_id: Column) -> Column:
    digits = F.lpad(key_id.cast("string"), KEY_DIGITS, "0")
    return F.concat(F.lit(spec.entity + "-"), digits)


def _value(spec: WorkloadSpec, key_id: Column, version: Column) -> Column:
    """The JSON value of entity ``key_id`` at ``version``: exactly ``value_bytes`` bytes."""
    if spec.value_bytes < 2:
        return F.lit("{").cast("binary")
    pick = F.pmod(_hash(spec, "status", key_id, version), F.lit(len(STATUSES))) + 1
    status = F.when(version == key_id + 1, F.lit("new")).otherwise(
        F.element_at(F.array(*map(F.lit, STATUSES)), pick.cast("int"))
    )
    parts = [
        F.lit('{"id":"'),
        _key(spec, key_id),
        F.lit('","version":'),
        version.cast("string"),
        F.lit(',"status":"'),
        status,
        F.lit('","body":"'),
    ]
    # Cutting with left() is a copy; rpad() to a computed length was 2-3x slower here.
    shortest_prefix = len('{"id":"","version":1,"status":"new","body":"') + spec.key_bytes
    pad = spec.value_bytes - 2 - shortest_prefix
    if pad > 0:
        digests = min(MAX_PAD_DIGESTS, math.ceil(pad / DIGEST_CHARS))
        name = F.concat_ws(
            ":", F.lit(str(spec.seed)), key_id.cast("string"), version.cast("string")
        )
        block = F.concat(*(F.sha2(F.concat(name, F.lit(f"#{i}")), 512) for i in range(digests)))
        parts.append(F.repeat(block, math.ceil(pad / (digests * DIGEST_CHARS))))
    text = F.concat(F.left(F.concat(*parts), F.lit(spec.value_bytes - 2)), F.lit('"}'))
    return text.cast("binary")


def _draw(spec: WorkloadSpec, j: Column) -> Column:
    """The entity number that update ``j`` changes."""
    n = spec.keys
    if spec.distribution == "uniform":
        return F.pmod(_hash(spec, "uniform", j), F.lit(n))
    mask = (1 << _UNIT_BITS) - 1
    u = _hash(spec, "skewed", j).bitwiseAND(F.lit(mask)).cast("double") / float(1 << _UNIT_BITS)
    s = spec.skew
    if abs(s - 1.0) < 1e-9:
        rank = F.exp(u * math.log(n))  # the s = 1 limit of the formula below
    else:
        rank = F.pow(F.lit(1.0) + u * (n ** (1.0 - s) - 1.0), F.lit(1.0 / (1.0 - s)))
    rank0 = F.least(F.greatest(F.floor(rank) - 1, F.lit(0)), F.lit(n - 1)).cast("long")
    return _hot_permutation(spec).column(rank0)


def _records(spec: WorkloadSpec, key_id: Column, version: Column, value: Column) -> list[Column]:
    # The sink reads key and value and ignores the rest; key_id and version help tests and users.
    return [
        _key(spec, key_id).cast("binary").alias("key"),
        value.alias("value"),
        key_id.cast("long").alias("key_id"),
        version.cast("long").alias("version"),
    ]


def _range(spark: SparkSession, n: int, tasks: int | None) -> DataFrame:
    if tasks is not None and (not isinstance(tasks, int) or tasks < 1):
        raise ConfigError(f"tasks must be a positive integer or None, not {tasks!r}")
    if tasks is None:
        parallelism = spark.sparkContext.defaultParallelism
        tasks = max(1, min(parallelism, math.ceil(n / MIN_ROWS_PER_TASK)))
    return spark.range(0, n, 1, tasks)


def _latest_versions(spark: SparkSession, spec: WorkloadSpec, tasks: int | None) -> DataFrame:
    """``key_id, version``: the last version of every key before the tombstones, by key."""
    created = _range(spark, spec.keys, tasks).select(
        F.col("id").alias("key_id"), (F.col("id") + 1).alias("version")
    )
    if spec.updates == 0:
        return created
    updated = _range(spark, spec.updates, tasks).select(
        _draw(spec, F.col("id")).alias("key_id"),
        (F.col("id") + spec.keys + 1).alias("version"),
    )
    return created.unionByName(updated).groupBy("key_id").agg(F.max("version").alias("version"))


def phase_frames(
    spark: SparkSession, spec: WorkloadSpec, *, tasks: int | None = None
) -> dict[str, DataFrame]:
    """One DataFrame per phase (``key``, ``value``, ``key_id``, ``version``), in write order.

    ``key_id`` is the entity number; ``version`` the event number of the state the value holds
    (a tombstone's own event number). The sink writes ``key`` and ``value`` and ignores the
    rest. Nothing runs until a frame is written or collected.

    ``tasks`` sets the Spark partitions of each ``range`` (default: the session's parallelism,
    fewer for small phases); it changes how the work is split, never the records.
    """
    frames: dict[str, DataFrame] = {}
    key_id, version = F.col("key_id"), F.col("version")

    initial = _range(spark, spec.keys, tasks).select(
        F.col("id").alias("key_id"), (F.col("id") + 1).alias("version")
    )
    frames["initial"] = initial.select(
        _records(spec, key_id, version, _value(spec, key_id, version))
    )

    updates = _range(spark, spec.updates, tasks).select(
        _draw(spec, F.col("id")).alias("key_id"), (F.col("id") + spec.keys + 1).alias("version")
    )
    frames["updates"] = updates.select(
        _records(spec, key_id, version, _value(spec, key_id, version))
    )

    tombstone_perm = _tombstone_permutation(spec)
    deleted = _range(spark, spec.tombstones, tasks).select(
        tombstone_perm.inverse_column(F.col("id")).alias("key_id"),
        (F.col("id") + spec.keys + spec.updates + 1).alias("version"),
    )
    frames["tombstones"] = deleted.select(
        _records(spec, key_id, version, F.lit(None).cast("binary"))
    )

    live = tombstone_perm.column(key_id) >= F.lit(spec.tombstones)
    if spec.republish:
        latest = _latest_versions(spark, spec, tasks).where(live).orderBy("key_id")
    else:
        latest = initial.limit(0)
    frames["republish"] = latest.select(
        _records(spec, key_id, version, _value(spec, key_id, version))
    )
    return frames


def expected_latest(spark: SparkSession, spec: WorkloadSpec) -> DataFrame:
    """``key``, ``value``: the last record of every key once all phases are written.

    Tombstoned keys have a null value. A fully compacted topic (tombstones not yet past their
    horizon) holds exactly these rows; without the nulls, it is the snapshot of the entities.
    """
    key_id, version = F.col("key_id"), F.col("version")
    live = _tombstone_permutation(spec).column(key_id) >= F.lit(spec.tombstones)
    value = F.when(live, _value(spec, key_id, version)).otherwise(F.lit(None).cast("binary"))
    latest = _latest_versions(spark, spec, None)
    return latest.select(_key(spec, key_id).cast("binary").alias("key"), value.alias("value"))


# --- running it -----------------------------------------------------------------------------


@dataclass(frozen=True)
class PhaseProgress:
    """One progress event: a phase starts (``done=False``) or has been committed."""

    phase: str
    index: int  # 1-based, of len(PHASES)
    records: int
    done: bool
    seconds: float  # the phase's wall time, when done


@dataclass(frozen=True)
class PhaseResult:
    phase: str
    records: int
    payload_bytes: int  # key + value bytes handed to the sink
    seconds: float


@dataclass(frozen=True)
class WorkloadResult:
    """What :func:`generate` wrote (``live_keys``, ``tombstones``: as :class:`ExpectedState`)."""

    topic: str
    phases: tuple[PhaseResult, ...]
    live_keys: int
    tombstones: int
    seconds: float

    @property
    def records(self) -> int:
        return sum(p.records for p in self.phases)

    @property
    def payload_bytes(self) -> int:
        return sum(p.payload_bytes for p in self.phases)

    def records_by_phase(self) -> dict[str, int]:
        return {p.phase: p.records for p in self.phases}


def prepare_topic(data_dir: str | os.PathLike[str], spec: WorkloadSpec) -> None:
    """Create the topic if missing; refuse (before creating it) one that cannot take the workload.

    The store is closed on return: the sink's commit opens it itself, and a store is exclusive.
    """
    with Store.open(data_dir) as store:
        exists = spec.topic in store.topics()
        if exists and store.partitions(spec.topic) != spec.partitions:
            raise ConfigError(
                f"WorkloadSpec.partitions is {spec.partitions}, but topic {spec.topic!r} "
                f"already exists in {data_dir} with {store.partitions(spec.topic)}"
            )
        if exists:
            config = store.topic_config(spec.topic)
        else:
            config = LogConfig.create(dict(spec.topic_config), store.broker)
        _check_fits(spec, config)
        if not exists:
            store.create_topic(spec.topic, spec.partitions, dict(spec.topic_config))


def _check_fits(spec: WorkloadSpec, config: LogConfig) -> None:
    largest = RECORD_BATCH_OVERHEAD + RECORD_OVERHEAD + spec.key_bytes + spec.value_bytes
    if largest > config.max_message_bytes:
        raise ConfigError(
            f"WorkloadSpec.value_bytes={spec.value_bytes} makes records of up to {largest} bytes, "
            f"more than topic {spec.topic!r}'s max.message.bytes={config.max_message_bytes}"
        )
    if largest > config.segment_bytes:
        raise ConfigError(
            f"WorkloadSpec.value_bytes={spec.value_bytes} makes records of up to {largest} bytes, "
            f"more than topic {spec.topic!r}'s segment.bytes={config.segment_bytes}"
        )


def generate(
    spark: SparkSession,
    data_dir: str | os.PathLike[str],
    spec: WorkloadSpec,
    *,
    progress: Callable[[PhaseProgress], None] | None = None,
    tasks: int | None = None,
) -> WorkloadResult:
    """Publish ``spec``'s workload into ``data_dir`` (created if needed), phase by phase.

    Each non-empty phase is one Spark job and one sink commit; ``progress`` hears of each phase
    before and after it. Errors of the spec or the topic are raised before any job runs.
    """
    start = time.perf_counter()
    data_dir = os.path.abspath(data_dir)
    prepare_topic(data_dir, spec)
    register(spark)
    expected = expected_state(spec)
    frames = phase_frames(spark, spec, tasks=tasks)
    results: list[PhaseResult] = []
    for index, phase in enumerate(PHASES, 1):
        records = expected.records[phase]
        if progress is not None:
            progress(PhaseProgress(phase, index, records, done=False, seconds=0.0))
        began = time.perf_counter()
        if records:
            writer = frames[phase].write.format("compactlog").mode("append")
            writer = writer.option("topic", spec.topic).option("compression", spec.compression)
            writer.save(data_dir)
        seconds = time.perf_counter() - began
        results.append(PhaseResult(phase, records, expected.payload_bytes[phase], seconds))
        if progress is not None:
            progress(PhaseProgress(phase, index, records, done=True, seconds=seconds))
    return WorkloadResult(
        spec.topic,
        tuple(results),
        expected.live_keys,
        expected.tombstones,
        time.perf_counter() - start,
    )
