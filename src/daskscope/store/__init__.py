"""The store: daskscope's records kept in SQLite or PostgreSQL.

>>> store = open_store("sqlite:///runs.db")   # creates or upgrades the schema
>>> write_records(store, records)             # idempotent upserts, one transaction
>>> store.list_clusters()                     # plain dicts, newest first

The Store is the one door: every read is a method of it (``store/reads.py``), and what
this process keeps about the database (its caches) are fields of it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from daskscope.store.errors import (
    AmbiguousCluster,
    BadDatabaseURL,
    DatabaseUnreachable,
    MigrationFailed,
    NotADaskscopeDatabase,
    RecordConflict,
    SchemaTooNew,
    StoreError,
    UnknownCluster,
    WriteFailed,
)
from daskscope.store.queries import (
    cluster_detail,
    list_clusters,
    profile_trees,
    resolve_cluster_id,
    table_counts,
    worker_samples,
)
from daskscope.store.writer import Rejected, write_parts, write_records, write_rows

if TYPE_CHECKING:
    from daskscope.store.engine import Store, open_store

__all__ = [
    "AmbiguousCluster",
    "BadDatabaseURL",
    "DatabaseUnreachable",
    "MigrationFailed",
    "NotADaskscopeDatabase",
    "RecordConflict",
    "Rejected",
    "SchemaTooNew",
    "Store",
    "StoreError",
    "UnknownCluster",
    "WriteFailed",
    "cluster_detail",
    "list_clusters",
    "open_store",
    "profile_trees",
    "resolve_cluster_id",
    "table_counts",
    "worker_samples",
    "write_parts",
    "write_records",
    "write_rows",
]


def __getattr__(name: str) -> Any:
    # The Store is imported when first asked for: its reads include the task log's
    # (daskscope.tasklog), whose modules import the store's, so importing one of them
    # first must not build the Store half-way through it.
    if name in ("Store", "open_store"):
        from daskscope.store import engine

        return getattr(engine, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
