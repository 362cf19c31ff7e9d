"""What a sink is: where the recorder's records go, seen from the recorder.

Every sink has the same four calls (``open``, ``write``, ``close``, ``stats``); the
recorder calls them from its writer thread, never from the scheduler's event loop. This
module imports no sink: each is in its own (:mod:`.store_sink`, :mod:`.http_sink`,
:mod:`.memory_sink`), and :func:`~daskscope.collector.destination.sink_for` picks one
for a destination.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from daskscope.model import Record

__all__ = ["Sink", "SinkStats", "StoreLost"]


class StoreLost(Exception):
    """The store went away (e.g. its file was deleted) and a new one was made: the
    collector writes again everything it still holds."""


@dataclass(frozen=True, slots=True)
class SinkStats:
    """What a sink has done so far."""

    #: "store": written straight into a store; "server": delivered to a daskscope server;
    #: "memory": kept in memory (:class:`~.memory_sink.MemorySink`, for tests)
    kind: Literal["store", "server", "memory"]
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
