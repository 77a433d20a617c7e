"""One local Spark session for every Spark test (a session costs about 8 s to start).

Spark tests are marked ``spark``; they are skipped, not failed, where pyspark or Java is
missing, so that the core library's tests run anywhere.
"""

from __future__ import annotations

import importlib.util
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

#: JVM jars the test session puts on Spark's classpath when scripts/setup-env.sh fetched them
#: (.jars/<name>/ in the checkout, from tests/jars/<name>/pom.xml); the tests that need them skip
#: without them. spark-kafka: Spark's own Kafka connector (tests/spark/test_kafka_connector.py).
SESSION_JARS = ("spark-kafka",)
JARS_DIR = Path(__file__).resolve().parents[2] / ".jars"


def session_jars() -> list[str]:
    """The jar files of :data:`SESSION_JARS` that are present, for ``spark.jars``."""
    return [str(jar) for name in SESSION_JARS for jar in sorted((JARS_DIR / name).glob("*.jar"))]


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

    jars = session_jars()
    conf = {"spark.jars": ",".join(jars)} if jars else None
    session = local_session("local[2]", "compactlog-tests", shuffle_partitions=4, conf=conf)
    yield session
    session.stop()
