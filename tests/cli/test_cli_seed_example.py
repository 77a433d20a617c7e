"""The issue's seed example, end to end through the CLI: topic ``fruit-prices`` (compact),
grape=$2.69, lime=$0.49, grape=null, lime=$1.59 at offsets 0-3 of 00000000000000000000.log."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import Cli

SEED_INPUT = "grape=$2.69\nlime=$0.49\ngrape=null\nlime=$1.59\n"
SEED_OUTPUT = b"0\tgrape\t$2.69\n1\tlime\t$0.49\n2\tgrape\t\n3\tlime\t$1.59\n"
TS = "1700000000000"


def create_seed_topic(cli: Cli) -> None:
    result = cli.ok("topics", "create", "fruit-prices", "--config", "cleanup.policy=compact")
    assert result.stdout == "Created topic fruit-prices.\n"


@pytest.mark.parametrize("with_partition", [True, False], ids=["one-batch", "partitioner"])
def test_seed_example(cli: Cli, with_partition: bool) -> None:
    create_seed_topic(cli)
    where = ["--partition", "0"] if with_partition else []
    produced = cli.ok(
        "produce", "fruit-prices", "--key-separator", "=", "--null-marker", "null",
        "--timestamp", TS, "--print-offsets", *where, input=SEED_INPUT,
    )  # fmt: skip
    assert produced.stdout == "0 0\n0 1\n0 2\n0 3\n"

    consumed = cli.ok("consume", "fruit-prices", "--format", "%o\\t%k\\t%s\\n")
    assert consumed.stdout_bytes == SEED_OUTPUT

    partition_dir = cli.data_dir / "fruit-prices-0"
    for suffix in (".log", ".index", ".timeindex"):
        assert (partition_dir / f"00000000000000000000{suffix}").is_file()

    dumped = cli.ok("dump-log", str(partition_dir / "00000000000000000000.log"))
    lines = dumped.stdout.splitlines()
    assert lines[0] == f"Dumping {partition_dir / '00000000000000000000.log'}"
    assert lines[1] == "Log starting offset: 0"
    batch_lines = [line for line in lines if line.startswith("baseOffset:")]
    record_lines = [line for line in lines if line.startswith("| offset:")]
    if with_partition:
        assert len(batch_lines) == 1
        assert batch_lines[0].startswith("baseOffset: 0 lastOffset: 3 count: 4 ")
    else:
        assert [line.split()[1] for line in batch_lines] == ["0", "1", "2", "3"]
    assert all("isvalid: true" in line and "compresscodec: none" in line for line in batch_lines)
    assert [line.split(" keySize")[0] for line in record_lines] == [
        f"| offset: {i} CreateTime: {TS}" for i in range(4)
    ]
    assert record_lines[0].endswith("keySize: 5 valueSize: 5 sequence: -1 headerKeys: [] "
                                    "key: grape payload: $2.69")  # fmt: skip
    assert record_lines[2].endswith(
        "keySize: 5 valueSize: -1 sequence: -1 headerKeys: [] key: grape"
    )
    assert record_lines[3].endswith("key: lime payload: $1.59")

    verified = cli.ok("verify")
    assert verified.stdout.startswith("OK: 1 partition(s), 1 segment(s)")


def test_seed_example_through_the_console_script(tmp_path: Path) -> None:
    """The same through real processes: ``python -m compactlog.cli.main`` and stdin bytes."""
    env = {**os.environ, "COMPACTLOG_DATA_DIR": str(tmp_path / "data")}

    def run(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [sys.executable, "-m", "compactlog.cli.main", *args],
            input=stdin, capture_output=True, env=env, timeout=120, check=False,
        )  # fmt: skip

    assert (
        run("topics", "create", "fruit-prices", "--config", "cleanup.policy=compact").returncode
        == 0
    )
    produced = run("produce", "fruit-prices", "-K", "=", "-Z", "null", "-p", "0",
                   stdin=SEED_INPUT.encode())  # fmt: skip
    assert produced.returncode == 0, produced.stderr
    consumed = run("consume", "fruit-prices", "-f", "%o\\t%k\\t%s\\n")
    assert (consumed.returncode, consumed.stdout, consumed.stderr) == (0, SEED_OUTPUT, b"")
    dumped = run("dump-log", str(tmp_path / "data" / "fruit-prices-0" / "00000000000000000000.log"))
    assert dumped.returncode == 0
    assert b"baseOffset: 0 lastOffset: 3 count: 4" in dumped.stdout


def test_console_script_is_installed() -> None:
    script = Path(sys.executable).with_name("compactlog")
    if not script.exists():
        pytest.skip("the compactlog console script is not installed in this environment")
    result = subprocess.run([str(script), "--help"], capture_output=True, timeout=120, check=False)
    assert result.returncode == 0
    assert b"Exit codes:" in result.stdout
