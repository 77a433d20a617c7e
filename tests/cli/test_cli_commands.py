"""Every command: its help, its output, and its errors (one line, a documented exit code)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import DOCUMENTED_EXIT_CODES, Cli, check_one_line_failure
from click.testing import CliRunner

from compactlog.cli import produce as produce_module
from compactlog.cli.main import all_commands, main
from compactlog.storage.store import Store

TS = "1700000000000"
ALL_COMMAND_PATHS = [path for path, _ in all_commands()]


# --------------------------------------------------------------------------------------------
# help and documentation


def test_every_command_is_listed() -> None:
    assert {" ".join(p) for p in ALL_COMMAND_PATHS} == {
        "topics", "topics create", "topics list", "topics describe", "topics delete",
        "configs", "configs describe", "configs alter",
        "produce", "consume", "dump-log", "log-dirs", "verify",
        "clean", "cleaner-status", "explain", "serve",
        "spark", "spark compact", "spark pipeline", "spark report", "spark snapshot",
        "spark workload", "salvage", "quarantine", "quarantine list", "quarantine show",
        "quarantine delete", "groups", "groups list", "groups describe",
        "groups reset-offsets", "groups delete", "delete-records", "roll", "make-test-ca",
    }  # fmt: skip


def test_group_help_documents_every_exit_code() -> None:
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    assert "Exit codes:" in result.stdout and "Example:" in result.stdout
    for code in DOCUMENTED_EXIT_CODES:
        assert f"\n    {code} " in result.stdout, code
    assert "--data-dir" in result.stdout and "COMPACTLOG_DATA_DIR" in result.stdout


@pytest.mark.parametrize("path", ALL_COMMAND_PATHS, ids=" ".join)
def test_every_command_has_help_with_an_example_and_exit_codes(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(main, [*path, "--help"])
    assert result.exit_code == 0, result.stderr
    command = dict(all_commands())[path]
    assert command.help and len(command.help.split()) > 5, path
    assert "Example:" in result.stdout, path
    assert "compactlog " in result.stdout.split("Example:", 1)[1], path
    assert "Exit codes:" in result.stdout, path
    codes = result.stdout.split("Exit codes:", 1)[1]
    assert "0 " in codes
    mentioned = {int(word) for word in codes.replace(",", " ").split() if word.isdigit()}
    assert mentioned <= DOCUMENTED_EXIT_CODES, (path, mentioned)


def test_version() -> None:
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0 and "compactlog" in result.stdout


# --------------------------------------------------------------------------------------------
# usage errors: exit 2, one line


@pytest.mark.parametrize(
    "args",
    [
        ["topics", "create"],
        ["topics", "create", "x", "--partitions", "many"],
        ["no-such-command"],
        ["consume", "t", "--offset", "soon"],
        ["consume", "t", "--format", "%x"],
        ["consume", "t", "--format", "%"],
        ["consume", "t", "--format", "\\x"],
        ["consume", "t", "--partition", "-1"],
        ["produce", "t", "--compression", "brotli"],
        ["produce", "t", "--compression", "gzip"],
        ["produce", "t", "--key-separator", ""],
        ["configs", "alter", "t"],
        ["dump-log"],
        ["dump-log", "/no/such/file.log"],
        ["--data-dir"],
    ],
)
def test_usage_errors_are_one_line_with_exit_2(cli: Cli, args: list[str]) -> None:
    cli.data_dir.mkdir()
    line = check_one_line_failure(cli(*args), [2], " ".join(args))
    assert line.startswith("Error: ")


def test_no_data_dir(cli: Cli) -> None:
    line = check_one_line_failure(cli("topics", "list", data_dir=False), [2])
    assert "--data-dir" in line and "COMPACTLOG_DATA_DIR" in line


def test_missing_data_dir_is_not_created_by_readers(cli: Cli) -> None:
    for args in (["topics", "list"], ["consume", "t"], ["log-dirs"], ["verify"]):
        check_one_line_failure(cli(*args), [2], " ".join(args))
    assert not cli.data_dir.exists()


def test_data_dir_from_the_environment(cli: Cli) -> None:
    result = cli.runner.invoke(
        main, ["topics", "create", "env-topic"], env={"COMPACTLOG_DATA_DIR": str(cli.data_dir)}
    )
    assert result.exit_code == 0
    assert (cli.data_dir / "env-topic-0").is_dir()


# --------------------------------------------------------------------------------------------
# library errors: exit 2 for bad input, 3 for the rest, with the Kafka error name


def test_topic_errors(cli: Cli) -> None:
    cli.ok("topics", "create", "t")
    line = check_one_line_failure(cli("topics", "create", "t"), [3])
    assert line.endswith("(TOPIC_ALREADY_EXISTS)")
    line = check_one_line_failure(cli("topics", "create", "u", "--partitions", "0"), [2])
    assert line.endswith("(INVALID_PARTITIONS)")
    line = check_one_line_failure(cli("topics", "create", "v", "--config", "no.such=1"), [2])
    assert line.endswith("(INVALID_CONFIG)")
    line = check_one_line_failure(cli("topics", "create", "v", "--config", "segment.ms"), [2])
    assert "NAME=VALUE" in line
    line = check_one_line_failure(cli("topics", "create", "v", "--config", "segment.bytes=x"), [2])
    assert line.endswith("(INVALID_CONFIG)")
    for args in (["topics", "describe", "nope"], ["topics", "delete", "nope"],
                 ["consume", "nope"], ["configs", "describe", "nope"]):  # fmt: skip
        line = check_one_line_failure(cli(*args), [3], " ".join(args))
        assert line.endswith("(UNKNOWN_TOPIC_OR_PARTITION)")
    line = check_one_line_failure(cli("consume", "t", "-p", "5"), [3])
    assert line.endswith("(UNKNOWN_TOPIC_OR_PARTITION)")
    assert cli.ok("topics", "list").stdout == "t\n"


def test_verbose_shows_the_traceback(cli: Cli) -> None:
    cli.ok("topics", "create", "t")
    quiet = cli("topics", "create", "t")
    assert "Traceback" not in quiet.stderr
    loud = cli.runner.invoke(main, ["--data-dir", str(cli.data_dir), "--verbose",
                                    "topics", "create", "t"])  # fmt: skip
    assert loud.exit_code == 3
    assert "Traceback" in loud.stderr and "TopicExistsError" in loud.stderr
    assert loud.stderr.rstrip().splitlines()[-1].startswith("Error: ")


def test_an_unexpected_exception_is_an_internal_error(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setattr(Store, "open", broken)
    line = check_one_line_failure(cli("topics", "create", "t"), [4])
    assert line == "Error: internal error: RuntimeError: boom second line (a bug; rerun with " \
        "--verbose for the traceback)"  # fmt: skip
    loud = cli.runner.invoke(main, ["--data-dir", str(cli.data_dir), "--verbose",
                                    "topics", "create", "t"])  # fmt: skip
    assert loud.exit_code == 4 and "Traceback" in loud.stderr


def test_an_os_error_outside_the_library_is_exit_3(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    cli.ok("topics", "create", "t")

    def failing(*args: object, **kwargs: object) -> None:
        raise OSError(5, "Input/output error", "<stdin>")

    monkeypatch.setattr(produce_module, "_input_lines", failing)
    line = check_one_line_failure(cli("produce", "t"), [3])
    assert line == "Error: <stdin>: Input/output error (KAFKA_STORAGE_ERROR)"


def test_a_data_dir_in_use(cli: Cli) -> None:
    """A command that writes needs the lock; the read-only ones work beside the holder."""
    with Store.open(cli.data_dir) as store:
        store.create_topic("orders", 1)
        line = check_one_line_failure(cli("topics", "create", "audit"), [3])
        assert cli.ok("topics", "list").stdout == "orders\n"
    assert "in use" in line and line.endswith("(KAFKA_STORAGE_ERROR)")


# --------------------------------------------------------------------------------------------
# topics and configs


def test_topics_lifecycle(cli: Cli) -> None:
    cli.ok("topics", "create", "orders", "--partitions", "3", "--config", "retention.ms=1000",
           "--config", "segment.bytes=1048576")  # fmt: skip
    cli.ok("topics", "create", "audit")
    assert cli.ok("topics", "list").stdout == "audit\norders\n"
    cli.ok("produce", "orders", "-p", "1", "--timestamp", TS, input="a\nb\n")
    described = cli.ok("topics", "describe", "orders").stdout.splitlines()
    assert described[0].startswith("Topic: orders\tTopicId: ")
    assert described[0].endswith(
        "\tPartitionCount: 3\tConfigs: retention.ms=1000,segment.bytes=1048576"
    )
    assert described[2].startswith(
        "\tTopic: orders\tPartition: 1\tLogStartOffset: 0\tLogEndOffset: 2"
    )
    assert described[2].endswith("\tLogEndOffset: 2")  # segments and sizes: log-dirs
    assert len(cli.ok("topics", "describe").stdout.splitlines()) == 6
    assert cli.ok("topics", "delete", "orders").stdout == "Deleted topic orders.\n"
    assert cli.ok("topics", "list").stdout == "audit\n"
    assert not (cli.data_dir / "orders-0").exists()


def test_a_name_starting_with_a_dash_needs_double_dash(cli: Cli) -> None:
    check_one_line_failure(cli("topics", "create", "-rf"), [2])
    assert not cli.data_dir.exists()
    cli.ok("topics", "create", "--", "-rf")
    assert (cli.data_dir / "-rf-0").is_dir()


def test_configs_describe_and_alter(cli: Cli) -> None:
    cli.ok("topics", "create", "t", "--config", "cleanup.policy=compact")
    lines = cli.ok("configs", "describe", "t").stdout.splitlines()
    assert lines[0] == "All configs for topic t are:"
    by_name = {line.split("=", 1)[0].strip(): line for line in lines[1:]}
    assert by_name["cleanup.policy"].endswith("(override)")
    assert by_name["cleanup.policy"].startswith(
        "  cleanup.policy=compact sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy="
        "compact, DEFAULT_CONFIG:log.cleanup.policy=delete}"
    )
    assert "(override)" not in by_name["segment.bytes"]
    assert sum("(override)" in line for line in lines) == 1

    result = cli.ok("configs", "alter", "t", "--set", "min.cleanable.dirty.ratio=0.1",
                    "--set", "segment.ms=60000", "--delete", "cleanup.policy")  # fmt: skip
    assert result.stdout == "Completed updating config for topic t.\n"
    lines = cli.ok("configs", "describe", "t").stdout.splitlines()
    overrides = sorted(line.split()[0] for line in lines if line.endswith("(override)"))
    assert overrides == ["min.cleanable.dirty.ratio=0.1", "segment.ms=60000"]
    line = check_one_line_failure(cli("configs", "alter", "t", "--set", "segment.ms=-5"), [2])
    assert line.endswith("(INVALID_CONFIG)")
    check_one_line_failure(cli("configs", "alter", "t", "--delete", "bogus.name"), [2])


# --------------------------------------------------------------------------------------------
# produce and consume


def test_produce_keys_tombstones_and_partitioner(cli: Cli) -> None:
    cli.ok("topics", "create", "t", "--partitions", "3")
    lines = "\n".join(f"key{i}:value{i}" for i in range(30)) + "\nno-separator\nk:NULL\n"
    result = cli.ok("produce", "t", "-K", ":", "-Z", "NULL", "-v", "--timestamp", TS, input=lines)
    placed = [tuple(map(int, line.split())) for line in result.stdout.splitlines()]
    assert len(placed) == 32 and {p for p, _ in placed} == {0, 1, 2}
    out = cli.ok("consume", "t", "-f", "%p %o %K %S %k %s %T\\n").stdout.splitlines()
    assert len(out) == 32
    assert [line.split()[0] for line in out] == sorted(line.split()[0] for line in out)
    assert any(line.endswith(" -1 12  no-separator " + TS) for line in out)
    assert any(line.endswith(" 1 -1 k  " + TS) for line in out)
    # The same key always lands in the same partition (Kafka's murmur2 partitioner).
    again = cli.ok("produce", "t", "-K", ":", "-v", input="key7:x\n").stdout.split()[0]
    first = next(line for line in out if " key7 " in line).split()[0]
    assert again == first


def test_produce_to_a_compacted_topic_needs_keys(cli: Cli) -> None:
    cli.ok("topics", "create", "c", "--config", "cleanup.policy=compact")
    line = check_one_line_failure(cli("produce", "c", "-p", "0", input="no key\n"), [3])
    assert line.endswith("(INVALID_RECORD)")
    line = check_one_line_failure(cli("produce", "c", input="no key\n"), [3])
    assert line.endswith("(INVALID_RECORD)")


def test_produce_only_strips_the_trailing_newline(cli: Cli) -> None:
    cli.ok("topics", "create", "t")
    data = b"  spaced  \r\n\ttab\n\nlast-without-newline"
    cli.ok("produce", "t", "-p", "0", input=data)
    out = cli.ok("consume", "t", "-f", "[%s]").stdout_bytes
    assert out == b"[  spaced  \r][\ttab][][last-without-newline]"


def test_produce_binary_bytes_round_trip(cli: Cli) -> None:
    cli.ok("topics", "create", "t")
    payload = bytes(b for b in range(256) if b != 0x0A)
    cli.ok("produce", "t", "-p", "0", "-K", "\\x00", input=b"k\x00" + payload + b"\n")
    assert cli.ok("consume", "t", "-f", "%k|%s").stdout_bytes == b"k|" + payload


def test_produce_headers_batches_and_compression(cli: Cli) -> None:
    cli.ok("topics", "create", "t")
    lines = "".join(f"v{i}\n" for i in range(10))
    options = ["--batch-size", "4", "--compression", "gzip", "-v"]
    headers = ["-H", "app=cli", "-H", "nothing", "-H", "empty="]
    result = cli.ok("produce", "t", "-p", "0", *options, *headers, input=lines)
    assert result.stdout.splitlines() == [f"0 {i}" for i in range(10)]
    out = cli.ok("consume", "t", "-f", "%o %s %h\\n").stdout.splitlines()
    assert out[0] == "0 v0 app=cli,nothing=NULL,empty="
    assert len(out) == 10
    log = cli.data_dir / "t-0" / "00000000000000000000.log"
    dumped = cli.ok("dump-log", "--no-print-data-log", str(log)).stdout
    batches = [line for line in dumped.splitlines() if line.startswith("baseOffset")]
    assert [line.split()[1:4:2] for line in batches] == [["0", "3"], ["4", "7"], ["8", "9"]]
    assert all("compresscodec: gzip" in line for line in batches)
    assert "| offset" not in dumped
    records = cli.ok("dump-log", str(log)).stdout
    assert "headerKeys: [app,nothing,empty] payload: v0" in records


def test_produce_empty_input_appends_nothing(cli: Cli) -> None:
    cli.ok("topics", "create", "t")
    assert cli.ok("produce", "t", "-p", "0", input="").stdout == ""
    assert cli.ok("consume", "t").stdout == ""


@pytest.mark.parametrize(
    ("offset", "expected"),
    [
        ("earliest", "0 1 2 3 4"),
        ("beginning", "0 1 2 3 4"),
        ("latest", ""),
        ("end", ""),
        ("2", "2 3 4"),
        ("5", ""),
        ("-2", "3 4"),
        ("-99", "0 1 2 3 4"),
        ("s@1700000000003", "3 4"),
        ("s@1800000000000", ""),
    ],
)
def test_consume_offsets(cli: Cli, offset: str, expected: str) -> None:
    cli.ok("topics", "create", "t")
    for i in range(5):
        cli.ok("produce", "t", "-p", "0", "--timestamp", str(1700000000000 + i), input=f"v{i}\n")
    out = cli.ok("consume", "t", "--offset", offset, "-f", "%o ").stdout
    assert out.strip() == expected


def test_consume_out_of_range(cli: Cli) -> None:
    cli.ok("topics", "create", "t")
    cli.ok("produce", "t", "-p", "0", input="a\n")
    line = check_one_line_failure(cli("consume", "t", "-o", "7"), [3])
    assert line.endswith("(OFFSET_OUT_OF_RANGE)")


def test_consume_partitions_max_messages_and_null_string(cli: Cli) -> None:
    cli.ok("topics", "create", "t", "--partitions", "2")
    cli.ok("produce", "t", "-p", "0", input="a\nb\n")
    cli.ok("produce", "t", "-p", "1", "-Z", "x", input="x\nc\n")
    assert cli.ok("consume", "t", "-f", "%p%s ").stdout == "0a 0b 1 1c "
    assert cli.ok("consume", "t", "-f", "%p%s ", "-Z", "NULL").stdout == "0a 0b 1NULL 1c "
    assert cli.ok("consume", "t", "-p", "1", "-p", "0", "-f", "%p%s ").stdout == "1 1c 0a 0b "
    assert cli.ok("consume", "t", "-c", "3", "-f", "%p%s ").stdout == "0a 0b 1 "
    assert cli.ok("consume", "t", "-c", "0").stdout == ""
    assert cli.ok("consume", "t").stdout == "a\nb\n\nc\n"  # kcat's default: '%s\n'


def test_consume_to_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    env = {**os.environ, "COMPACTLOG_DATA_DIR": str(tmp_path / "data")}
    command = [sys.executable, "-m", "compactlog.cli.main"]
    subprocess.run([*command, "topics", "create", "t"], env=env, check=True, capture_output=True)
    lines = b"".join(b"line %d %s\n" % (i, b"x" * 200) for i in range(20000))
    subprocess.run([*command, "produce", "t", "-p", "0"], input=lines, env=env, check=True)
    process = subprocess.Popen([*command, "consume", "t"], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)  # fmt: skip
    assert process.stdout is not None and process.stderr is not None
    assert process.stdout.readline() == b"line 0 " + b"x" * 200 + b"\n"
    process.stdout.close()
    stderr = process.stderr.read()
    process.stderr.close()
    assert process.wait(timeout=120) == 0
    assert stderr == b""


# --------------------------------------------------------------------------------------------
# log-dirs, dump-log, verify


def test_log_dirs(cli: Cli) -> None:
    cli.ok("topics", "create", "a", "--partitions", "2")
    cli.ok("topics", "create", "b")
    cli.ok("produce", "a", "-p", "1", input="hello\n")
    doc = json.loads(cli.ok("log-dirs", "--json").stdout)
    log_dir = doc["brokers"][0]["logDirs"][0]
    assert log_dir["logDir"] == str(cli.data_dir.resolve()) and log_dir["error"] is None
    sizes = {p["partition"]: p["size"] for p in log_dir["partitions"]}
    assert sizes == {"a-0": 0, "a-1": 73, "b-0": 0}
    table = cli.ok("log-dirs").stdout
    for name in ("a-0", "a-1", "b-0", "Total"):
        assert name in table
    assert " 73 " in table


def test_dump_log_indexes_and_checkpoints(cli: Cli) -> None:
    now = [1700000000000]
    with Store.open(cli.data_dir, clock=lambda: now[0]) as store:
        store.create_topic("t", 1, {"index.interval.bytes": "100"})
        for i in range(6):
            now[0] += 1
            store.append("t", 0, [(None, f"value number {i}".encode())])
    segment = cli.data_dir / "t-0" / "00000000000000000000"
    index = cli.ok("dump-log", f"{segment}.index").stdout.splitlines()
    assert index[0] == f"Dumping {segment}.index"
    # 82-byte batches; an entry once more than 100 bytes were appended since the last one.
    assert index[1:] == ["offset: 2 position: 164", "offset: 4 position: 328"]
    time_index = cli.ok("dump-log", f"{segment}.timeindex").stdout.splitlines()
    assert time_index[1:] == [
        "timestamp: 1700000000003 offset: 2",
        "timestamp: 1700000000005 offset: 4",
        "timestamp: 1700000000006 offset: 5",
    ]
    checkpoint = cli.ok("dump-log", str(cli.data_dir / "recovery-point-offset-checkpoint")).stdout
    assert checkpoint.splitlines()[1] == "topic: t partition: 0 offset: 6"
    cli.ok("topics", "create", "u")
    empty = cli.ok("dump-log", str(cli.data_dir / "u-0" / "00000000000000000000.index")).stdout
    assert empty.splitlines()[1].endswith("00000000000000000000.index is empty.")


def test_dump_log_of_another_kind_of_file(cli: Cli) -> None:
    cli.ok("topics", "create", "t")
    line = check_one_line_failure(
        cli("dump-log", str(cli.data_dir / "t-0" / "partition.metadata")), [2]
    )
    assert "not a file dump-log reads" in line


def test_dump_log_of_a_damaged_file_prints_what_it_can(cli: Cli) -> None:
    cli.ok("topics", "create", "t")
    for i in range(3):
        cli.ok("produce", "t", "-p", "0", input=f"v{i}\n")
    log = cli.data_dir / "t-0" / "00000000000000000000.log"
    data = bytearray(log.read_bytes())
    data[70 + 30] ^= 0x01  # a record byte of the second batch (batches are 70 bytes)
    log.write_bytes(bytes(data) + b"\x00\x01\x02")
    result = cli("dump-log", str(log), str(cli.data_dir / "t-0" / "00000000000000000000.index"))
    line = check_one_line_failure(result, [3])
    assert line.startswith(f"Error: {log}: position 70: CRC mismatch")
    assert "(and 1 more problem(s))" in line and line.endswith("(CORRUPT_MESSAGE)")
    out = result.stdout.splitlines()
    assert sum("isvalid: false" in line for line in out) == 1
    assert sum("isvalid: true" in line for line in out) == 2
    assert "Found 3 invalid bytes at the end of 00000000000000000000.log" in out
    assert out[-2].startswith("Dumping") and out[-2].endswith(".index")  # the next file still runs


def test_verify_reports_problems_with_exit_1(cli: Cli) -> None:
    cli.ok("topics", "create", "t")
    cli.ok("produce", "t", "-p", "0", input="a\nb\n")
    assert cli.ok("verify").stdout.startswith("OK: ")
    (cli.data_dir / "stray.txt").write_text("not ours")
    clean = cli.ok("verify").stdout.splitlines()
    assert clean[0] == f"note: {cli.data_dir.resolve() / 'stray.txt'}: foreign file, ignored"
    assert cli.ok("verify", "--no-notes").stdout.startswith("OK: ")
    log = cli.data_dir / "t-0" / "00000000000000000000.log"
    log.write_bytes(log.read_bytes()[:-5])
    result = cli("verify")
    assert result.exit_code == 1 and result.stderr == ""
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"{log.resolve()}: position 0: torn tail")
    assert lines[-1].startswith("3 problem(s): 1 partition(s)")
    # The recovery point and the time index both name offsets the log no longer has.
    assert any("recovery point 2 but the log ends at 0" in line for line in lines)
    assert any("timeindex: position 0: entry 0: offset 1 is outside" in line for line in lines)


def test_verify_of_a_file_is_a_usage_error(cli: Cli, tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_text("x")
    result = cli.runner.invoke(main, ["--data-dir", str(target), "verify"])
    check_one_line_failure(result, [2])
