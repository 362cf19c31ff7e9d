"""The recorder's batches into a store: all that its sinks need of the store, so that
the recorder never reaches into the store's tables or its writer.

:func:`open_for_batches` opens a store ready for batches (what the SQLite child of
:mod:`daskscope.collector.store_process` does once); :func:`write_batch` writes one
batch, given as the records themselves (a sink in the recorder's process) or as a wire
batch of them (the child), and says how many rows it upserted in each table.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec
import sqlalchemy as sa

from daskscope.model import RECORD_TYPES, Record, group_by_kind, record_to_dict
from daskscope.store.engine import Store, open_store
from daskscope.store.schema import TABLE_FOR
from daskscope.store.writer import Rejected, prepare_writes, write_rows

__all__ = ["BatchWritten", "open_for_batches", "wire_rows", "write_batch"]


@dataclass(frozen=True, slots=True)
class BatchWritten:
    """What one batch did to the store."""

    #: rows written
    stored: int
    #: the batch's rows by table name (a record twice in one batch is one row)
    tables: dict[str, int] = field(default_factory=dict)


def open_for_batches(url: str | None) -> Store:
    """The store at ``url`` opened (created, migrated) with each table's upsert compiled,
    so that the first batch does not pay for it (in a short run's child, that was most
    of its CPU). Raises StoreError."""
    store = open_store(url)
    prepare_writes(store)
    return store


def wire_rows(payload: bytes) -> dict[sa.Table, list[dict[str, Any]]]:
    """A wire batch (:func:`daskscope.wire.encode_batch`) as rows by table, without the
    wire's checks: this is the recorder's own output, which a direct store always took
    as it was."""
    batch = msgspec.json.decode(payload)
    rows: dict[sa.Table, list[dict[str, Any]]] = {}
    for item in batch["records"]:
        rows.setdefault(TABLE_FOR[RECORD_TYPES[item["kind"]]], []).append(item["data"])
    return rows


def _record_rows(records: Sequence[Record]) -> dict[sa.Table, list[dict[str, Any]]]:
    rows: dict[sa.Table, list[dict[str, Any]]] = {}
    for cls, group in group_by_kind(records):
        table = TABLE_FOR.get(cls)
        if table is None:
            raise TypeError(f"{cls.__name__} is not a daskscope record type")
        rows[table] = [record_to_dict(r) for r in group]
    return rows


def write_batch(
    store: Store, batch: bytes | Sequence[Record], *, rejected: list[Rejected] | None = None
) -> BatchWritten:
    """Upsert one batch of the recorder's records in one transaction (see
    :func:`~daskscope.store.write_rows`): ``batch`` is the records or a wire batch of
    them. A record the database refuses on its own is left out, added to ``rejected``,
    and the rest written. Raises WriteFailed."""
    rows = wire_rows(batch) if isinstance(batch, bytes) else _record_rows(batch)
    stored = write_rows(store, rows, rejected=rejected)
    return BatchWritten(stored, {t.name: len({row["id"] for row in r}) for t, r in rows.items()})
