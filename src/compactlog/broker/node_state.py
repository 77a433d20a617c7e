"""What the broker keeps in the data directory besides the store: its identity and producer ids.

* ``meta.properties`` (Kafka's file of the same name, in Java properties syntax): the cluster id,
  stable for the life of the data directory, and the node id (the ``node.id`` setting, 0 unless
  set). Written once, when absent, so Metadata answers the same cluster id after every restart.
  A later start with another ``node.id`` is refused, as Kafka refuses it: the node id names the
  leader of every partition in clients' caches and in ``__consumer_offsets``.
* ``compactlog-producer-ids.json``: the end of the last block of producer ids handed out. Like
  Kafka's ``ProducerIdManager``, ids are allocated in blocks of :data:`PRODUCER_ID_BLOCK_SIZE`;
  a block's end is written (atomically, fsynced) *before* any id of it is returned, so a restart,
  even after a crash, continues after the block and never hands out an id twice. Ids left unused
  in the block of a crashed broker are skipped, as in Kafka.

Both files are written while the store holds the data directory's lock, through the store's
filesystem seam.
"""

from __future__ import annotations

import json
import logging
import os

from compactlog.errors import ConfigError, StorageError
from compactlog.storage.fs import FileSystem, write_file_atomically
from compactlog.storage.kraft_metadata import random_uuid
from compactlog.storage.store import Store

__all__ = [
    "META_PROPERTIES_FILE",
    "NODE_ID",
    "PRODUCER_IDS_FILE",
    "PRODUCER_ID_BLOCK_SIZE",
    "ProducerIdManager",
    "load_cluster_id",
]

logger = logging.getLogger("compactlog.broker")

META_PROPERTIES_FILE = "meta.properties"
PRODUCER_IDS_FILE = "compactlog-producer-ids.json"
#: The default node id of the one broker (Kafka's ``node.id``, which has no default in Kafka):
#: leader, replica and coordinator of every partition and group.
NODE_ID = 0
#: Producer ids per persisted block (Kafka's ``ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE``).
PRODUCER_ID_BLOCK_SIZE = 1000


def _parse_properties(text: str) -> dict[str, str]:
    props: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        for sep in ("=", ":"):
            if sep in line:
                key, _, value = line.partition(sep)
                props[key.strip()] = value.strip()
                break
    return props


def load_cluster_id(store: Store, node_id: int = NODE_ID) -> str:
    """The cluster id of ``store``'s data directory, created and written on first use.

    A ``meta.properties`` written for another node id is a :class:`ConfigError` (Kafka's
    "Stored node id ... doesn't match previous node id ...")."""
    fs = store.fs
    path = os.path.join(store.path, META_PROPERTIES_FILE)
    if fs.exists(path):
        try:
            props = _parse_properties(fs.read_file(path).decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise StorageError(f"{path} is not a properties file: {exc}") from exc
        stored = props.get("node.id", "")
        if stored and stored != str(node_id):
            raise ConfigError(
                f"Stored node id {stored} doesn't match previous node id {node_id} "
                f"(in {path}): start with --config node.id={stored}"
            )
        cluster_id = props.get("cluster.id", "")
        if cluster_id:
            return cluster_id
        logger.warning("%s has no cluster.id; writing a new one", path)
    cluster_id = random_uuid()
    text = f"#\n#Written by compactlog\ncluster.id={cluster_id}\nnode.id={node_id}\nversion=1\n"
    write_file_atomically(fs, path, text.encode())
    return cluster_id


class ProducerIdManager:
    """Hands out producer ids, unique across restarts of the data directory (see the module
    docstring). Call from one thread."""

    def __init__(self, fs: FileSystem, path: str, next_id: int, block_end: int) -> None:
        self._fs = fs
        self._path = path
        self._next = next_id
        self._block_end = block_end  # the last id of the current block; -1: none yet

    @classmethod
    def load(cls, store: Store) -> ProducerIdManager:
        """Continue after the last persisted block, and above every producer id the logs know
        (a data directory written by another broker, or a lost file)."""
        fs = store.fs
        path = os.path.join(store.path, PRODUCER_IDS_FILE)
        next_id = 0
        if fs.exists(path):
            try:
                doc = json.loads(fs.read_file(path).decode("utf-8"))
                next_id = int(doc["block_end"]) + 1
            except (ValueError, KeyError, TypeError) as exc:
                raise StorageError(
                    f"{path} is damaged ({exc}); refusing to start rather than reuse producer ids"
                ) from exc
        for topic in store.topics():
            for partition in range(store.partitions(topic)):
                for state in store.producer_state(topic, partition):
                    next_id = max(next_id, state.producer_id + 1)
        return cls(fs, path, next_id, next_id - 1)

    def next_id(self) -> int:
        """A producer id never handed out before by this data directory."""
        if self._next > self._block_end:
            block_end = self._next + PRODUCER_ID_BLOCK_SIZE - 1
            doc = {"version": 1, "block_start": self._next, "block_end": block_end}
            write_file_atomically(self._fs, self._path, json.dumps(doc).encode() + b"\n")
            self._block_end = block_end
        producer_id = self._next
        self._next += 1
        return producer_id
