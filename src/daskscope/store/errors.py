"""Errors of the store: one line each, saying what to do next."""

from __future__ import annotations

__all__ = [
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
]


class StoreError(Exception):
    """Base class: anything the store refuses or cannot do."""


class BadDatabaseURL(StoreError):
    """The URL cannot be parsed or names a database daskscope does not support."""


class DatabaseUnreachable(StoreError):
    """The server (or the SQLite file's directory) cannot be reached or opened."""


class NotADaskscopeDatabase(StoreError):
    """The target holds something else; daskscope refuses to touch it."""


class SchemaTooNew(StoreError):
    """The database was migrated by a newer daskscope than this one."""


class MigrationFailed(StoreError):
    """Bringing the schema up to date failed; the database was left as it was."""


class WriteFailed(StoreError):
    """A batch could not be written; nothing of it was stored.

    ``retryable`` is true when the cause is the connection or a lock (try again
    later), false when the database rejected the data itself.
    """

    def __init__(self, message: str, *, retryable: bool) -> None:
        super().__init__(message)
        self.retryable = retryable


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


class UnknownCluster(StoreError, LookupError):
    """No cluster has this id or id prefix."""


class AmbiguousCluster(StoreError, LookupError):
    """An id prefix matches more than one cluster."""

    def __init__(self, message: str, candidates: list[str]) -> None:
        super().__init__(message)
        self.candidates = candidates
