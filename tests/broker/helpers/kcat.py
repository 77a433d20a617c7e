"""Debian's kcat as a subprocess: ``kcat -b BOOTSTRAP ARGS``, producing and reading."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping, Sequence

from tests.broker.helpers.clients import CLIENT_TIMEOUT_S, Seen


def kcat(
    bootstrap: str,
    *args: str,
    input: bytes | None = None,
    timeout: float = CLIENT_TIMEOUT_S,
    check: bool = True,
) -> subprocess.CompletedProcess[bytes]:
    """Run ``kcat -b bootstrap ARGS``; a hang fails the test after ``timeout`` seconds."""
    cmd = ["kcat", "-b", bootstrap, *args]
    try:
        done = subprocess.run(cmd, input=input, capture_output=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(
            f"{' '.join(cmd)} did not finish in {timeout} s; stderr: {exc.stderr!r}"
        ) from None
    if check and done.returncode != 0:
        raise AssertionError(
            f"{' '.join(cmd)} exited with {done.returncode}; stderr: {done.stderr.decode()}"
        )
    return done


def produce(
    bootstrap: str,
    topic: str,
    records: Sequence[tuple[bytes | None, bytes | None]],
    codec: str,
    partition: int | None,
) -> None:
    lines = []
    for k, v in records:
        assert k is not None and v is not None and b":" not in k and b"\n" not in v
        lines.append(k + b":" + v + b"\n")
    args = ["-P", "-t", topic, "-K:", "-z", codec, "-X", "linger.ms=20"]
    if partition is not None:
        args += ["-p", str(partition)]
    kcat(bootstrap, *args, input=b"".join(lines))


def read(
    bootstrap: str,
    topic: str,
    ends: Mapping[int, int],
    group: str | None,
    start: int | None,
    timeout: float,
) -> tuple[list[Seen], dict[int, int]]:
    if group is None:
        args = ["-C", "-t", topic, "-o", "beginning" if start is None else str(start)]
        if len(ends) == 1:
            args += ["-p", str(next(iter(ends)))]
    else:
        args = ["-G", group, "-X", "auto.offset.reset=earliest", topic]
    done = kcat(bootstrap, *args, "-e", "-q", "-J", timeout=timeout)
    seen = []
    for line in done.stdout.decode().splitlines():
        msg = json.loads(line)
        key, value = msg["key"], msg["payload"]
        seen.append(
            Seen(
                msg["partition"],
                msg["offset"],
                None if key is None else key.encode(),
                None if value is None else value.encode(),
            )
        )
    return seen, dict(ends)
