"""The ``compactlog`` format is registered once per session: every pipeline step registers it,
and each registration after the first made Spark log a WARN that the data source "replaced a
previously registered data source" (three times in the main job's output)."""

from __future__ import annotations

from typing import Any

import pytest

from compactlog.spark.datasource import register

pytestmark = pytest.mark.spark


def test_the_format_is_registered_with_spark_once_per_session(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pyspark.sql.datasource import DataSourceRegistration

    calls: list[str] = []
    real = DataSourceRegistration.register

    def counting(self: Any, source: Any) -> None:
        calls.append(source.name())
        real(self, source)

    monkeypatch.setattr(DataSourceRegistration, "register", counting)
    register(spark)  # the session fixture registered it already
    register(spark)
    assert calls == []
    assert spark.read.format("compactlog").schema is not None
