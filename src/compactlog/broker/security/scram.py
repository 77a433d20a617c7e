"""SCRAM (RFC 5802, RFC 7677) as Kafka does it: the arithmetic, and the credentials file.

A credential is what Kafka's controller keeps: salt, stored key, server key and iterations,
per user and mechanism, never the password. ``kafka-configs --alter --add-config
'SCRAM-SHA-256=[password=...]'`` salts and hashes the password in the client
(AlterUserScramCredentials carries the salted password); the broker derives the stored key and
server key from it and drops the rest.

The file ``compactlog-scram-credentials.json`` in the data directory holds them; it is replaced
whole on every change (temp file, fsync, rename, directory fsync), so a crash leaves the old
credentials or the new ones.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
from dataclasses import dataclass
from typing import Final

from compactlog.errors import StorageError
from compactlog.storage.fs import FileSystem, write_file_atomically

__all__ = [
    "MAX_ITERATIONS",
    "MECHANISMS",
    "SCRAM_CREDENTIALS_FILE",
    "ScramCredential",
    "ScramCredentials",
    "ScramMechanism",
]

SCRAM_CREDENTIALS_FILE: Final = "compactlog-scram-credentials.json"
#: Kafka's bound on iterations (ScramControlManager.MAX_ITERATIONS).
MAX_ITERATIONS: Final = 16384


@dataclass(frozen=True)
class ScramMechanism:
    name: str
    type: int  # the protocol's INT8
    hash_name: str
    min_iterations: int = 4096

    def hash(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self.hash_name).digest()

    def salted_password(self, password: str, salt: bytes, iterations: int) -> bytes:
        return hashlib.pbkdf2_hmac(self.hash_name, password.encode(), salt, iterations)

    def credential(self, salted_password: bytes, salt: bytes, iterations: int) -> ScramCredential:
        client_key = self.hmac(salted_password, b"Client Key")
        return ScramCredential(
            salt=salt,
            stored_key=self.hash(client_key),
            server_key=self.hmac(salted_password, b"Server Key"),
            iterations=iterations,
        )

    def credential_for(self, password: str, iterations: int = 4096) -> ScramCredential:
        salt = secrets.token_bytes(32)
        return self.credential(self.salted_password(password, salt, iterations), salt, iterations)


MECHANISMS: Final = {
    "SCRAM-SHA-256": ScramMechanism("SCRAM-SHA-256", 1, "sha256"),
    "SCRAM-SHA-512": ScramMechanism("SCRAM-SHA-512", 2, "sha512"),
}
MECHANISM_BY_TYPE: Final = {m.type: m for m in MECHANISMS.values()}


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


class ScramCredentials:
    """The users' SCRAM credentials of one data directory, by user and mechanism."""

    def __init__(self, fs: FileSystem, path: str) -> None:
        self._fs = fs
        self._path = path
        self._by_user: dict[str, dict[str, ScramCredential]] = {}

    @classmethod
    def load(cls, fs: FileSystem, data_dir: str) -> ScramCredentials:
        credentials = cls(fs, os.path.join(data_dir, SCRAM_CREDENTIALS_FILE))
        path = credentials._path
        if not fs.exists(path):
            return credentials
        try:
            doc = json.loads(fs.read_file(path).decode("utf-8"))
            if doc.get("version") != 1:
                raise ValueError(f"unknown version {doc.get('version')!r}")
            for user, by_mechanism in doc["users"].items():
                for mechanism, c in by_mechanism.items():
                    if mechanism not in MECHANISMS:
                        raise ValueError(f"unknown mechanism {mechanism!r}")
                    credentials._by_user.setdefault(user, {})[mechanism] = ScramCredential(
                        base64.b64decode(c["salt"]),
                        base64.b64decode(c["stored_key"]),
                        base64.b64decode(c["server_key"]),
                        int(c["iterations"]),
                    )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise StorageError(
                f"{path} is damaged ({exc}); refusing to start rather than lose the users' "
                "credentials (restore it, or move it aside to start with no SCRAM users)"
            ) from exc
        return credentials

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._by_user.get(user, {}).get(mechanism)

    def users(self) -> dict[str, dict[str, ScramCredential]]:
        return {user: dict(by) for user, by in self._by_user.items()}

    def apply(
        self,
        deletions: list[tuple[str, str]],
        upsertions: list[tuple[str, str, ScramCredential]],
    ) -> None:
        """Delete and upsert credentials, then write the file; on a write error nothing
        changes (the error is raised)."""
        changed = {user: dict(by) for user, by in self._by_user.items()}
        for user, mechanism in deletions:
            changed.get(user, {}).pop(mechanism, None)
            if user in changed and not changed[user]:
                del changed[user]
        for user, mechanism, credential in upsertions:
            changed.setdefault(user, {})[mechanism] = credential
        doc = {
            "version": 1,
            "users": {
                user: {
                    mechanism: {
                        "salt": _b64(c.salt),
                        "stored_key": _b64(c.stored_key),
                        "server_key": _b64(c.server_key),
                        "iterations": c.iterations,
                    }
                    for mechanism, c in sorted(by.items())
                }
                for user, by in sorted(changed.items())
            },
        }
        write_file_atomically(self._fs, self._path, json.dumps(doc, indent=1).encode() + b"\n")
        self._by_user = changed
