"""compactlog.spark.pack: what goes into the executors' environment, and what it refuses.

The archive itself is proven by the cluster tier (tests/spark/cluster), whose executors run it.
"""

from __future__ import annotations

import pytest

from compactlog.errors import ConfigError
from compactlog.spark.pack import main, pack, pyvenv_cfg, runtime_distributions


def test_the_environment_holds_compactlogs_dependencies_but_not_pyspark() -> None:
    names = {d.metadata["Name"].lower().replace("_", "-") for d in runtime_distributions()}
    # Imported by the executors' tasks: the record kernels, Arrow batches, compression, CRC.
    assert {"compactlog", "numba", "llvmlite", "numpy", "pyarrow", "pandas", "crc32c"} <= names
    assert {"cramjam", "click", "rich", "cryptography", "cffi"} <= names  # and their own needs
    # Provided by every worker's Spark installation.
    assert not names & {"pyspark", "py4j"}
    # Test and development tools are no run-time dependency.
    assert not names & {"pytest", "hypothesis", "ruff", "mypy", "aiokafka"}


def test_pyvenv_cfg_names_the_base_interpreter() -> None:
    lines = pyvenv_cfg().splitlines()
    assert lines[0].startswith("home = /")
    assert "include-system-site-packages = false" in lines


@pytest.mark.parametrize("name", ["env.tar", "env", "env.tar.bz2"])
def test_an_archive_spark_cannot_unpack_with_modes_is_refused(tmp_path: object, name: str) -> None:
    with pytest.raises(ConfigError, match=r"must end with \.tar\.gz, \.tgz, \.zip"):
        pack(f"{tmp_path}/{name}")


def test_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "usage: python -m compactlog.spark.pack OUT.tar.gz" in capsys.readouterr().err
    assert main(["/nonexistent-dir/env.tar"]) == 3
    assert capsys.readouterr().err.startswith("Error: /nonexistent-dir/env.tar: the archive's")


def test_compactlog_goes_as_sources_and_numbas_compiled_kernels() -> None:
    from compactlog.spark.pack import _self_files

    names = [name for _, name in _self_files()]
    assert "compactlog/spark/pack.py" in names
    assert "compactlog/py.typed" in names
    cached = [n for n in names if "/__pycache__/" in n]
    assert all(n.endswith((".nbi", ".nbc")) for n in cached), cached  # never bytecode
