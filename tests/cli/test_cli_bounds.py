"""Findings 7 and 8 of issue 17 at the CLI: a huge partition count and an out-of-range timestamp
are one-line usage errors, at once, and nothing is created or appended."""

from __future__ import annotations

import resource
import time

import pytest
from cli_helpers import Cli, check_one_line_failure

from compactlog.storage.store import MAX_PARTITIONS_PER_CREATE


@pytest.mark.parametrize(
    "count", ["99999999999", str(2**31 - 1), str(MAX_PARTITIONS_PER_CREATE + 1), "0", "-1"]
)
def test_topics_create_refuses_a_partition_count_out_of_range_at_once(cli: Cli, count: str) -> None:
    started = time.monotonic()
    result = cli("topics", "create", "t", "--partitions", count)
    assert time.monotonic() - started < 5
    line = check_one_line_failure(result, [2])
    assert line.endswith("(INVALID_PARTITIONS)") and count in line
    assert not (cli.data_dir / "t-0").exists()


def test_topics_create_refuses_more_partitions_than_open_files_allow(cli: Cli) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard))
    try:
        result = cli("topics", "create", "t", "--partitions", "400")
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    line = check_one_line_failure(result, [2])
    assert "'t'" in line and "400 partitions" in line and "ulimit -n" in line and "1024" in line
    cli.ok("topics", "create", "t", "--partitions", "2")  # nothing of the refused one remains


@pytest.mark.parametrize("timestamp", ["99999999999999999999", str(2**63), "-5", "1.5"])
def test_produce_refuses_a_timestamp_out_of_range_as_a_usage_error(
    cli: Cli, timestamp: str
) -> None:
    cli.ok("topics", "create", "t")
    result = cli("produce", "t", "--timestamp", timestamp, input="v\n")
    line = check_one_line_failure(result, [2])
    assert "--timestamp" in line
    assert cli.ok("consume", "t").stdout == ""


def test_produce_takes_the_largest_timestamp(cli: Cli) -> None:
    cli.ok("topics", "create", "t")
    cli.ok("produce", "t", "-p", "0", "--timestamp", str(2**63 - 1), input="v\n")
    assert cli.ok("consume", "t").stdout == "v\n"
