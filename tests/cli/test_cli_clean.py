"""``clean``, ``cleaner-status`` and ``explain`` through the CLI (CliRunner)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from cli_helpers import Cli, check_one_line_failure
from click.testing import CliRunner

from compactlog.cleaner import cleaner as cleaner_module
from compactlog.cleaner.explain import format_ms, keys_per_pass
from compactlog.cli import common
from compactlog.cli.main import main
from compactlog.log_manager import LogManager
from compactlog.storage.config import BrokerConfig
from compactlog.storage.readonly import ReadOnlyDataDir
from compactlog.storage.store import Store

TS = 1_700_000_000_000
DAY = 86_400_000  # the default delete.retention.ms
SEED_INPUT = "grape=$2.69\nlime=$0.49\ngrape=null\nlime=$1.59\n"
SUMMARY = "Log cleaner thread 0 cleaned log fruit-prices-0 (dirty section = [0, 4])"


def roll(cli: Cli, topic: str, partition: int = 0) -> None:
    with Store.open(cli.data_dir) as store:
        store.roll(topic, partition)


def seed(cli: Cli, topic: str = "fruit-prices", *, rolled: bool = True) -> None:
    cli.ok("topics", "create", topic, "--config", "cleanup.policy=compact")
    cli.ok("produce", topic, "-K", "=", "-Z", "null", "--timestamp", str(TS), "-p", "0",
           input=SEED_INPUT)  # fmt: skip
    if rolled:
        roll(cli, topic)


def status_json(cli: Cli, *args: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(cli.ok("cleaner-status", *args, "--json").stdout)
    return doc


# --------------------------------------------------------------------------------------------
# help


@pytest.mark.parametrize("command", ["clean", "cleaner-status", "explain"])
def test_help_has_an_example_and_exit_codes(command: str) -> None:
    result = CliRunner().invoke(main, [command, "--help"])
    assert result.exit_code == 0
    assert "Example:" in result.stdout and f"compactlog {command}" in result.stdout
    assert "Exit codes: 0 success" in result.stdout
    assert "--now MS" in result.stdout


# --------------------------------------------------------------------------------------------
# clean


def test_clean_the_seed_example(cli: Cli) -> None:
    seed(cli)
    result = cli.ok("clean", "--now", str(TS))
    lines = result.stdout.splitlines()
    assert lines[0] == "\t" + SUMMARY
    assert "\tStart size: 0.0 MB (4 messages)" in lines
    assert "\tEnd size: 0.0 MB (2 messages)" in lines
    consumed = cli.ok("consume", "fruit-prices", "--format", "%o\\t%k\\t%s\\n")
    assert consumed.stdout == "2\tgrape\t\n3\tlime\t$1.59\n"
    # Nothing is eligible any more.
    again = cli.ok("clean", "--now", str(TS + 1))
    assert again.stdout.startswith("No log to clean")


def test_clean_reports_retention(cli: Cli) -> None:
    cli.ok("topics", "create", "t", "--config", "cleanup.policy=compact,delete",
           "--config", "retention.ms=1000")  # fmt: skip
    cli.ok("produce", "t", "-K", "=", "--timestamp", str(TS), "-p", "0", input="a=1\n")
    roll(cli, "t")
    result = cli.ok("clean", "--now", str(TS + 5000))
    assert "Deleted 1 segment(s) of t-0 by retention." in result.stdout.splitlines()


def test_clean_topic_ignores_the_ratio(cli: Cli) -> None:
    seed(cli)
    cli.ok("configs", "alter", "fruit-prices", "--set", "min.cleanable.dirty.ratio=0.99")
    assert cli.ok("clean", "--now", str(TS)).stdout.startswith("\t" + SUMMARY)  # 1.0 > 0.99
    cli.ok("produce", "fruit-prices", "-K", "=", "-p", "0", input="kiwi=$0.30\n")
    roll(cli, "fruit-prices")
    assert cli.ok("clean", "--now", str(TS)).stdout.startswith("No log to clean")
    result = cli.ok("clean", "fruit-prices", "--partition", "0", "--now", str(TS))
    assert "cleaned log fruit-prices-0 (dirty section = [4, 5])" in result.stdout


def test_clean_topic_until_clean_one_round_then_already_clean(cli: Cli) -> None:
    seed(cli)
    result = cli.ok("clean", "fruit-prices", "--until-clean", "--now", str(TS))
    lines = result.stdout.splitlines()
    assert lines[0] == "fruit-prices-0: round 1: cleaning [0, 4)"
    assert lines[1] == "\t" + SUMMARY
    assert lines[-1] == ("fruit-prices-0: clean: first dirty offset 4, first uncleanable offset 4")
    again = cli.ok("clean", "fruit-prices", "--until-clean", "--now", str(TS))
    assert again.stdout == (
        "fruit-prices-0: nothing to clean: first dirty offset 4, first uncleanable offset 4\n"
    )
    unrolled = cli.ok("clean", "fruit-prices", "--now", str(TS))
    assert "nothing to clean" in unrolled.stdout


def test_clean_says_how_to_make_the_active_segment_cleanable(cli: Cli) -> None:
    seed(cli, rolled=False)
    result = cli.ok("clean", "fruit-prices", "-p", "0", "--now", str(TS))
    assert result.stdout.splitlines() == [
        "fruit-prices-0: nothing to clean: first dirty offset 0, first uncleanable offset 0 "
        "(active segment)",
        "fruit-prices-0: offsets 0 to 3 are in the active segment, which is never cleaned; to "
        "make them cleanable, roll it ('compactlog roll fruit-prices -p 0'; add --admin-url "
        "while a broker runs) or let the log roll by itself: by time (segment.ms, now "
        "604800000) or by size (segment.bytes, now 1073741824)",
    ]
    roll(cli, "fruit-prices")
    assert "offsets 0 to 3" not in cli.ok("clean", "fruit-prices", "-p", "0").stdout


def test_clean_until_clean_over_every_log(cli: Cli) -> None:
    seed(cli, "a")
    seed(cli, "b")
    result = cli.ok("clean", "--until-clean", "--now", str(TS))
    lines = result.stdout.splitlines()
    assert [line for line in lines if line.startswith("Round")] == [
        "Round 1:", "Round 2:", "Round 3:",
    ]  # fmt: skip
    cleaned = sorted(line.split("cleaned log ")[1].split(" ")[0] for line in lines
                     if "cleaned log" in line)  # fmt: skip
    assert cleaned == ["a-0", "b-0"]
    assert lines[-1] == "Nothing left to clean after 2 round(s)."


SMALL_BUFFER = 1_100_000  # just above the 1 MiB minimum: about 41,000 keys per pass


class SmallMapLogs(LogManager):
    """The store and its cleaner as the CLI opens them, with a small dedupe buffer."""

    @classmethod
    def open(cls, path: Any, clock: Any = None, config: Any = None, **kwargs: Any) -> LogManager:
        small = {**(config or {}), "log.cleaner.dedupe.buffer.size": SMALL_BUFFER}
        return LogManager.open(path, clock, small, **kwargs)


class SmallMapFiles(ReadOnlyDataDir):
    """The data directory as cleaner-status and explain read it, with a small dedupe buffer."""

    def __init__(self, path: Any, config: Any = None, now: Any = None) -> None:
        small = {**(config or {}), "log.cleaner.dedupe.buffer.size": SMALL_BUFFER}
        super().__init__(path, small, now)


def test_clean_topic_until_clean_takes_several_rounds(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    per_pass = keys_per_pass(BrokerConfig.from_dict({"log.cleaner.dedupe.buffer.size":
                                                     SMALL_BUFFER}))  # fmt: skip
    total = per_pass + 1000
    cli.ok("topics", "create", "big", "--config", "cleanup.policy=compact")
    with Store.open(cli.data_dir) as store:
        for start in range(0, total, 5000):
            keys = range(start, min(start + 5000, total))
            store.append("big", 0, [(b"k%d" % i, b"v") for i in keys], timestamp=TS)
        store.roll("big", 0)
    monkeypatch.setattr(common, "LogManager", SmallMapLogs)
    monkeypatch.setattr(common, "ReadOnlyDataDir", SmallMapFiles)

    status = status_json(cli, "big", "--now", str(TS))["partitions"][0]
    assert status["passes_needed"] == 2 and status["next_map_end_offset"] == per_pass

    stopped = cli("clean", "big", "--until-clean", "--max-rounds", "1", "--now", str(TS))
    assert stopped.exit_code == 1
    assert stopped.stdout.splitlines()[0] == f"big-0: round 1: cleaning [0, {total})"
    assert f"(dirty section = [0, {per_pass}])" in stopped.stdout
    assert stopped.stderr == "warning: stopped after 1 round(s) with dirty data left\n"

    result = cli.ok("clean", "big", "--until-clean", "--now", str(TS))
    lines = result.stdout.splitlines()
    assert lines[0] == f"big-0: round 1: cleaning [{per_pass}, {total})"
    assert f"(dirty section = [{per_pass}, {total}])" in result.stdout
    assert (
        lines[-1] == f"big-0: clean: first dirty offset {total}, first uncleanable offset {total}"
    )


def test_a_failed_cleaning_is_one_error_line(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    seed(cli)

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(cleaner_module.Cleaner, "clean", broken)
    for args in (["clean"], ["clean", "fruit-prices"]):
        result = cli(*args, "--now", str(TS))
        line = check_one_line_failure(result, [3], " ".join(args))
        assert line == (
            "Error: cleaning fruit-prices-0 failed: RuntimeError: boom (marked uncleanable)"
        )
        assert "Uncleanable partition fruit-prices-0: RuntimeError: boom" in result.stdout


@pytest.mark.parametrize(
    ("args", "code", "ending"),
    [
        (["clean", "nope"], 3, "(UNKNOWN_TOPIC_OR_PARTITION)"),
        (["clean", "fruit-prices", "-p", "7"], 3, "(UNKNOWN_TOPIC_OR_PARTITION)"),
        (["cleaner-status", "nope"], 3, "(UNKNOWN_TOPIC_OR_PARTITION)"),
        (["explain", "nope", "k"], 3, "(UNKNOWN_TOPIC_OR_PARTITION)"),
        (["explain", "fruit-prices", "k", "-p", "7"], 3, "(UNKNOWN_TOPIC_OR_PARTITION)"),
        (["clean", "--now", "soon"], 2, None),
        (["clean", "--now", "-1"], 2, None),
        (["cleaner-status", "--now", "1.5"], 2, None),
        (["explain", "fruit-prices", "k", "--now", "x"], 2, None),
        (["clean", "--partition", "0"], 2, "clean --help')"),
        (["clean", "plain"], 2, "the cleaner only cleans compacted topics"),
        (["clean", "bad/name"], 2, "(INVALID_TOPIC_EXCEPTION)"),
        (["explain", "fruit-prices", "zz", "--key-hex"], 2, None),
        (["clean", "--max-rounds", "0"], 2, None),
    ],
)  # fmt: skip
def test_errors_are_one_line(cli: Cli, args: list[str], code: int, ending: str | None) -> None:
    seed(cli, rolled=False)
    cli.ok("topics", "create", "plain")
    line = check_one_line_failure(cli(*args), [code], " ".join(args))
    if ending is not None:
        assert line.endswith(ending), line


# --------------------------------------------------------------------------------------------
# cleaner-status


def test_cleaner_status_json(cli: Cli) -> None:
    seed(cli)
    cli.ok("topics", "create", "plain")
    doc = status_json(cli, "--now", str(TS))
    assert doc["now"] == TS
    by_name = {(p["topic"], p["partition"]): p for p in doc["partitions"]}
    assert set(by_name) == {("fruit-prices", 0), ("plain", 0)}
    fruit = by_name[("fruit-prices", 0)]
    assert fruit["first_dirty_offset"] == 0 and fruit["first_uncleanable_offset"] == 4
    assert fruit["bounded_by"] == "active segment" and fruit["checkpoint"] is None
    assert fruit["dirty_ratio"] == 1.0 and fruit["eligible"] and fruit["why_not"] == []
    assert fruit["clean_bytes"] == 0 and fruit["cleanable_bytes"] == fruit["total_bytes"] > 0
    assert fruit["dirty_keys"] == 2 and fruit["passes_needed"] == 1
    assert fruit["tombstones"] == [{
        "offset": 2, "key": {"text": "grape", "hex": "6772617065"}, "timestamp": TS,
        "segment_base_offset": 0, "delete_horizon_ms": None, "horizon_passed": False,
        "superseded_by": None,
    }]  # fmt: skip
    assert not by_name[("plain", 0)]["eligible"]

    cli.ok("clean", "--now", str(TS))
    after = status_json(cli, "fruit-prices", "--now", str(TS + 1))["partitions"][0]
    assert after["checkpoint"] == 4 and after["first_dirty_offset"] == 4
    assert after["tombstones"][0]["delete_horizon_ms"] == TS + DAY
    assert "nothing is dirty" in after["why_not"][0]


def test_cleaner_status_why_not(cli: Cli) -> None:
    seed(cli, rolled=False)
    doc = status_json(cli, "fruit-prices", "--now", str(TS))["partitions"][0]
    assert not doc["eligible"] and "all in the active segment" in doc["why_not"][0]

    roll(cli, "fruit-prices")
    cli.ok("configs", "alter", "fruit-prices", "--set", "min.compaction.lag.ms=60000")
    doc = status_json(cli, "fruit-prices", "--now", str(TS + 1000))["partitions"][0]
    assert doc["bounded_by"] == "min.compaction.lag.ms"
    assert doc["min_lag_until_ms"] == TS + 60_000
    assert "inside min.compaction.lag.ms" in doc["why_not"][0]

    cli.ok("configs", "alter", "fruit-prices", "--delete", "min.compaction.lag.ms")
    cli.ok("clean", "--now", str(TS))
    cli.ok("produce", "fruit-prices", "-K", "=", "-p", "0", input="kiwi=$0.30\n")
    roll(cli, "fruit-prices")
    doc = status_json(cli, "fruit-prices", "--now", str(TS))["partitions"][0]
    assert doc["dirty_ratio"] < 0.5
    assert doc["why_not"] == [
        f"dirty ratio {doc['dirty_ratio']:.3f} <= min.cleanable.dirty.ratio 0.5"
    ]


def test_cleaner_status_table(cli: Cli) -> None:
    seed(cli)
    cli.ok("clean", "--now", str(TS))
    out = cli.ok("cleaner-status", "--now", str(TS + 1000)).stdout
    assert out.startswith(f"Cleaner status at {format_ms(TS + 1000)} ({TS + 1000})\n")
    assert "fruit-prices-0" in out
    for text in ("first dirty offset", "first uncleanable offset", "dirty ratio", "eligible",
                 "compaction delay", "dirty keys", "tombstones", "offset 2 key grape"):  # fmt: skip
        assert text in out, text
    assert "passes in 23h 59m 59s" in out


# --------------------------------------------------------------------------------------------
# explain


def test_explain_before_and_after_cleaning(cli: Cli) -> None:
    seed(cli)
    out = cli.ok("explain", "fruit-prices", "grape", "--now", str(TS)).stdout.splitlines()
    assert out[0] == (
        "Key grape of fruit-prices: partition 0 (Kafka's default partitioner: murmur2(key) % 1 "
        "partitions)"
    )
    assert out[1] == (
        f"fruit-prices-0 at {format_ms(TS)}: first dirty offset 0, first uncleanable offset 4 "
        "(active segment)"
    )
    assert out[2] == (f"offset 0  {format_ms(TS)}  value $2.69  segment 00000000000000000000.log")
    assert out[3].startswith("    removable now: superseded by offset 2; the next cleaning drops")
    assert out[4].startswith("offset 2  ") and "value null (tombstone)" in out[4]
    assert out[5].startswith(
        "    tombstone not yet stamped: the next cleaning stamps its delete horizon now + "
        f"delete.retention.ms = {format_ms(TS + DAY)}"
    )

    cli.ok("clean", "--now", str(TS))
    doc = json.loads(cli.ok("explain", "fruit-prices", "grape", "--json", "--now",
                            str(TS + 5)).stdout)  # fmt: skip
    assert doc["partition"] == 0 and doc["partition_source"] == "partitioner"
    assert doc["key"] == {"text": "grape", "hex": "6772617065"}
    (tombstone,) = doc["records"]
    assert tombstone["offset"] == 2 and tombstone["tombstone"] and tombstone["value"] is None
    assert tombstone["delete_horizon_ms"] == TS + DAY and tombstone["verdict"] == "waiting"
    assert tombstone["reason"].startswith(
        f"tombstone: kept until its delete horizon {format_ms(TS + DAY)} (set by the cleaning at "
        f"{format_ms(TS)}"
    )
    lime = json.loads(cli.ok("explain", "fruit-prices", "lime", "--json").stdout)["records"]
    assert [(r["offset"], r["verdict"]) for r in lime] == [(3, "latest")]


def test_explain_binary_key_and_partition_option(cli: Cli) -> None:
    cli.ok("topics", "create", "t", "--partitions", "3", "--config", "cleanup.policy=compact")
    with Store.open(cli.data_dir) as store:
        where, _ = store.produce("t", b"\x00\xff", b"v", timestamp=TS)
    found = cli.ok("explain", "t", "00ff", "--key-hex", "--now", str(TS)).stdout
    assert found.startswith(f"Key \\x00\\xff of t: partition {where} (Kafka's default")
    assert "value v  segment 00000000000000000000.log (active)" in found
    assert "latest value" in found
    other = (where + 1) % 3
    missing = cli.ok("explain", "t", "00ff", "--key-hex", "-p", str(other)).stdout
    assert f"partition {other} (--partition)" in missing
    assert missing.splitlines()[-1] == f"No record of key \\x00\\xff in t-{other}."


def _tree(path: Any) -> dict[str, tuple[int, int, bytes]]:
    """Every file under ``path`` with its size, mtime and bytes."""
    import os

    found = {}
    for root, _, names in os.walk(path):
        for name in names:
            full = os.path.join(root, name)
            stat = os.stat(full)
            with open(full, "rb") as f:
                found[os.path.relpath(full, path)] = (stat.st_size, stat.st_mtime_ns, f.read())
    return found


def test_cleaner_status_and_explain_read_a_directory_a_broker_holds_and_change_nothing(
    cli: Cli,
) -> None:
    seed(cli)
    before = _tree(cli.data_dir)
    with LogManager.open(cli.data_dir) as logs:  # holds the directory's lock, as a broker does
        logs.store.log("fruit-prices", 0)
        held = _tree(cli.data_dir)
        status = status_json(cli, "fruit-prices", "--now", str(TS))["partitions"][0]
        assert status["first_dirty_offset"] == 0 and status["dirty_ratio"] > 0
        explained = json.loads(cli.ok("explain", "fruit-prices", "grape", "--json").stdout)
        assert explained["records"], explained
        assert _tree(cli.data_dir) == held  # nothing written while the broker holds it
    with Store.open(cli.data_dir):
        pass
    after_close = _tree(cli.data_dir)
    status_json(cli, "fruit-prices")
    cli.ok("explain", "fruit-prices", "grape")
    assert _tree(cli.data_dir) == after_close
    assert set(after_close) == set(before)
