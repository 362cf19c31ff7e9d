"""Where the collector's records go. Sinks are called from the collector's writer thread,
never from the scheduler's event loop."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Protocol

from daskscope.model import Record

__all__ = ["Sink", "StoreLost", "StoreSink"]


class StoreLost(Exception):
    """The store went away (e.g. its file was deleted) and a new one was made: the
    collector writes again everything it still holds."""


class Sink(Protocol):
    def open(self) -> None:
        """Prepare ahead of the first write; errors here are ignored (write reports them)."""

    def write(self, records: Sequence[Record]) -> None:
        """Store the records; raise on failure (the collector keeps them and retries)."""

    def close(self) -> None: ...


class StoreSink:
    """Writes straight into a daskscope store (SQLite or PostgreSQL)."""

    def __init__(self, url: str):
        self.url = url
        self._store = None

    def open(self) -> None:
        # write() tries again and reports the error where it counts
        with contextlib.suppress(Exception):
            self._open()

    def _open(self) -> None:
        from daskscope.store import open_store

        if self._store is None:
            self._store = open_store(self.url)

    def write(self, records: Sequence[Record]) -> None:
        # The store is imported and opened lazily, in the writer thread: opening may run
        # migrations, which must never happen on the scheduler's event loop.
        from daskscope.store import write_records

        self._open()
        write_records(self._store, records)

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None
