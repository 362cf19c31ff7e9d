"""Writing what changed: the buffer, the writer thread, retries, and their statistics.

A flush turns what the tracking parts marked as changed into records on the scheduler's
event loop (Dask's objects are not thread-safe), in slices so that the loop is never
held for long, and hands them to one writer thread that calls the sink. A failed write
keeps everything: what was snapshotted is marked changed again, and append-only records
(events, errors, samples, profiles) go back to the buffer, within its bound. A store
that was lost (:class:`~daskscope.collector.sink.StoreLost`) gets everything the
recorder still holds written again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from time import perf_counter, thread_time
from typing import TYPE_CHECKING, Any

from distributed.metrics import time

from daskscope.collector.sink import Sink, SinkStats, StoreLost
from daskscope.collector.writer import WriterThread
from daskscope.model import ErrorRecord, EventRecord, ProfileRecord, Record, WorkerSampleRecord

if TYPE_CHECKING:
    from distributed.scheduler import Scheduler, TaskGroup

    from daskscope.collector.accounting import Accounting
    from daskscope.collector.spans import SpanTrack, SpanTracker
    from daskscope.collector.tracking import ComputationTrack, GroupUse, WorkTracker

__all__ = ["FlushStats", "Flusher"]

logger = logging.getLogger("daskscope")

#: A flush takes task groups in chunks of this many, and gives the event loop back
#: once its current block has held the loop for :data:`SLICE_SECONDS`: blocks stay that
#: short whatever a group costs (its dependencies, a slow or busy machine), and a chunk
#: is small enough that looking at the clock after it costs nothing noticeable.
GROUPS_PER_CHUNK = 20
SLICE_SECONDS = 0.002
#: Log the first few write failures in full, then only count them.
_LOGGED_FAILURES = 3
_APPEND_ONLY = (ErrorRecord, EventRecord, ProfileRecord, WorkerSampleRecord)


@dataclass(slots=True)
class FlushStats:
    """What the flushes did so far."""

    flushes: int = 0
    records_written: int = 0
    #: append-only records dropped from a full buffer while the sink failed
    records_dropped: int = 0
    write_failures: int = 0
    last_write_error: str | None = None
    #: time the flushes held the event loop, in all and in the longest single block
    loop_seconds: float = 0.0
    longest_block_seconds: float = 0.0
    #: blocks of the loop the flushes held (each gives the loop back at its end)
    blocks: int = 0
    #: CPU time of the writer thread in the sink's writes
    writer_cpu_seconds: float = 0.0
    #: task groups turned into records, in all and by the last flush (only those that
    #: changed since the flush before: the work of a flush follows what changed)
    groups_snapshotted: int = 0
    last_groups_snapshotted: int = 0


class Flusher:
    """Buffers records and writes what changed; runs on the scheduler's event loop,
    except the sink's calls (in its writer thread)."""

    def __init__(
        self,
        *,
        scheduler: Scheduler,
        sink: Sink,
        tracker: WorkTracker,
        spans: SpanTracker,
        accounting: Accounting,
        destination: str,
        max_buffered_records: int,
        on_error: Callable[[str, BaseException], None],
    ) -> None:
        self.scheduler = scheduler
        self.sink = sink
        self.tracker = tracker
        self.spans = spans
        self.accounting = accounting
        self.destination = destination
        self.max_buffered_records = max_buffered_records
        #: called with ("snapshot", exc) when turning what changed into records fails
        self.on_error = on_error
        self.writer = WriterThread()
        self.buffer: list[Record] = []
        #: lifecycle events and errors, kept to write again into a store that was lost
        self.history: list[Record] = []
        self.stats = FlushStats()
        #: True: every span that changed is written now (a flush the user asked for,
        #: the last one at close), whatever its pacing says
        self.unpaced = False
        self._lock = asyncio.Lock()

    def status(self) -> dict[str, Any]:
        """The flushes' and the sink's statistics, as the recorder's info reports them."""
        stats = self.stats
        status = {
            **self.idle_status(),
            "records_written": stats.records_written,
            "write_failures": stats.write_failures,
            "last_write_error": stats.last_write_error,
            "records_dropped": stats.records_dropped,
            "flushes": stats.flushes,
            "longest_flush_block_seconds": stats.longest_block_seconds,
            "flush_blocks": stats.blocks,
            "writer_cpu_seconds": stats.writer_cpu_seconds,
            "groups_snapshotted": stats.groups_snapshotted,
            "last_groups_snapshotted": stats.last_groups_snapshotted,
            "groups_unchanged": self.tracker.unchanged,
            "groups_states_only": self.tracker.states_only,
            "span_groups_read": self.spans.groups_read,
        }
        sink_stats = getattr(self.sink, "stats", None)  # a stand-in sink may have none
        if sink_stats is not None:
            s: SinkStats = sink_stats()
            status.update(spooled=s.spooled, rejected_records=s.rejected_records)
            if s.kind == "store":
                status["rows_written_by_table"] = dict(s.rows_by_table)
            if s.kind == "server":  # a store takes records, not batches it could refuse
                status.update(
                    delivered_batches=s.batches_written, rejected_batches=s.rejected_batches
                )
        return status

    @staticmethod
    def idle_status() -> dict[str, Any]:
        """:meth:`status` before anything was written (or when nothing can be)."""
        return {
            "records_written": 0,
            "write_failures": 0,
            "last_write_error": None,
            "records_dropped": 0,
            "flushes": 0,
            "longest_flush_block_seconds": 0.0,
            "flush_blocks": 0,
            "writer_cpu_seconds": 0.0,
            "groups_snapshotted": 0,
            "last_groups_snapshotted": 0,
            # changed groups whose record equalled the one last written (not sent)
            "groups_unchanged": 0,
            # changed done groups whose states alone moved on: not written by a timed flush
            "groups_states_only": 0,
            "span_groups_read": 0,
            # rows a store upserted, by table (a server sink: not known here)
            "rows_written_by_table": {},
            # a server sink's delivery counts (the direct store sink has none)
            "spooled": 0,
            "delivered_batches": None,
            "rejected_batches": None,
            # records a store refused one by one (the rest of their batch was written)
            "rejected_records": 0,
        }

    # -- the buffer --------------------------------------------------------------------

    def add(self, record: Record) -> None:
        """A record for the next write (a sample, a profile)."""
        self.buffer.append(record)

    def keep(self, record: Record) -> None:
        """An event or error: buffered for the next write, and kept for a lost store."""
        self.buffer.append(record)
        if len(self.history) < self.max_buffered_records:
            self.history.append(record)

    # -- the writer thread -------------------------------------------------------------

    def open_sink(self) -> None:
        """Open the sink (imports, schema check) in the writer thread now, not during the
        first flush in the middle of the user's work; a failure shows at the first write."""
        self.writer.submit(self.sink.open)

    async def close_sink(self, timeout: float) -> None:
        """Close the sink after what is queued and wait for it: a server sink makes its
        last delivery try there, and a `dask scheduler` process may exit as soon as this
        returns."""
        closing = self.writer.submit(self.sink.close)
        self.writer.shutdown()
        await asyncio.wait_for(asyncio.wrap_future(closing), timeout=timeout)

    def _timed_write(self, records: list[Record]) -> None:
        """The sink's write, in the writer thread, counting that thread's CPU time."""
        started = thread_time()
        try:
            self.sink.write(records)
        finally:
            self.stats.writer_cpu_seconds += thread_time() - started

    # -- flushing ----------------------------------------------------------------------

    async def flush(self) -> int:
        """Write everything that changed since the last successful write; returns the
        number of records written."""
        async with self._lock:
            return await self._flush()

    def _held(self, started: float) -> None:
        block = perf_counter() - started
        self.stats.loop_seconds += block
        self.stats.blocks += 1
        self.stats.longest_block_seconds = max(self.stats.longest_block_seconds, block)

    async def _chunk_done(self, started: float) -> float:
        """A chunk of groups was taken: once the current block has held the loop for
        :data:`SLICE_SECONDS`, give it back; returns when the current block started."""
        if perf_counter() - started < SLICE_SECONDS:
            return started
        return await self._give_back(started)

    async def _give_back(self, started: float) -> float:
        """End a block of the event loop; returns when the next one starts."""
        self._held(started)
        await asyncio.sleep(0)
        return perf_counter()

    async def _flush(self) -> int:
        tracker = self.tracker
        started = perf_counter()
        self.stats.flushes += 1
        self.accounting.advance(time())
        records: list[Record] = []
        paced = not self.unpaced
        dirty = tracker.take_changed(paced=paced)
        adopted: list[TaskGroup] = []
        unread: list[TaskGroup] = []
        spans: set[str] = set()
        finished: list[GroupUse] = []
        computations: set[ComputationTrack] = set()
        prefixes: set[str] = set()
        span_tracks: dict[str, SpanTrack] = {}
        done_computations: list[ComputationTrack] = []
        try:
            # the groups new graphs brought are adopted; then the groups of spans seen
            # for the first time, new groups (their spans' figures take in their
            # waiting tasks), then the changed ones are read; the event loop is given
            # back between slices
            while tracker.to_adopt:
                tracker.adopt_waiting(GROUPS_PER_CHUNK)
                started = await self._chunk_done(started)
            adopted, tracker.adopted = tracker.adopted, []
            self.spans.discover(self.scheduler)
            unread, self.spans.unread = self.spans.unread, []
            # a new span's groups are new too, mostly: each read once
            in_unread = set(unread)
            to_read = unread + [tg for tg in adopted if tg not in in_unread]
            for first in range(0, len(to_read), GROUPS_PER_CHUNK):
                part = to_read[first : first + GROUPS_PER_CHUNK]
                spans |= self.spans.groups_changed(self.scheduler, part)
                started = await self._chunk_done(started)
            for first in range(0, len(dirty), GROUPS_PER_CHUNK):
                uses = dirty[first : first + GROUPS_PER_CHUNK]
                touched, done, read = tracker.snapshot_groups(
                    uses, self.scheduler, records, paced=paced
                )
                spans |= self.spans.groups_changed(self.scheduler, (use.group for use in read))
                spans |= touched
                finished += done
                started = await self._chunk_done(started)
            self.stats.last_groups_snapshotted = len(dirty)
            self.stats.groups_snapshotted += len(dirty)
            computations, tracker.dirty_computations = tracker.dirty_computations, set()
            for track in computations:
                record, done_now = tracker.computation_record(track)
                records.append(record)
                if done_now and track is not tracker.newest:
                    done_computations.append(track)
            prefixes, tracker.dirty_prefixes = tracker.dirty_prefixes, set()
            records += tracker.prefix_records(prefixes)
            span_tracks = self.spans.snapshot(self.scheduler, spans, records, paced=paced)
        except Exception as exc:  # a bug here must not stop the buffered records
            self.on_error("snapshot", exc)
            tracker.not_written(dirty)
            tracker.adopted[:0] = adopted  # taking a group in again is harmless
            self.spans.unread[:0] = unread
            span_tracks, done_computations, finished = {}, [], []
        records.append(self.accounting.record(tracker.totals))
        records += self.buffer
        self.buffer = []
        self._held(started)
        try:
            await asyncio.wrap_future(self.writer.submit(self._timed_write, records))
        except StoreLost as exc:
            self._store_lost(exc)
            return 0
        except Exception as exc:
            # everything snapshotted is taken again next time
            tracker.not_written(dirty)
            tracker.dirty_computations |= computations
            tracker.dirty_prefixes |= prefixes
            self._write_failed(exc, [r for r in records if isinstance(r, _APPEND_ONLY)])
            return 0
        # what is stored can be let go: a block of the loop of its own, in slices too
        started = perf_counter()
        for first in range(0, len(finished), GROUPS_PER_CHUNK):
            stored = finished[first : first + GROUPS_PER_CHUNK]
            tracker.drop(stored)
            self.spans.let_go(self.scheduler, (use.group for use in stored))
            started = await self._chunk_done(started)
        tracker.computations_written(done_computations)
        self.spans.remember(span_tracks)
        self.stats.records_written += len(records)
        self.stats.last_write_error = None
        self._held(started)
        return len(records)

    def _write_failed(self, exc: Exception, unwritten: list[Record]) -> None:
        # Append-only records go back to the buffer, within its bound (oldest first out)
        stats = self.stats
        stats.write_failures += 1
        stats.last_write_error = f"{type(exc).__name__}: {exc}"
        if stats.write_failures <= _LOGGED_FAILURES:
            logger.warning(
                "daskscope could not write to %s: %s (kept in memory; will retry)",
                self.destination,
                exc,
            )
        self.buffer[:0] = unwritten
        overflow = len(self.buffer) - self.max_buffered_records
        if overflow > 0:
            del self.buffer[:overflow]
            stats.records_dropped += overflow

    def _store_lost(self, exc: Exception) -> None:
        """The store went away (e.g. its file was deleted) and the sink made a new one:
        write again everything still known — the cluster, its live groups, computations,
        prefixes and spans, and every event and error."""
        self.stats.write_failures += 1
        self.stats.last_write_error = f"{type(exc).__name__}: {exc}"
        logger.warning(
            "daskscope: %s; writing again what this cluster's recorder still holds "
            "(task groups already finished survive only in the totals)",
            exc,
        )
        self.write_all_again()
        kept = {id(r) for r in self.history}
        self.buffer = list(self.history) + [r for r in self.buffer if id(r) not in kept]

    def write_all_again(self) -> None:
        """Make the next flush write every live group, computation, prefix and span,
        as if none had been written."""
        tracker = self.tracker
        tracker.not_written(tracker.current.values())
        tracker.dirty_computations.update(tracker.computations.values())
        tracker.dirty_prefixes.update(tracker.prefix_groups)
        self.spans.forget()
