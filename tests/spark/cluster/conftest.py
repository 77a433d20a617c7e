"""The ``cluster`` tier: a Spark standalone cluster (a master and two workers, each its own JVM)
and the packed Python environment its executors run (:mod:`compactlog.spark.pack`).

Both are module-scoped: one cluster and one archive serve a test module. The cluster's logs
(the daemons' and every executor's) are printed when a test using it fails, and every process
of the cluster is killed at teardown, failed test or not.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from tests.spark.cluster.standalone import SparkCluster


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        item.stash.setdefault(FAILED, []).append(report.when)


FAILED = pytest.StashKey[list[str]]()


def _require_java() -> None:
    if shutil.which("java") is None:
        pytest.skip("no java on PATH: a Spark cluster needs Java 17 or 21")


@pytest.fixture(scope="module")
def spark_cluster(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[SparkCluster]:
    _require_java()
    pytest.importorskip("pyspark", reason="no pyspark (pip install 'compactlog[spark]')")
    cluster = SparkCluster(tmp_path_factory.mktemp("spark-cluster"))
    failed = False
    try:
        cluster.start()
        yield cluster
    except BaseException:
        failed = True
        raise
    finally:
        if failed or any(
            item.stash.get(FAILED, [])
            for item in request.session.items
            if item.module is request.module
        ):
            print("\n".join(cluster.logs()))
        orphans = cluster.stop()
        assert not orphans, f"processes outlived the cluster's JVMs: {orphans}"


@pytest.fixture(scope="module")
def executor_env(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """compactlog and its run-time dependencies packed for ``spark.archives`` (``.tar.gz``)."""
    from compactlog.spark.pack import pack

    path = tmp_path_factory.mktemp("executor-env") / "env.tar.gz"
    return pack(str(path))
