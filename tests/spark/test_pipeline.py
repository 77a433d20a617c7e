"""The main job end to end (small), through the CLI as scripts/main.sh runs it, and the Spark
commands' errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from click.testing import CliRunner

from compactlog.cli.main import main
from compactlog.errors import ConfigError
from compactlog.spark.pipeline import PipelineSpec, run


def test_the_main_job_runs_end_to_end_and_checks_its_result(spark: Any, tmp_path: Path) -> None:
    data, out = tmp_path / "data", tmp_path / "out"
    args = [
        "--data-dir", str(data), "spark", "pipeline", "--out", str(out),
        "--keys", "3000", "--updates", "6000", "--value-bytes", "64", "--partitions", "2",
    ]  # fmt: skip
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    for step in ("[1/5] generate", "[3/5] clean", "[5/5] report", "one-pass compaction cleaned"):
        assert step in result.output
    assert "OK: 2,850 live keys in the snapshot" in result.output  # 3000 keys, 5 % deleted
    assert (out / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    after = json.loads((out / "report-after.json").read_text())["partitions"]
    assert sum(p["superseded"] for p in after) == 0
    assert sum(p["distinct_keys"] for p in after) == 3000  # tombstones kept by a first clean
    assert (out / "snapshot" / "_current").exists()

    # A second run refuses the directories unless told to start afresh.
    again = CliRunner().invoke(main, args)
    assert again.exit_code == 2
    assert "is not empty" in again.output and "--fresh" in again.output
    # CliRunner's streams are no terminal: no progress bars, as with --quiet.
    fresh = CliRunner().invoke(main, [*args, "--fresh", "--quiet"])
    assert fresh.exit_code == 0
    assert fresh.stderr == "" and "tasks/s" not in fresh.output


def test_the_pipeline_never_removes_a_directory_it_did_not_make(tmp_path: Path) -> None:
    (tmp_path / "precious").mkdir()
    (tmp_path / "precious" / "thesis.tex").write_text("...")
    spec = PipelineSpec(str(tmp_path / "precious"), str(tmp_path / "out"), fresh=True)
    with pytest.raises(ConfigError, match="is not empty"):
        run(None, spec, None)
    assert (tmp_path / "precious" / "thesis.tex").exists()
    with pytest.raises(ConfigError, match=r"WorkloadSpec\.keys"):
        run(None, PipelineSpec(str(tmp_path / "d"), str(tmp_path / "o"), keys=0), None)
