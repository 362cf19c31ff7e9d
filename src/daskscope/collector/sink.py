"""Where records go: a daskscope store or a daskscope server, chosen by one factory.

:func:`sink_for` makes the sink for a destination; the recorder and the workflow code
both get theirs from it. Every sink has the same four calls (``open``, ``write``,
``close``, ``stats``). The recorder calls its sink from its writer thread, never from the
scheduler's event loop.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from daskscope.model import Record, stamp_revisions

__all__ = ["Sink", "SinkStats", "StoreLost", "StoreSink", "sink_for"]

logger = logging.getLogger("daskscope")


class StoreLost(Exception):
    """The store went away (e.g. its file was deleted) and a new one was made: the
    collector writes again everything it still holds."""


@dataclass(frozen=True, slots=True)
class SinkStats:
    """What a sink has done so far."""

    #: "store": written straight into a store; "server": delivered to a daskscope server
    kind: Literal["store", "server"]
    #: records taken for good (stored, delivered, or spooled on disk for delivery)
    records_written: int = 0
    #: batches stored or delivered
    batches_written: int = 0
    #: writes that raised (their records stay with the caller)
    failures: int = 0
    #: batches a server refused for good (kept as ``.rejected`` in the spool)
    rejected_batches: int = 0
    #: records refused one by one (the rest of their batch was stored)
    rejected_records: int = 0
    #: batches waiting in the spool for the server
    spooled: int = 0
    last_error: str | None = None
    #: rows upserted so far by table (a store sink; a record twice in one batch is one)
    rows_by_table: Mapping[str, int] = field(default_factory=dict)


class Sink(Protocol):
    def open(self) -> None:
        """Prepare ahead of the first write; errors here are ignored (write reports them)."""

    def write(self, records: Sequence[Record]) -> None:
        """Store the records, numbered as the newest state of their rows
        (:func:`~daskscope.model.stamp_revisions`); raise on failure (the collector
        keeps them and retries)."""

    def close(self) -> None: ...

    def stats(self) -> SinkStats: ...


def sink_for(
    *,
    database: str | None = None,
    server: str | None = None,
    token: str | None = None,
    spool_dir: str | Path | None = None,
    one_shot: bool = False,
) -> Sink:
    """The sink for a destination: the daskscope ``server`` (with ``token``, spooling in
    ``spool_dir`` while it is away) when one is given, else the store at ``database``
    (None: the configured one). Nothing is opened yet.

    ``one_shot``: a caller that writes once and reports failures itself (a finished
    workflow run) rather than a recorder that keeps records and retries; its SQLite
    store is written in this process, not by a child process."""
    if server:
        from daskscope import config
        from daskscope.collector.http_sink import HttpSink

        return HttpSink(server, token, spool_dir or config.default_spool_dir())
    return StoreSink(database, isolated=not one_shot)


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
        from daskscope.store.engine import parse_url

        url = config.database_url(self.url)
        parsed = parse_url(url)
        database = parsed.database
        in_memory = database in (None, "", ":memory:")
        if not self.isolated or parsed.get_backend_name() != "sqlite" or in_memory:
            from daskscope.store import open_store

            self._store = open_store(self.url)
            return
        from daskscope.collector.store_process import StoreProcess

        assert database is not None  # not in_memory
        process = StoreProcess(url)
        process.start()
        self._process, self._path = process, Path(database)
        self._identity = _identity(self._path)

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
        from daskscope.store import Rejected, WriteFailed, write_records

        rejected: list[Rejected] = []
        if self._store is not None:
            write_records(self._store, records, rejected=rejected)
            tables = _distinct_rows(records)
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
            rejected = [Rejected(*item) for item in answer["rejected"]]
            tables = answer.get("tables", {})
            # the child's warnings are silenced: say it here, once
            for item in rejected:
                logger.warning(
                    "daskscope: %s refused record %s of %s (%s); the rest of its batch was stored",
                    self.url,
                    item.record_id,
                    item.table,
                    item.reason,
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


def _identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of the file at ``path``; None when there is none."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_dev, st.st_ino)


def _distinct_rows(records: Sequence[Record]) -> dict[str, int]:
    """Rows a batch upserts, by table (records sharing an id are one row)."""
    from daskscope.store.schema import TABLE_FOR

    ids: dict[str, set[str]] = {}
    for record in records:
        ids.setdefault(TABLE_FOR[type(record)].name, set()).add(record.id)
    return {table: len(rows) for table, rows in ids.items()}
