"""Reading a data directory from S3 against reading it locally, through the ``compactlog``
source's reader (no Spark: its planning and its tasks' reads, in one process).

Prints one JSON line per round and location.

    python benchmarks/bench_remote_read.py --endpoint http://127.0.0.1:8080 \\
        --access-key local --secret-key local-secret [--records 200000] [--rounds 2]

The S3 server must accept the credentials and allow creating the bucket ``--bucket``
(``compactlog-bench``); s3proxy (``.jars/s3proxy``, see docs) does. The data: one topic of 2
partitions, records of 100 bytes in batches of 1,000, uploaded as a plain copy of the tree.

Figures: ``plan_s`` (listing and walking the batch headers of the segments, on the driver),
``read_s`` (every split read and decoded into Arrow), ``mb_per_s`` (log bytes / read_s).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

from compactlog.spark.source import LogReader
from compactlog.storage.store import Store


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--access-key", required=True)
    parser.add_argument("--secret-key", required=True)
    parser.add_argument("--bucket", default="compactlog-bench")
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    from pyarrow import fs as pafs

    # s3proxy and older S3-compatible servers do not implement the SDK's default checksums.
    os.environ["AWS_REQUEST_CHECKSUM_CALCULATION"] = "when_required"
    os.environ["AWS_RESPONSE_CHECKSUM_VALIDATION"] = "when_required"
    path = tempfile.mkdtemp(prefix="bench-remote-")
    with Store.open(path) as store:
        store.create_topic("b", 2, {"segment.bytes": str(8 << 20)})
        for p in range(2):
            for j in range(args.records // 2000):
                rows = [(b"k%09d" % (j * 1000 + i), b"x" * 100) for i in range(1000)]
                store.append("b", p, rows, timestamp=1_700_000_000_000)
    size = sum(
        os.path.getsize(os.path.join(d, f))
        for d, _, files in os.walk(path)
        for f in files
        if f.endswith(".log")
    )
    client = pafs.S3FileSystem(
        access_key=args.access_key,
        secret_key=args.secret_key,
        endpoint_override=args.endpoint,
        scheme="https" if args.endpoint.startswith("https") else "http",
        region="us-east-1",
        allow_bucket_creation=True,
    )
    client.create_dir(args.bucket)
    prefix = f"{args.bucket}/{os.path.basename(path)}"
    pafs.copy_files(path, prefix, destination_filesystem=client)
    storage = {
        "fs.s3.endpoint": args.endpoint,
        "fs.s3.region": "us-east-1",
        "fs.s3.accessKey": args.access_key,
        "fs.s3.secretKey": args.secret_key,
        "fs.s3.checksums": "when_required",
    }
    for n in range(args.rounds):
        for where, options in ((path, {}), (f"s3://{prefix}", storage)):
            started = time.monotonic()
            reader = LogReader({"path": where, **{k.lower(): v for k, v in options.items()}}, False)
            splits = reader.partitions()
            planned = time.monotonic()
            records = sum(batch.num_rows for s in splits for batch in reader.read(s))
            done = time.monotonic()
            print(
                json.dumps(
                    {
                        "round": n + 1,
                        "location": "s3" if options else "local",
                        "records": records,
                        "log_mb": round(size / 1e6, 1),
                        "splits": len(splits),
                        "plan_s": round(planned - started, 3),
                        "read_s": round(done - planned, 3),
                        "mb_per_s": round(size / 1e6 / (done - planned), 1),
                    }
                )
            )


if __name__ == "__main__":
    main()
