"""One local Spark session for every Spark test (a session costs about 8 s to start).

Spark tests are marked ``spark``; they are skipped, not failed, where pyspark or Java is
missing, so that the core library's tests run anywhere.
"""

from __future__ import annotations

import importlib.util
import shutil
from collections.abc import Iterator
from typing import Any

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/spark/" in item.nodeid.replace("\\", "/"):
            item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    if importlib.util.find_spec("pyspark") is None:
        pytest.skip("pyspark is not installed (pip install compactlog[spark])")
    if shutil.which("java") is None:
        pytest.skip("no java on PATH: Spark needs Java 17 or 21")
    from compactlog.spark import local_session

    session = local_session("local[2]", "compactlog-tests", shuffle_partitions=4)
    yield session
    session.stop()
