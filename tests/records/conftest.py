"""Fixtures of the record-format tests (helpers live in ``records_helpers.py``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from compactlog.records import columns

KERNELS = ("python", "numba")


@pytest.fixture(params=KERNELS)
def kernel(request: pytest.FixtureRequest) -> str:
    """Each column-decoder test runs once per kernel."""
    return str(request.param)


@pytest.fixture(autouse=True, scope="session")
def _compiled_header_scan_everywhere() -> Iterator[None]:
    """The numba kernel frames even one-batch buffers with its compiled header scan here (in
    use it starts at 16 KiB), so that every kernel-agreement test also compares the scan with
    the Python framing loop, errors included."""
    saved = columns._SCAN_MIN_BYTES
    columns._SCAN_MIN_BYTES = 0
    yield
    columns._SCAN_MIN_BYTES = saved
