"""Errors of the store: each states the fact and carries it as data.

They say nothing of how to go on: the command line adds its hints (``--database``,
``daskscope clusters``), the web its own (a link, a JSON error with the data fields).
The errors of opening a store (:class:`AboutURL`) carry the database URL, password
hidden, as ``url``; their message may say what to do with the database itself (move a
file aside, create the database), never which flag to pass.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = [
    "AboutURL",
    "AmbiguousCluster",
    "BadDatabaseURL",
    "DatabaseUnreachable",
    "MigrationFailed",
    "NotADaskscopeDatabase",
    "RecordConflict",
    "SchemaTooNew",
    "StoreError",
    "UnknownCluster",
    "WriteFailed",
    "short_reason",
]


class StoreError(Exception):
    """Base class: anything the store refuses or cannot do."""

    def data(self) -> dict[str, Any]:
        """What the error is about, as JSON-friendly fields (empty: only the message)."""
        return {}


class AboutURL(StoreError):
    """An error about one database URL (opening, schema, migration)."""

    def __init__(self, message: str, *, url: str | None = None) -> None:
        super().__init__(message)
        #: the database URL concerned, password hidden (None: not known where raised)
        self.url = url

    def data(self) -> dict[str, Any]:
        return {} if self.url is None else {"url": self.url}


class BadDatabaseURL(AboutURL):
    """The URL cannot be parsed or names a database daskscope does not support."""


class DatabaseUnreachable(AboutURL):
    """The server (or the SQLite file's directory) cannot be reached or opened."""


class NotADaskscopeDatabase(AboutURL):
    """The target holds something else; daskscope refuses to touch it."""


class SchemaTooNew(AboutURL):
    """The database was migrated by a newer daskscope than this one."""


class MigrationFailed(AboutURL):
    """Bringing the schema up to date failed; the database was left as it was."""


class WriteFailed(StoreError):
    """A batch could not be written; nothing of it was stored.

    ``retryable`` is true when the cause is the connection or a lock (try again
    later), false when the database rejected the data itself.
    """

    def __init__(self, message: str, *, retryable: bool) -> None:
        super().__init__(message)
        self.retryable = retryable

    def data(self) -> dict[str, Any]:
        return {"retryable": self.retryable}


class RecordConflict(WriteFailed):
    """A record would move a stored row to another cluster (or a cluster to another
    account): ids collide. Nothing of the batch was stored; retrying will not help."""

    def __init__(self, table: str, record_id: str, owner: str) -> None:
        super().__init__(
            f"record {record_id!r} of {table} belongs to another "
            f"{'account' if owner == 'account' else 'cluster'}; nothing of this batch was "
            "stored",
            retryable=False,
        )
        self.table = table
        self.record_id = record_id

    def data(self) -> dict[str, Any]:
        return {"table": self.table, "record_id": self.record_id, "retryable": False}


class UnknownCluster(StoreError, LookupError):
    """No cluster has this id, or this id prefix (which needs ``min_prefix`` characters)."""

    def __init__(self, cluster_id: str, *, min_prefix: int | None = None) -> None:
        short = min_prefix is not None and len(cluster_id) < min_prefix
        super().__init__(
            f"no cluster with id {cluster_id!r}"
            + (f" (a prefix needs at least {min_prefix} characters)" if short else "")
        )
        self.cluster_id = cluster_id
        self.min_prefix = min_prefix

    def data(self) -> dict[str, Any]:
        return {"cluster_id": self.cluster_id}


class AmbiguousCluster(StoreError, LookupError):
    """An id prefix matches more than one cluster; ``matches`` lists the first of them."""

    #: ids named in the message (``matches`` may hold one more: "and others")
    SHOWN = 10

    def __init__(self, prefix: str, matches: list[str]) -> None:
        shown = ", ".join(matches[: self.SHOWN]) + (", ..." if len(matches) > self.SHOWN else "")
        super().__init__(f"{prefix!r} matches several clusters ({shown})")
        self.prefix = prefix
        self.matches = list(matches)

    @property
    def candidates(self) -> list[str]:
        return self.matches

    def data(self) -> dict[str, Any]:
        return {"prefix": self.prefix, "matches": self.matches[: self.SHOWN]}


def short_reason(exc: BaseException) -> str:
    """The driver's message reduced to one short line."""
    orig = getattr(exc, "orig", None) or exc
    text = " ".join(str(orig).split())
    lowered = text.lower()
    for needle, short in (
        ("connection refused", "connection refused"),
        ("could not translate host name", "unknown host"),
        ("name or service not known", "unknown host"),
        ("timeout expired", "connection timed out"),
        ("password authentication failed", "password authentication failed"),
        ("no password supplied", "the server wants a password"),
        ("file is not a database", "file is not a database"),
        ("database disk image is malformed", "database disk image is malformed"),
        ("unable to open database file", "unable to open database file"),
        ("database is locked", "database is locked"),
    ):
        if needle in lowered:
            return short
    missing = re.search(r'database "([^"]+)" does not exist', text)
    if missing:
        return f"database {missing.group(1)!r} does not exist"
    return text[:300]
