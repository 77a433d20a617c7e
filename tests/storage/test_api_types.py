"""Finding 8 of issue 17: wrong Python types given to the public Store API raise a
CompactlogError naming the argument (never TypeError/AttributeError from deep inside, and never
accepted), and partition counts are bounded."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from compactlog.errors import CompactlogError, InvalidArgumentError, InvalidPartitionsError
from compactlog.log_manager import LogManager
from compactlog.storage.store import MAX_PARTITIONS_PER_CREATE, Store

Call = Callable[[Store], object]

# (the call, a word its error must name)
WRONG_TYPES: list[tuple[str, Call, str]] = [
    ("create_topic partitions=True", lambda s: s.create_topic("n", partitions=True), "partitions"),
    ("create_topic partitions=2.0", lambda s: s.create_topic("n", partitions=2.0), "partitions"),  # type: ignore[arg-type]
    ("create_topic partitions='3'", lambda s: s.create_topic("n", partitions="3"), "partitions"),  # type: ignore[arg-type]
    ("create_topic name=b'n'", lambda s: s.create_topic(b"n"), "name"),  # type: ignore[arg-type]
    ("create_topic config=list", lambda s: s.create_topic("n", 1, [("a", "b")]), "config"),  # type: ignore[arg-type]
    ("delete_topic name=1", lambda s: s.delete_topic(1), "topic name"),  # type: ignore[arg-type]
    ("topic_info name=None", lambda s: s.topic_info(None), "topic name"),  # type: ignore[arg-type]
    ("partitions name=1", lambda s: s.partitions(1), "topic name"),  # type: ignore[arg-type]
    ("topic_config name=1", lambda s: s.topic_config(1), "topic name"),  # type: ignore[arg-type]
    ("describe_config name=1", lambda s: s.describe_config(1), "topic name"),  # type: ignore[arg-type]
    ("alter_config set=str", lambda s: s.alter_config("t", "retention.ms=1"), "set"),  # type: ignore[arg-type]
    ("alter_config delete=str", lambda s: s.alter_config("t", delete="retention.ms"), "delete"),
    ("alter_config delete=[1]", lambda s: s.alter_config("t", delete=[1]), "delete[0]"),  # type: ignore[list-item]
    ("log partition=True", lambda s: s.log("t", True), "partition"),
    ("log partition='0'", lambda s: s.log("t", "0"), "partition"),  # type: ignore[arg-type]
    ("log topic=b't'", lambda s: s.log(b"t", 0), "topic"),  # type: ignore[arg-type]
    ("append records=str", lambda s: s.append("t", 0, "kv"), "records"),  # type: ignore[arg-type]
    ("append key=str", lambda s: s.append("t", 0, [("k", b"v")]), "records[0] key"),  # type: ignore[list-item]
    ("append value=int", lambda s: s.append("t", 0, [(b"k", 1)]), "records[0] value"),  # type: ignore[list-item]
    ("append record=bytes", lambda s: s.append("t", 0, [b"kv"]), "records[0]"),  # type: ignore[list-item]
    (
        "append header value=str",
        lambda s: s.append("t", 0, [(b"k", b"v", [("h", "x")])]),  # type: ignore[list-item]
        "records[0] headers[0] value",
    ),
    ("append timestamp=1.5", lambda s: s.append("t", 0, [(b"k", b"v")], 1.5), "timestamp"),  # type: ignore[arg-type]
    (
        "append compression=1",
        lambda s: s.append("t", 0, [(b"k", b"v")], compression=1),  # type: ignore[arg-type]
        "compression",
    ),
    ("append_batch data=str", lambda s: s.append_batch("t", 0, "batch"), "data"),  # type: ignore[arg-type]
    ("append_batch data=None", lambda s: s.append_batch("t", 0, None), "data"),  # type: ignore[arg-type]
    ("append_batch_info data=list", lambda s: s.append_batch_info("t", 0, [1]), "data"),  # type: ignore[arg-type]
    ("producer_state partition=1.0", lambda s: s.producer_state("t", 1.0), "partition"),  # type: ignore[arg-type]
    ("remove_expired_producers now='1'", lambda s: s.remove_expired_producers("1"), "now"),  # type: ignore[arg-type]
    ("produce topic=None", lambda s: s.produce(None, b"k", b"v"), "topic"),  # type: ignore[arg-type]
    ("produce key=str", lambda s: s.produce("t", "k", b"v"), "key"),  # type: ignore[arg-type]
    ("produce value=str", lambda s: s.produce("t", b"k", "v"), "value"),  # type: ignore[arg-type]
    ("produce headers=dict", lambda s: s.produce("t", b"k", b"v", {"h": b"x"}), "headers"),  # type: ignore[arg-type]
    ("produce timestamp=str", lambda s: s.produce("t", b"k", b"v", timestamp="0"), "timestamp"),  # type: ignore[arg-type]
    ("produce partition=True", lambda s: s.produce("t", b"k", b"v", partition=True), "partition"),
    ("roll partition=None", lambda s: s.roll("t", None), "partition"),  # type: ignore[arg-type]
    ("read offset=1.5", lambda s: s.read("t", 0, offset=1.5), "offset"),  # type: ignore[arg-type]
    ("read offset=True", lambda s: s.read("t", 0, offset=True), "offset"),
    ("read offset='0'", lambda s: s.read("t", 0, offset="0"), "offset"),  # type: ignore[arg-type]
    ("log_start_offset partition='0'", lambda s: s.log_start_offset("t", "0"), "partition"),  # type: ignore[arg-type]
    ("log_end_offset topic=0", lambda s: s.log_end_offset(0, 0), "topic"),  # type: ignore[arg-type]
    ("segments partition=0.0", lambda s: s.segments("t", 0.0), "partition"),  # type: ignore[arg-type]
    ("delete_records before=1.5", lambda s: s.delete_records("t", 0, 1.5), "before_offset"),  # type: ignore[arg-type]
    ("run_retention now=1.5", lambda s: s.run_retention(1.5), "now"),  # type: ignore[arg-type]
]


@pytest.fixture
def store(tmp_path: Path) -> Any:
    with Store.open(tmp_path / "data", clock=lambda: 1_700_000_000_000) as s:
        s.create_topic("t", 1)
        s.append("t", 0, [(b"k", b"v")])
        yield s


@pytest.mark.parametrize(
    ("call", "argument"), [(c, a) for _, c, a in WRONG_TYPES], ids=[i for i, _, _ in WRONG_TYPES]
)
def test_a_wrong_type_is_a_compactlog_error_naming_the_argument(
    store: Store, call: Call, argument: str
) -> None:
    with pytest.raises(CompactlogError) as caught:
        result = call(store)
        if hasattr(result, "__next__"):
            next(iter(result))  # type: ignore[call-overload]
    assert argument in str(caught.value), str(caught.value)
    assert isinstance(caught.value, InvalidArgumentError)
    assert isinstance(caught.value, TypeError)  # what a Python caller may catch as well
    # Nothing was changed: the topic still holds its one record and no other topic appeared.
    assert store.topics() == ["t"]
    assert [r.value for r in store.read("t", 0)] == [b"v"]


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("path", (12,)),
        ("clock", ("d", "not a clock")),
        ("config", ("d", None, ["a=b"])),
    ],
)
def test_store_open_checks_its_argument_types(tmp_path: Path, name: str, args: tuple[Any]) -> None:
    with pytest.raises(InvalidArgumentError, match=name):
        Store.open(*(str(tmp_path / a) if a == "d" else a for a in args))  # type: ignore[arg-type]


def test_numpy_integers_are_integers(store: Store) -> None:
    assert [r.value for r in store.read("t", np.int32(0), offset=np.int64(0))] == [b"v"]
    store.create_topic("n", np.int64(2))
    assert store.partitions("n") == 2


def test_bytes_like_keys_and_values_are_accepted(store: Store) -> None:
    store.append("t", 0, [(bytearray(b"k2"), memoryview(b"v2"))])  # type: ignore[list-item]
    store.produce("t", None, None)
    assert [r.value for r in store.read("t", 0, offset=1)] == [b"v2", None]


def test_a_huge_partition_count_is_refused_at_once(store: Store) -> None:
    with pytest.raises(InvalidPartitionsError, match=f"at most {MAX_PARTITIONS_PER_CREATE}"):
        store.create_topic("huge", 2**31 - 1)
    with pytest.raises(InvalidPartitionsError, match="99999999999"):
        store.create_topic("huge", 99_999_999_999)
    assert store.topics() == ["t"]
    assert not any(p.name.startswith("huge") for p in Path(store.path).iterdir())


@pytest.mark.parametrize(
    ("call", "argument"),
    [
        (lambda m: m.clean(now=1.5), "now"),
        (lambda m: m.clean_log("t", 0, now="1"), "now"),
        (lambda m: m.clean_log("t", True), "partition"),
        (lambda m: m.clean_log(b"t", 0), "topic"),
    ],
    ids=["clean now=1.5", "clean_log now='1'", "clean_log partition=True", "clean_log topic=b't'"],
)
def test_log_manager_checks_its_argument_types(
    tmp_path: Path, call: Callable[[LogManager], object], argument: str
) -> None:
    with LogManager.open(tmp_path / "data", lambda: 1_700_000_000_000) as manager:
        manager.store.create_topic("t", 1, {"cleanup.policy": "compact"})
        with pytest.raises(InvalidArgumentError, match=argument):
            call(manager)
