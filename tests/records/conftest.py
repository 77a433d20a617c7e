"""Fixtures of the record-format tests (helpers live in ``records_helpers.py``)."""

from __future__ import annotations

import pytest

KERNELS = ("python", "numba")


@pytest.fixture(params=KERNELS)
def kernel(request: pytest.FixtureRequest) -> str:
    """Each column-decoder test runs once per kernel."""
    return str(request.param)
