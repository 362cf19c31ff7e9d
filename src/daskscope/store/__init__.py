"""The store: daskscope's records kept in SQLite or PostgreSQL.

>>> store = open_store("sqlite:///runs.db")   # creates or upgrades the schema
>>> write_records(store, records)             # idempotent upserts, one transaction
>>> store.list_clusters()                     # plain dicts, newest first

The Store is the one door: every read is a method of it (``store/reads.py``), and what
this process keeps about the database (its caches) are fields of it.
"""

from __future__ import annotations

import importlib
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

if TYPE_CHECKING:
    from daskscope.store.engine import Store, open_store
    from daskscope.store.queries import (
        cluster_detail,
        list_clusters,
        profile_trees,
        resolve_cluster_id,
        table_counts,
        worker_samples,
    )
    from daskscope.store.writer import Rejected, write_parts, write_records, write_rows

#: what is imported when first asked for, and from where: the errors alone are light. A
#: scheduler whose recorder writes a SQLite file through its child process imports only
#: them, never SQLAlchemy (32,000 to 36,000 more objects for every full garbage collection
#: of the scheduler's heap to walk, and its memory)
_LAZY = {
    "Store": "engine",
    "open_store": "engine",
    "cluster_detail": "queries",
    "list_clusters": "queries",
    "profile_trees": "queries",
    "resolve_cluster_id": "queries",
    "table_counts": "queries",
    "worker_samples": "queries",
    "Rejected": "writer",
    "write_parts": "writer",
    "write_records": "writer",
    "write_rows": "writer",
}

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
    # Imported when first asked for. The Store's reads include the task log's
    # (daskscope.tasklog), whose modules import the store's, so importing one of them
    # first must not build the Store half-way through it.
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"daskscope.store.{module}"), name)
