"""Hypothesis round trips through the whole store: what is appended is what is read, before and
after a clean or an unclean reopen, for keys, values and headers that are null, empty, binary or
large, in every codec and with segments rolling underneath."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compactlog.storage.store import Store
from tests.conftest import ManualClock

blobs = st.one_of(
    st.none(),
    st.just(b""),
    st.binary(min_size=1, max_size=64),
    # large values from a short random pattern: big data without big entropy
    st.tuples(st.integers(1000, 5_000), st.binary(min_size=1, max_size=16)).map(
        lambda t: (t[1] * (t[0] // len(t[1]) + 1))[: t[0]]
    ),
)
headers = st.lists(st.tuples(st.text(max_size=10), blobs), max_size=3).map(tuple)
record = st.tuples(blobs, blobs, headers)
batch = st.tuples(
    st.lists(record, min_size=1, max_size=8),
    st.sampled_from(["none", "gzip", "snappy", "lz4", "zstd"]),
    st.integers(min_value=-1, max_value=2**41),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=st.lists(batch, min_size=1, max_size=6), clean=st.booleans())
def test_appended_records_read_back_identically(
    batches: list[
        tuple[
            list[tuple[bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]], str, int
        ]
    ],
    clean: bool,
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        store = Store.open(data, clock=ManualClock())
        store.create_topic("t", 1, {"segment.bytes": 250_000})
        expected = []
        for records, codec, ts in batches:
            base = store.append("t", 0, records, timestamp=ts, compression=codec)
            expected += [(base + i, ts, k, v, h) for i, (k, v, h) in enumerate(records)]

        def observed(
            s: Store,
        ) -> list[
            tuple[int, int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]
        ]:
            return [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in s.read("t", 0)]

        assert observed(store) == expected
        if clean:
            store.close()
        else:
            store.abandon()
        with Store.open(data, clock=ManualClock()) as again:
            assert observed(again) == expected
