"""The sink that writes straight into a daskscope store (SQLite or PostgreSQL): its
batches through :mod:`daskscope.store.batches`, a SQLite file's by a child process
(:mod:`.store_process`)."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from daskscope.collector.sink import SinkStats, StoreLost
from daskscope.model import Record, stamp_revisions

__all__ = ["StoreSink"]

logger = logging.getLogger("daskscope")


class StoreSink:
    """Writes straight into a daskscope store (SQLite or PostgreSQL).

    A SQLite file is written by a child process (:mod:`.store_process`): SQLite can kill
    the process that maps a WAL's ``-shm`` file (SIGBUS), and that must never be the
    scheduler. Before each write the file is checked to be the one opened: a file
    deleted or replaced meanwhile is noticed, said, made again, and :class:`StoreLost`
    raised so that the collector writes everything again.

    ``isolated=False``: a SQLite file is written in this process (a one-shot writer
    whose process is not the scheduler), and failures are left to the caller to say.
    """

    def __init__(self, url: str | None, *, isolated: bool = True):
        self.url = url
        self.isolated = isolated
        self._store: Any = None  # in-process: PostgreSQL, in-memory SQLite
        self._process: Any = None  # a SQLite file
        self._path: Path | None = None
        self._identity: tuple[int, int] | None = None
        self._lost: str | None = None  # why the store must be written whole again
        self._failing = False
        #: records the database refused one by one (their batches were stored without them)
        self.rejected_records = 0
        self.records_written = 0
        self.batches_written = 0
        self.failures = 0
        self.last_error: str | None = None
        self.rows_by_table: dict[str, int] = {}

    def stats(self) -> SinkStats:
        return SinkStats(
            kind="store",
            rows_by_table=dict(self.rows_by_table),
            records_written=self.records_written,
            batches_written=self.batches_written,
            failures=self.failures,
            rejected_records=self.rejected_records,
            last_error=self.last_error,
        )

    def open(self) -> None:
        # write() tries again and reports the error where it counts
        with contextlib.suppress(Exception):
            self._open()

    def _open(self) -> None:
        if self._store is not None or self._process is not None:
            return
        # Imported and opened lazily, in the writer thread: opening may run migrations,
        # which must never happen on the scheduler's event loop.
        from daskscope import config

        url = config.database_url(self.url)
        if self.isolated and _names_sqlite(url):
            from daskscope.collector.store_process import StoreProcess

            # the child parses the URL (SQLAlchemy, imported there only) and says which
            # file it opened; a store in memory has nothing to isolate
            process = StoreProcess(url)
            process.start()
            if process.database is not None:
                self._process, self._path = process, Path(process.database)
                self._identity = _identity(self._path)
                return
            process.close()
        from daskscope.store import open_store

        self._store = open_store(self.url)

    def write(self, records: Sequence[Record]) -> None:
        stamp_revisions(records)  # newer than anything this process wrote before
        try:
            self._check_still_there()
            self._open()
            if self._lost is not None:
                lost, self._lost = self._lost, None
                raise StoreLost(lost)
            self._write(records)
        except StoreLost as exc:
            self.failures += 1
            self.last_error = f"StoreLost: {exc}"
            raise
        except Exception as exc:
            self.failures += 1
            self.last_error = f"{type(exc).__name__}: {exc}"
            if self.isolated and not self._failing:
                self._failing = True
                logger.warning(
                    "daskscope cannot write to %s: %s; the records are kept in memory and "
                    "written once it can be",
                    self.url,
                    exc,
                )
            raise
        self.last_error = None
        if self._failing:
            self._failing = False
            logger.warning("daskscope writes to %s again", self.url)

    def _write(self, records: Sequence[Record]) -> None:
        from daskscope.store.errors import WriteFailed

        rejected: list[tuple[str, str, str]] = []  # (table, record id, reason)
        if self._store is not None:
            from daskscope.store import Rejected
            from daskscope.store.batches import write_batch

            refused: list[Rejected] = []
            tables = write_batch(self._store, records, rejected=refused).tables
            rejected = [(r.table, r.record_id, r.reason) for r in refused]
        else:
            assert self._process is not None
            from daskscope.collector.store_process import StoreProcessDied
            from daskscope.wire import encode_batch

            try:
                answer = self._process.write(encode_batch(records))
            except StoreProcessDied as exc:
                self._process = None  # a new one for the next write
                raise WriteFailed(f"{self.url}: {exc}", retryable=True) from None
            if "error" in answer:
                raise WriteFailed(answer["error"], retryable=bool(answer.get("retryable")))
            rejected = [
                (table, record_id, reason) for table, record_id, reason in answer["rejected"]
            ]
            tables = answer.get("tables", {})
            # the child's warnings are silenced: say it here, once
            for table, record_id, reason in rejected:
                logger.warning(
                    "daskscope: %s refused record %s of %s (%s); the rest of its batch was stored",
                    self.url,
                    record_id,
                    table,
                    reason,
                )
        for table, rows in tables.items():
            self.rows_by_table[table] = self.rows_by_table.get(table, 0) + rows
        self.rejected_records += len(rejected)
        self.records_written += len(records) - len(rejected)
        self.batches_written += 1

    def _check_still_there(self) -> None:
        """Notice a SQLite file deleted or replaced since it was opened: SQLite would go
        on writing into the unlinked file, and everything recorded would be lost."""
        if self._path is None or self._identity is None:
            return
        now = _identity(self._path)
        if now == self._identity:
            return
        what = "deleted" if now is None else "replaced by another file"
        self._lost = (
            f"the store {self._path} was {what} while this cluster was being recorded; "
            "a new store is made there and everything the recorder holds written again"
        )
        logger.warning("daskscope: %s", self._lost)
        self._close()  # the next _open() makes the new store

    def _close(self) -> None:
        store, self._store = self._store, None
        process, self._process = self._process, None
        self._identity = None
        if store is not None:
            store.close()
        if process is not None:
            process.close()

    def close(self) -> None:
        self._close()
        self._path = None


def _names_sqlite(url: str) -> bool:
    """The URL's scheme names SQLite (``sqlite://``, ``sqlite+driver://``): its child
    process parses the rest, and refuses what SQLAlchemy or daskscope would."""
    scheme, separator, _ = url.partition("://")
    return bool(separator) and scheme.partition("+")[0] == "sqlite"


def _identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of the file at ``path``; None when there is none."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_dev, st.st_ino)
