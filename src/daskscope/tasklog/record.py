"""The task log's capture: every task execution the scheduler reports, kept (issue 13;
the path from here to the reads: :mod:`daskscope.tasklog`).

The transition hook appends each execution to a buffer as one tuple of what Dask handed
it (:data:`~daskscope.tasklog.segments.Execution`: no record, no text, no pyarrow on the event
loop). Every ``segment_executions`` executions, and at each flush,
the buffers are sealed and handed to the writer thread, which encodes them into
:class:`~daskscope.model.TaskSegmentRecord` s; a flush then writes the encoded segments
after the flusher's own records (a server takes a cluster's records once it knows the
cluster).

Memory stays bounded whatever the task count: one open buffer, at most
``max_pending_segments`` sealed ones waiting for the writer, and encoded segments kept
for a retry up to ``max_unwritten_executions``. Beyond those, executions are dropped and
counted (``executions_dropped``), never buffered without bound.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from time import monotonic, thread_time
from typing import TYPE_CHECKING, Any

from daskscope.tasklog.repeats import RepeatFilter
from daskscope.tasklog.segments import RETRIED, Execution, encode_segment, execution

if TYPE_CHECKING:
    from distributed.scheduler import TaskState

    from daskscope.collector.sink import Sink
    from daskscope.collector.writer import WriterThread
    from daskscope.model import TaskSegmentRecord

__all__ = ["TaskLog", "TaskLogStats"]

logger = logging.getLogger("daskscope")


#: (stimulus id, key, group name) of no dependency
_NO_TRIGGER = (None, None, None)


def _prepare_encoder() -> None:
    """(writer thread) Encode two made-up executions and drop them. The first segment a
    process encodes also pays for importing pyarrow and setting up its arrays, IPC
    streams and zstd: about 55 ms of CPU once, which fell on the first segment of the
    first cluster recorded (2 to 3 µs a task more in ``bench/overhead.py``'s first pair
    of 20,000 tasks). Paid here, once, at the start instead, like the sink's opening:
    nothing is written and nothing counted."""
    now = 1.8e9
    made_up = [
        execution("x-0", "x", "x", "tcp://127.0.0.1:1", 1,
                  [{"action": "compute", "start": now, "stop": now + 1e-3}],
                  erred=False, nbytes=8, computation=None, span=None),
        execution(("y-0", 1), "y-0", "y", "tcp://127.0.0.1:1", 1,
                  [{"action": "transfer", "start": now, "stop": now + 1e-3,
                    "source": "tcp://127.0.0.1:2"},
                   {"action": "compute", "start": now + 1e-3, "stop": now + 2e-3}],
                  erred=False, nbytes=8, computation="c", span="s", trigger=("x-0", "x")),
    ]  # fmt: skip
    try:
        encode_segment("", 0, made_up)
    except Exception:  # the real segments will say what is wrong, and be counted
        logger.debug("daskscope: the task-log encoder could not be prepared", exc_info=True)


@dataclass(slots=True)
class TaskLogStats:
    executions: int = 0
    #: executions lost because the writer fell behind (or the store kept failing)
    executions_dropped: int = 0
    #: reports of an execution already recorded (:mod:`daskscope.tasklog.repeats`)
    executions_repeated: int = 0
    segments_encoded: int = 0
    segments_written: int = 0
    bytes_encoded: int = 0
    #: CPU time of the writer thread encoding segments, and handing them to the sink
    encode_cpu_seconds: float = 0.0
    write_cpu_seconds: float = 0.0
    write_failures: int = 0
    last_write_error: str | None = None


class TaskLog:
    """Runs on the scheduler's event loop, except :meth:`_encode` and :meth:`_write`
    (in the recorder's writer thread, which alone touches ``_ready``)."""

    def __init__(
        self,
        cluster_id: str,
        *,
        segment_executions: int = 50_000,
        max_pending_segments: int = 4,
        max_unwritten_executions: int = 2_000_000,
        seal_after: float = 30.0,
    ) -> None:
        self.cluster_id = cluster_id
        self.segment_executions = segment_executions
        self.max_pending_segments = max_pending_segments
        self.max_unwritten_executions = max_unwritten_executions
        self.seal_after = seal_after
        self.rows: list[Execution] = []
        #: when a flush first saw the open buffer hold executions (not the hook: no clock
        #: read per task)
        self._buffer_seen_at: float | None = None
        self.stats = TaskLogStats()
        self.writer: WriterThread | None = None
        #: the recorder's sink as it is now (a sink may be replaced while recording)
        self.sink: Callable[[], Sink] | None = None
        # sealed vs encoded: each counter is written by one thread only
        self._sealed = 0
        self._encoded = 0
        # writer thread only: the next segment number, segments waiting to be written
        self._next_number = 0
        self._ready: list[TaskSegmentRecord] = []
        self._repeats = RepeatFilter(capacity=2 * segment_executions)
        #: the last execution that ended: (stimulus id, key, group name). A task that
        #: becomes ready in the same stimulus was waiting for it: Dask makes a task's
        #: dependents ready in the transitions of the finish of its last dependency.
        self._last_done: tuple[Any, Any, str] | None = None
        #: tasks ready or running -> that last execution when it made them ready (the
        #: dependency they waited for last); bounded by the tasks ready or running
        self.triggers: dict[Any, tuple[Any, Any, str]] = {}

    def attach(self, writer: WriterThread, sink: Callable[[], Sink]) -> None:
        """Write through the recorder's writer thread into its sink."""
        self.writer, self.sink = writer, sink

    def prepare(self) -> None:
        """Make the encoder ready in the writer thread now, at the recorder's start, as
        the sink is opened then (:func:`_prepare_encoder`)."""
        if self.writer is not None:
            self.writer.submit(_prepare_encoder)

    # -- hot path (transition hook) ------------------------------------------------------

    def task_ready(self, key: Any, stimulus_id: Any) -> None:
        """``key`` left "waiting" (all its dependencies in memory): remember the
        dependency whose end made it ready, if it ended in this very stimulus (else the
        task was ready when its graph came)."""
        last = self._last_done
        if last is not None and last[0] == stimulus_id:
            self.triggers[key] = last

    def task_forgotten(self, key: Any) -> None:
        self.triggers.pop(key, None)

    def task_done(
        self,
        key: Any,
        ts: TaskState,
        kwargs: Mapping[str, Any],
        computation_id: str | None,
        *,
        erred: bool,
    ) -> None:
        """One execution of ``ts`` ended (processing -> memory or erred): one tuple
        appended (:func:`daskscope.tasklog.segments.execution`, inlined: this runs per task)."""
        startstops = kwargs.get("startstops")
        if not startstops:  # Dask always says; a task without any time has no place
            return
        group = ts.group
        if len(startstops) == 1 and (only := startstops[0])["action"] == "compute":
            start, stop, actions = only["start"], only["stop"], None
        else:
            start = stop = None
            actions = startstops
        _, trigger, trigger_group = self.triggers.pop(key, _NO_TRIGGER)
        self._last_done = (kwargs.get("stimulus_id"), key, group.name)
        rows = self.rows
        rows.append(
            (key, group.name, ts.prefix.name, kwargs.get("worker"), kwargs.get("thread"),
             start, stop, actions, erred, kwargs.get("nbytes"), computation_id, group.span_id,
             trigger, trigger_group)
        )  # fmt: skip
        if len(rows) >= self.segment_executions:
            self.seal()

    def task_retried(
        self, key: Any, ts: TaskState, message: Mapping[str, Any], computation_id: str | None
    ) -> None:
        """An attempt of ``ts`` failed and Dask runs it again (``retries=``): one row of
        state :data:`~daskscope.tasklog.segments.RETRIED` from the worker's task-erred
        ``message`` (rare: off the per-task path). The task keeps its trigger for its
        next attempt, and a failed attempt makes no other task ready."""
        startstops = message.get("startstops")
        if not startstops:
            return
        group = ts.group
        _, trigger, trigger_group = self.triggers.get(key, _NO_TRIGGER)
        self.rows.append(
            execution(
                key,
                group.name,
                ts.prefix.name,
                message.get("worker"),
                message.get("thread"),
                startstops,
                erred=RETRIED,
                nbytes=None,
                computation=computation_id,
                span=group.span_id,
                trigger=(trigger, trigger_group) if trigger_group is not None else None,
            )
        )
        if len(self.rows) >= self.segment_executions:
            self.seal()

    # -- sealing and writing --------------------------------------------------------------

    @property
    def pending_segments(self) -> int:
        """Sealed buffers the writer thread has not encoded yet."""
        return self._sealed - self._encoded

    def seal(self) -> None:
        """Hand the open buffer to the writer thread for encoding (or drop it, counted,
        when the writer is too far behind)."""
        rows = self.rows
        if not rows:
            return
        self.rows = []
        self._buffer_seen_at = None
        self.stats.executions += len(rows)
        if self.writer is None or self.pending_segments >= self.max_pending_segments:
            self._dropped(len(rows), "the writer is behind")
            return
        self._sealed += 1
        self.writer.submit(self._encode, rows)

    async def flush(self, *, every_task: bool = True) -> int:
        """Seal what is buffered and write every encoded segment; returns the number of
        segments written. With ``every_task=False`` a buffer smaller than a segment is
        sealed only once a flush has seen it hold executions for ``seal_after`` seconds:
        encoding has a fixed cost a segment, which small segments made most of the task
        log's cost (one a second at the default flush interval)."""
        if self.writer is None:
            return 0
        if every_task or self._due():
            self.seal()
        return int(await asyncio.wrap_future(self.writer.submit(self._write)))

    def _due(self) -> bool:
        if not self.rows:
            return False
        now = monotonic()
        if self._buffer_seen_at is None:
            self._buffer_seen_at = now
        return now - self._buffer_seen_at >= self.seal_after

    def _dropped(self, executions: int, why: str) -> None:
        if not self.stats.executions_dropped:
            logger.warning(
                "daskscope: the task log dropped %d task executions (%s); the aggregates "
                "still count them. The recorder's info reports task_log_dropped.",
                executions,
                why,
            )
        self.stats.executions_dropped += executions

    def _encode(self, rows: list[Execution]) -> None:
        """(writer thread) The sealed buffer as segment records, kept for the next write."""
        started = thread_time()
        try:
            records = encode_segment(self.cluster_id, self._next_number, rows, self._repeats)
        except Exception:
            self._dropped(len(rows), "a segment could not be encoded")
            logger.exception("daskscope: a task-log segment could not be encoded")
            return
        finally:
            self._encoded += 1
            self.stats.encode_cpu_seconds += thread_time() - started
        self.stats.executions_repeated += len(rows) - sum(r.executions for r in records)
        self._next_number += len(records)
        self.stats.segments_encoded += len(records)
        self.stats.bytes_encoded += sum(len(r.payload) + len(r.key_filter) for r in records)
        self._ready += records
        waiting = sum(r.executions for r in self._ready)
        while waiting > self.max_unwritten_executions and len(self._ready) > 1:
            oldest = self._ready.pop(0)
            waiting -= oldest.executions
            self._dropped(oldest.executions, "the store could not be written for long")

    def _write(self) -> int:
        """(writer thread) Write the encoded segments; on failure keep them for the next."""
        if not self._ready or self.sink is None:
            return 0
        records, self._ready = self._ready, []
        started = thread_time()
        try:
            self.sink().write(list(records))
        except Exception as exc:
            self._ready[:0] = records
            self.stats.write_failures += 1
            self.stats.last_write_error = f"{type(exc).__name__}: {exc}"
            return 0
        finally:
            self.stats.write_cpu_seconds += thread_time() - started
        self.stats.segments_written += len(records)
        self.stats.last_write_error = None
        return len(records)

    def status(self) -> dict[str, Any]:
        """What the recorder's info reports of the task log."""
        s = self.stats
        return {
            "task_log_executions": s.executions + len(self.rows),
            "task_log_dropped": s.executions_dropped,
            "task_log_repeated": s.executions_repeated,
            "task_log_segments_written": s.segments_written,
            "task_log_pending_segments": self.pending_segments,
            "task_log_buffered": len(self.rows),
            "task_log_writer_cpu_seconds": s.encode_cpu_seconds + s.write_cpu_seconds,
            "task_log_write_failures": s.write_failures,
        }
