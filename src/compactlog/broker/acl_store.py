"""Where the ACLs live: ``compactlog-acls.json`` in the data directory (Kafka keeps them as
records of its metadata log; a single node needs only the current set).

The whole set is rewritten on every change with the checkpoint discipline of
:func:`~compactlog.storage.fs.write_file_atomically` (temp file, fsync, rename, directory
fsync), through the store's filesystem seam, *before* the change is answered: a crash leaves
either the old set or the new one, and an acknowledged CreateAcls or DeleteAcls survives it.
A damaged file refuses the start rather than run with fewer ACLs than the operator made (a
lost DENY would open what it closed).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable

from compactlog.broker.authorizer import AclBinding, StandardAuthorizer
from compactlog.errors import StorageError
from compactlog.storage.fs import FileSystem, write_file_atomically
from compactlog.storage.verify import ACLS_FILE

__all__ = ["ACLS_FILE", "AclFile", "load_authorizer"]

_VERSION = 1


class AclFile:
    """The ACL file of one data directory."""

    def __init__(self, fs: FileSystem, data_dir: str) -> None:
        self._fs = fs
        self.path = os.path.join(data_dir, ACLS_FILE)

    def load(self) -> list[AclBinding]:
        """The stored bindings (none when the file does not exist)."""
        if not self._fs.exists(self.path):
            return []
        try:
            doc = json.loads(self._fs.read_file(self.path).decode("utf-8"))
            if doc.get("version") != _VERSION:
                raise ValueError(f"unknown version {doc.get('version')!r}")
            return [AclBinding.from_json(item) for item in doc["acls"]]
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise StorageError(
                f"{self.path} is damaged ({exc!r}); refusing to start rather than run with "
                "fewer ACLs than were created (restore it, or remove it to start with none)"
            ) from exc

    def save(self, bindings: Iterable[AclBinding]) -> None:
        doc = {"version": _VERSION, "acls": [b.to_json() for b in bindings]}
        write_file_atomically(self._fs, self.path, json.dumps(doc, indent=1).encode() + b"\n")


def load_authorizer(
    fs: FileSystem,
    data_dir: str,
    enabled: bool,
    super_users: Iterable[str],
    allow_everyone_if_no_acl_found: bool,
) -> tuple[StandardAuthorizer | None, AclFile | None]:
    """The authorizer with the stored ACLs, and its file; (None, None) when authorization is
    off (the file, if any, is left as it is for a later start with the authorizer)."""
    if not enabled:
        return None, None
    acl_file = AclFile(fs, data_dir)
    authorizer = StandardAuthorizer(
        acl_file.load(),
        super_users=super_users,
        allow_everyone_if_no_acl_found=allow_everyone_if_no_acl_found,
    )
    return authorizer, acl_file
