"""Reading a data directory from s3:// (a real S3 server: s3proxy, in its own JVM on 127.0.0.1),
file:// and, as far as it goes without a namenode, hdfs://, through the same filesystem seam.

A directory written by compactlog (compacted and cleaned: offsets with gaps, a log start moved
by DeleteRecords, headers, tombstones, several segments) is uploaded as a backup would be, a
plain copy of the tree, and read through the source and the report: the same rows and the same
figures as from the local directory. Damage in an object is reported with the object and the
byte range, as for a local file. Writing, compacting and serving a URI are refused (the
streaming read of a URI: tests/spark/test_remote_stream.py).

Spark work: about six small jobs on the session's local[2]; s3proxy takes ~3 s to start.
"""

from __future__ import annotations

import itertools
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from pyarrow import fs as pafs

from compactlog.errors import ConfigError, StorageError
from compactlog.spark.compact import compact
from compactlog.spark.datasource import register
from compactlog.spark.remote_fs import ArrowReadOnlyFileSystem, filesystem
from compactlog.spark.report import partition_report
from compactlog.spark.snapshot import read_snapshot, snapshot
from compactlog.storage.store import Store
from tests.conftest import ManualClock
from tests.managed import manager_of, open_managed

NOW = 1_700_000_000_000
ROOT = Path(__file__).resolve().parents[2]
JARS = ROOT / ".jars" / "s3proxy"
BUCKET = "backups"
KEY, SECRET = "compactlog-test", "compactlog-test-secret"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """An s3proxy server (transient in-memory blobstore) with an empty bucket; yields the
    storage options that reach it."""
    if not JARS.is_dir() or not any(JARS.glob("s3proxy-*.jar")):
        pytest.skip(f"no s3proxy jars in {JARS} (run scripts/setup-env.sh)")
    if shutil.which("java") is None:
        pytest.skip("no java on PATH: s3proxy needs Java")
    work = tmp_path_factory.mktemp("s3proxy")
    port = _free_port()
    endpoint = f"http://127.0.0.1:{port}"
    (work / "s3proxy.properties").write_text(
        f"s3proxy.endpoint={endpoint}\n"
        "s3proxy.authorization=aws-v2-or-v4\n"
        f"s3proxy.identity={KEY}\ns3proxy.credential={SECRET}\n"
        "jclouds.provider=transient\njclouds.identity=unused\njclouds.credential=unused\n"
    )
    with open(work / "s3proxy.out", "wb") as out:
        proc = subprocess.Popen(
            [
                "java",
                "-cp",
                f"{JARS}/*",
                "org.gaul.s3proxy.Main",
                "--properties",
                str(work / "s3proxy.properties"),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    tail = (work / "s3proxy.out").read_text(errors="replace")[-2000:]
                    pytest.fail(f"s3proxy did not start: {tail}")
                time.sleep(0.2)
        options = {
            "fs.s3.endpoint": endpoint,
            "fs.s3.region": "us-east-1",
            "fs.s3.accessKey": KEY,
            "fs.s3.secretKey": SECRET,
            # s3proxy does not implement the checksums the AWS SDK asks for by default.
            "fs.s3.checksums": "when_required",
        }
        yield options
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _client(options: dict[str, str]) -> Any:
    os.environ["AWS_REQUEST_CHECKSUM_CALCULATION"] = "when_required"
    os.environ["AWS_RESPONSE_CHECKSUM_VALIDATION"] = "when_required"
    return pafs.S3FileSystem(
        access_key=KEY,
        secret_key=SECRET,
        endpoint_override=options["fs.s3.endpoint"],
        scheme="http",
        region="us-east-1",
        allow_bucket_creation=True,
    )


def _upload(options: dict[str, str], local: Path, prefix: str) -> str:
    """A plain copy of the tree under ``s3://BUCKET/prefix`` (as a backup job copies it)."""
    client = _client(options)
    client.create_dir(BUCKET)
    # One object per file and no directory markers, as `aws s3 sync` leaves it: directories
    # exist only as key prefixes.
    for file in sorted(p for p in local.rglob("*") if p.is_file()):
        key = f"{BUCKET}/{prefix}/{file.relative_to(local).as_posix()}"
        with client.open_output_stream(key) as out:
            out.write(file.read_bytes())
    return f"s3://{BUCKET}/{prefix}"


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``t``: compacted, 2 partitions of small segments, cleaned (gaps), headers, tombstones,
    partition 1's log start moved by DeleteRecords; ``events``: delete policy, keyless."""
    path = tmp_path_factory.mktemp("remote-data")
    with open_managed(path, ManualClock(NOW)) as store:
        store.create_topic("t", 2, {"cleanup.policy": "compact,delete", "segment.bytes": 1024})
        for p in range(2):
            for i in range(120):
                key = b"k%d" % (i % 17) if i % 3 else b"u%d" % i  # u...: survive, gaps
                value = None if i % 23 == 0 else b"v%d-%d" % (p, i)
                store.append("t", p, [(key, value, [("h", b"%d" % i)])], timestamp=NOW + 1000 * i)
            store.roll("t", p)
            store.append("t", p, [(b"last", b"x")], timestamp=NOW + 500_000)
            manager_of(store).clean_log("t", p)
        store.delete_records("t", 1, 40)
        store.create_topic("events", 1)
        for i in range(30):
            store.append("events", 0, [(None, b"e%d" % i), (b"k", None)], timestamp=NOW + i)
    return path


@pytest.fixture(scope="module")
def remote(s3: dict[str, str], data: Path) -> str:
    return _upload(s3, data, "broker-1/data")


def _rows(df: Any) -> list[tuple[Any, ...]]:
    return [
        tuple(r)
        for r in df.orderBy("topic", "partition", "offset").collect()  # headers included
    ]


def _read(spark: Any, path: str, **options: str) -> list[tuple[Any, ...]]:
    register(spark)
    reader = spark.read.format("compactlog").option("includeHeaders", "true")
    return _rows(reader.options(**options).load(path))


@pytest.fixture(scope="module")
def local(spark: Any, data: Path) -> list[tuple[Any, ...]]:
    """Every record of the local directory, through the source."""
    return _read(spark, str(data))


def test_the_source_reads_the_same_rows_from_s3(
    spark: Any, local: list[tuple[Any, ...]], remote: str, s3: dict[str, str]
) -> None:
    assert _read(spark, remote, **s3) == local
    offsets = [r[4] for r in local if r[2] == "t" and r[3] == 0]
    assert any(b - a > 1 for a, b in itertools.pairwise(offsets))  # cleaned: gaps
    assert min(r[4] for r in local if r[2] == "t" and r[3] == 1) >= 40  # the moved log start
    # Small splits of one partition from offset 50: several tasks per object, each reading
    # its own byte range of it.
    one = {"assign": '{"t": [0]}', "startingOffsets": '{"t": {"0": 50}}'}
    split = _read(spark, remote, **s3, **one, maxBytesPerSplit="400")
    assert split == [r for r in local if r[2] == "t" and r[3] == 0 and r[4] >= 50]


@pytest.fixture(scope="module")
def local_report(spark: Any, data: Path) -> list[Any]:
    return partition_report(spark, data, now=NOW)


def test_the_report_from_s3_equals_the_local_one(
    spark: Any, local_report: list[Any], remote: str, s3: dict[str, str]
) -> None:
    local = local_report
    from_s3 = partition_report(spark, remote, now=NOW, storage_options=s3)
    assert from_s3 == local
    assert [r.name for r in local] == ["events-0", "t-0", "t-1"]
    assert local[1].last_gap is not None and local[2].log_start_offset == 40


def test_file_uri_reads_through_pyarrow_like_the_local_path(
    spark: Any, data: Path, local: list[tuple[Any, ...]]
) -> None:
    uri = f"file://{data}"
    assert isinstance(filesystem(uri), ArrowReadOnlyFileSystem)
    assert _read(spark, uri) == local


def test_the_snapshot_job_reads_s3_into_a_local_table(
    spark: Any, data: Path, remote: str, s3: dict[str, str], tmp_path: Path
) -> None:
    """The job reads the log from s3:// and writes its table locally: the same rows as the
    table built from the local directory; a second run finds nothing new."""
    local = snapshot(spark, data, "t", tmp_path / "local")
    from_s3 = snapshot(spark, remote, "t", tmp_path / "s3", storage_options=s3)
    assert (from_s3.records_read, from_s3.rows) == (local.records_read, local.rows)

    def rows(out: Path) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in read_snapshot(spark, out).orderBy("partition", "key").collect()]

    assert rows(tmp_path / "s3") == rows(tmp_path / "local")
    again = snapshot(spark, remote, "t", tmp_path / "s3", storage_options=s3)
    assert again.unchanged


def _damaged_copy(data: Path, tmp: Path) -> tuple[Path, str]:
    """A copy of ``data`` with one byte of a record inside t-0's first segment flipped (its
    batch's CRC no longer matches); returns the copy and the segment's relative name."""
    copy = tmp / "damaged"
    shutil.copytree(data, copy)
    segment = sorted((copy / "t-0").glob("*.log"))[0]
    raw = bytearray(segment.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    segment.write_bytes(bytes(raw))
    return copy, f"t-0/{segment.name}"


def test_damage_in_an_object_names_the_object_and_the_bytes(
    spark: Any, data: Path, s3: dict[str, str], tmp_path: Path
) -> None:
    register(spark)
    copy, name = _damaged_copy(data, tmp_path)
    uri = _upload(s3, copy, "damaged")
    messages = []
    for path, options in ((str(copy), {}), (uri, s3)):
        reader = spark.read.format("compactlog").options(**options).option("subscribe", "t")
        with pytest.raises(Exception, match="damaged") as caught:
            reader.load(path).collect()
        text = str(caught.value)
        where = f"{path}/{name}"
        assert where in text
        messages.append(text[text.index(where) + len(where) :].splitlines()[0])
    assert messages[0] == messages[1]  # the same batches, the same problem
    assert "the batches at bytes" in messages[0]


def test_writing_compacting_and_serving_a_uri_are_refused(
    spark: Any, remote: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StorageError, match="compaction needs a local or mounted data directory"):
        compact(spark, remote, "t")
    with pytest.raises(StorageError, match=r"opening a store .* not s3://"):
        Store.open(remote)
    register(spark)
    df = spark.createDataFrame([(b"k", b"v")], "key BINARY, value BINARY")
    with pytest.raises(Exception, match="writing with the compactlog sink needs a local"):
        df.write.format("compactlog").option("topic", "t").mode("append").save(remote)
    assert list(tmp_path.iterdir()) == []  # no directory named "s3:" appeared


def test_bad_storage_options_and_schemes(spark: Any, data: Path, remote: str) -> None:
    register(spark)
    reader = spark.read.format("compactlog").option("fs.s3.endpiont", "http://x")
    with pytest.raises(Exception, match=r"unknown storage option fs.s3.endpiont"):
        reader.load(remote).collect()
    with pytest.raises(ConfigError, match=r"the scheme gs:// is not supported"):
        filesystem("gs://bucket/data")
    with pytest.raises(ConfigError, match=r"fs\.s3\.checksums must be one of"):
        partition_report(spark, remote, storage_options={"fs.s3.checksums": "never"})


def test_hdfs_goes_through_the_same_seam() -> None:
    """No namenode here: the hdfs:// path reaches pyarrow's HadoopFileSystem through the same
    adapter, and its failure (no libhdfs/Hadoop, or no namenode) is one clear error."""
    with pytest.raises(
        StorageError, match=r"cannot open the filesystem of hdfs://127.0.0.1:1/d"
    ) as e:
        filesystem("hdfs://127.0.0.1:1/d")
    assert "\n" not in str(e.value)  # one line, not libhdfs's list of places it looked


def test_a_uri_is_only_read(tmp_path: Path) -> None:
    """Ranged reads (clamped at the end), listing and sizes work; every change is refused and
    leaves the file as it was."""
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f.log").write_bytes(b"0123456789")
    base = f"file://{tmp_path}/d"
    fs = filesystem(base)
    assert fs.listdir(base) == ["f.log"] and fs.is_dir(base) and not fs.exists(f"{base}/g")
    assert fs.file_size(f"{base}/f.log") == 10
    handle = fs.open(f"{base}/f.log")
    assert handle.read_at(3, 4) == b"3456" and handle.read_at(8, 100) == b"89"
    assert handle.read_at(10, 5) == b""
    for attempt in (
        lambda: handle.write_at(0, b"x"),
        lambda: handle.truncate(0),
        lambda: fs.remove(f"{base}/f.log"),
        lambda: fs.rename(f"{base}/f.log", f"{base}/g.log"),
        lambda: fs.open(f"{base}/new.log", create=True),
    ):
        with pytest.raises(StorageError, match="compactlog only reads from"):
            attempt()
    handle.close()
    assert (tmp_path / "d" / "f.log").read_bytes() == b"0123456789"
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == ["f.log"]


def test_the_cli_report_reads_s3_with_storage_options(
    local_report: list[Any], remote: str, s3: dict[str, str], tmp_path: Path
) -> None:
    """As the library's report (the CLI's clock is the wall clock: nothing here depends on
    it, no topic has a compaction lag)."""
    from click.testing import CliRunner

    from compactlog.cli.main import main
    from compactlog.spark.report import read_json

    out = tmp_path / "report.json"
    args = ["--data-dir", remote, "spark", "report", "t", "--json", str(out), "--quiet"]
    args += [a for name, value in s3.items() for a in ("--storage-option", f"{name}={value}")]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert read_json(out) == [r for r in local_report if r.topic == "t"]
    bad = CliRunner().invoke(main, [*args[:5], "--storage-option", "fs.s3.endpoint"])
    assert bad.exit_code == 2
    assert "--storage-option must be NAME=VALUE, not 'fs.s3.endpoint'" in bad.output
