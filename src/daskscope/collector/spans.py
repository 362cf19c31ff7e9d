"""Which of Dask's spans changed since they were last written, and their records.

A span's record covers its subtree (states, bytes, durations), and its fine metrics
keep arriving with the workers' heartbeats after it finished; so a span is written again
when one of its groups changed, when its own fine metrics changed, or while it runs,
and let go once it is done and its metrics have settled.

Dask computes a span's states and durations over every task group the span ever had,
each time they are asked for (40,000 groups: a quarter of a second a record). Here each
span's figures are kept by deltas instead: a group that changed since the last flush
replaces what it added to its span before (:class:`GroupShare`), so a flush costs what
changed, not what the span holds. A span's own groups are read whole once, when it is
first seen, in slices like the rest of a flush. A record is still paced by its cost
(taken again only after a pause in proportion to what it cost last time), which now
matters only for a span of very many sub-spans.

The last flush, at close, writes every span whose record still counts a task that is not
forgotten once more, with all its tasks forgotten and the span done: that is what Dask's
spans say once the closing scheduler has dropped its clients, which happens after the
plugins' last hook (:attr:`SpanTracker.closing`).
"""

from __future__ import annotations

import bisect
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from time import perf_counter
from typing import TYPE_CHECKING, Any

from distributed.metrics import time

from daskscope.collector import dask_adapter, snapshot
from daskscope.collector.accounting import threads_integral
from daskscope.model import Record, SpanRecord

if TYPE_CHECKING:
    from distributed.scheduler import Scheduler, TaskGroup
    from distributed.spans import Span

__all__ = ["GroupShare", "SpanFigures", "SpanTrack", "SpanTracker", "group_share"]

#: A finished span's fine metrics still arrive with the workers' next heartbeats: keep
#: comparing them for this long after it finished.
SETTLE_SECONDS = 30.0
#: A span record costing t seconds of event loop is taken at most every t times this
PACING = 50


@dataclass(slots=True)
class SpanTrack:
    """What was last written of one span."""

    own_metrics: dict[tuple[Hashable, ...], float]
    done: bool
    written_at: float
    #: its record counts a task the scheduler still held (not forgotten), or is not done:
    #: the last flush at close writes it again (:attr:`SpanTracker.closing`)
    held: bool = True


#: What one task group added to its span's figures when it was last read: (states,
#: nbytes, durations, duration, start, stop, done), states and durations as (name,
#: value) pairs. One lives as long as its group, so it is a plain tuple of atoms: Python's
#: garbage collector stops tracking it within a collection or three, most often young
#: ones (inner tuples first, then the one holding them). A class instance, a named tuple
#: or a dict in it would stay tracked and add to every full pass over the scheduler's
#: heap (issue 28).
GroupShare = tuple[
    tuple[tuple[str, int], ...], int, tuple[tuple[str, float], ...], float, float, float, bool
]


def group_share(tg: TaskGroup) -> GroupShare:
    return (
        tuple((state, n) for state, n in tg.states.items() if n),
        tg.nbytes_total,
        tuple(tg.all_durations.items()),
        tg.duration,
        tg.start,
        tg.stop,
        tg.done,
    )


@dataclass(slots=True)
class SpanFigures:
    """A span's figures over a set of task groups (its own, or its subtree's), the sums
    Dask's ``Span`` computes by walking them."""

    states: dict[str, int] = field(default_factory=dict)
    nbytes: int = 0
    durations: dict[str, float] = field(default_factory=dict)
    duration: float = 0.0
    #: earliest start of a group that started (0: none yet); Dask's group starts only
    #: move earlier and stops only later, so the extremes need no deltas
    start: float = 0.0
    stop: float = 0.0
    not_done: int = 0

    def take(self, new: GroupShare, old: GroupShare | None) -> None:
        """Replace what a group added (``old``, None if nothing yet) by ``new``."""
        states, durations = self.states, self.durations
        new_states, nbytes, new_durations, duration, start, stop, done = new
        for state, n in new_states:
            states[state] = states.get(state, 0) + n
        for activity, seconds in new_durations:
            durations[activity] = durations.get(activity, 0.0) + seconds
        self.nbytes += nbytes
        self.duration += duration
        self.not_done += not done
        if old is not None:
            old_states, old_nbytes, old_durations, old_duration, _, _, old_done = old
            for state, n in old_states:
                states[state] -= n
            for activity, seconds in old_durations:
                durations[activity] -= seconds
            self.nbytes -= old_nbytes
            self.duration -= old_duration
            self.not_done -= not old_done
        if start and (not self.start or start < self.start):
            self.start = start
        self.stop = max(self.stop, stop)

    def add(self, other: SpanFigures) -> None:
        for state, n in other.states.items():
            self.states[state] = self.states.get(state, 0) + n
        for activity, seconds in other.durations.items():
            self.durations[activity] = self.durations.get(activity, 0.0) + seconds
        self.nbytes += other.nbytes
        self.duration += other.duration
        self.not_done += other.not_done
        if other.start and (not self.start or other.start < self.start):
            self.start = other.start
        self.stop = max(self.stop, other.stop)


def active_cpu_seconds(
    threads_history: list[tuple[float, int]], enqueued: float, stop: float
) -> float:
    """Thread-seconds the cluster had from ``enqueued`` to ``stop`` (Dask's
    ``Span.active_cpu_seconds`` for a span that is not a merge of others)."""
    if stop <= enqueued or not threads_history:
        return 0.0
    # the threads when the span was enqueued: the last change at or before it
    first = max(0, bisect.bisect_right(threads_history, (enqueued, float("inf"))) - 1)
    changes = [(max(enqueued, t), n) for t, n in threads_history[first:] if t < stop]
    return threads_integral(changes, stop)


class SpanTracker:
    """Keeps each span's figures and remembers what was written of it; runs on the
    scheduler's event loop."""

    def __init__(self, cluster_id: str, *, max_code_chars: int) -> None:
        self.cluster_id = cluster_id
        self.max_code_chars = max_code_chars
        #: spans as last written
        self.written: dict[str, SpanTrack] = {}
        #: when a paced span may be taken again; what changed meanwhile waits its turn
        self.due: dict[str, float] = {}
        self.waiting: set[str] = set()
        #: each span's figures over its own groups (children's are added at record time)
        self.figures: dict[str, SpanFigures] = {}
        #: what each group that may still change added to its span's figures
        self.shares: dict[TaskGroup, GroupShare] = {}
        #: groups of spans seen for the first time, still to be read into their figures
        self.unread: list[TaskGroup] = []
        #: groups read into the figures so far (what the tests and the bench count)
        self.groups_read = 0
        #: the scheduler is closing (set before the last flush): it forgets every task it
        #: still holds as it closes its clients' connections, after that flush (Dask's
        #: spans then count them all "forgotten"), so the last flush writes each span's
        #: tasks as forgotten, and the span done
        self.closing = False
        #: where the next fine-metric interval starts: where the last one written
        #: stopped (None before the first)
        self.interval_start: float | None = None
        #: a metric's drop that Dask's subtree arithmetic can show (own metrics without
        #: ``Span._cumulative_worker_metrics``), held back until gains outweigh it, so an
        #: interval's value is never negative and the intervals still add up to the totals
        self.carry: dict[tuple[str, str, str], float] = {}
        #: (interval stop, carry) of the interval in the records :meth:`snapshot` made,
        #: taken on by :meth:`remember` once they are stored
        self._pending_interval: tuple[float, dict[tuple[str, str, str], float]] | None = None

    # -- figures, kept by deltas ---------------------------------------------------------

    def discover(self, scheduler: Scheduler) -> None:
        """Give each span not seen before its figures, and queue its own groups to be
        read (:attr:`unread`, in slices by the flush): whatever it held before the
        recorder saw it, e.g. groups from before the recorder started."""
        for span_id, span in dask_adapter.spans(scheduler).items():
            if span_id not in self.figures:
                self.figures[span_id] = SpanFigures()
                self.unread.extend(span.groups)

    def groups_changed(self, scheduler: Scheduler, groups: Iterable[TaskGroup]) -> set[str]:
        """Take the groups' current figures into their spans'; returns those spans' ids."""
        touched: set[str] = set()
        for tg in groups:
            span_id = tg.span_id
            if span_id is None:
                continue
            figures = self.figures.get(span_id)
            if figures is None:  # a span that came after discover(): new, nothing to walk
                figures = self.figures[span_id] = SpanFigures()
            self._read(tg, figures)
            touched.add(span_id)
        return touched

    def _read(self, tg: TaskGroup, figures: SpanFigures) -> None:
        new = group_share(tg)
        figures.take(new, self.shares.get(tg))
        self.shares[tg] = new
        self.groups_read += 1

    def let_go(self, scheduler: Scheduler, groups: Iterable[TaskGroup]) -> None:
        """Forget the shares of groups that can no longer change (forgotten and done):
        their figures stay in their spans', and memory stays bounded by what is alive."""
        live = scheduler.task_groups
        for tg in groups:
            if live.get(tg.name) is not tg and tg.done:
                self.shares.pop(tg, None)

    def _subtree(self, span: Span) -> SpanFigures:
        out = SpanFigures()
        pending = [span]
        while pending:
            node = pending.pop()
            figures = self.figures.get(node.id)
            if figures is not None:  # else: seen first now, its groups read next flush
                out.add(figures)
            pending.extend(node.children)
        return out

    # -- records -------------------------------------------------------------------------

    def snapshot(
        self, scheduler: Scheduler, changed: set[str], records: list[Record], *, paced: bool
    ) -> dict[str, SpanTrack]:
        """Append the records of the spans whose groups (``changed``: span ids), states
        or fine metrics changed; returns what to remember of them once they are written
        (:meth:`remember`). ``paced=False``: every span that changed is taken now."""
        self._pending_interval = None
        spans = dask_adapter.spans(scheduler)
        if not spans:
            return {}
        # A span's states and durations cover its subtree: a change shows in the ancestors
        for span_id in list(changed):
            span = spans.get(span_id)
            while span is not None:
                changed.add(span.id)
                span = span.parent
        changed |= self.waiting
        self.waiting = set()
        if self.closing:  # what the store holds of a span's states is final now
            changed.update(span_id for span_id, t in self.written.items() if t.held)
        now = time()
        history = scheduler.total_nthreads_history
        out: dict[str, SpanTrack] = {}
        gains: dict[tuple[str, str, str], float] = {}
        first_enqueued = now
        for span_id, span in list(spans.items()):
            if paced and self.due.get(span_id, 0.0) > now:
                if span_id in changed or span_id not in self.written:
                    self.waiting.add(span_id)
                continue
            track = self.written.get(span_id)
            settled = track is not None and track.done and now - track.written_at > SETTLE_SECONDS
            if settled and span_id not in changed:
                continue
            own = dask_adapter.own_metrics(span)
            metrics_changed = track is None or own != track.own_metrics
            if not (metrics_changed or span_id in changed or track is None or not track.done):
                continue
            started = perf_counter()
            record = self._record(span, now, history)
            self.due[span_id] = now + (perf_counter() - started) * PACING
            records.append(record)
            if metrics_changed:
                # only the metrics that moved (a running span's heartbeats touch a few
                # of its hundreds of metrics; each record costs an id to make and write)
                before = track.own_metrics if track is not None else {}
                moved = {k: v for k, v in own.items() if before.get(k) != v}
                records.extend(
                    snapshot.span_metric_records(span_id, moved, cluster_id=self.cluster_id)
                )
                snapshot.add_metric_gains(gains, moved, before)
                first_enqueued = min(first_enqueued, span.enqueued)
            written_at = track.written_at if track and track.done and not metrics_changed else now
            held = not record.done or any(state != "forgotten" for state in record.states)
            out[span_id] = SpanTrack(dict(own), record.done, written_at, held)
        self._interval_records(gains, first_enqueued, now, records)
        return out

    def _interval_records(
        self,
        gains: dict[tuple[str, str, str], float],
        first_enqueued: float,
        now: float,
        records: list[Record],
    ) -> None:
        """Append the fine-metric interval since the last one written: what each
        ``(context, activity, unit)`` gained over every span, the drops held back."""
        if not gains:
            return
        # the first interval starts with the earliest span whose metrics it holds
        start = self.interval_start if self.interval_start is not None else first_enqueued
        values, carry = snapshot.interval_values(gains, self.carry)
        rows = snapshot.fine_metric_interval_records(
            values, started_at=min(start, now), stopped_at=now, cluster_id=self.cluster_id
        )
        if rows or carry != self.carry:
            records.extend(rows)
            # a flush that only held back a drop writes no interval: the next one with
            # rows still starts where the last one stopped
            self._pending_interval = (now if rows else start, carry)

    def _record(self, span: Span, now: float, history: Any) -> SpanRecord:
        figures = self._subtree(span)
        done = figures.not_done == 0
        states = figures.states
        if self.closing:  # every task of a closed scheduler is forgotten
            done = True
            states = {"forgotten": sum(states.values())}
        # as Dask's Span: a start absorbs clock skew against the enqueue time, and a
        # span that runs has "now" for its stop
        start = max(figures.start, span.enqueued) if figures.start else 0.0
        stop = max(figures.stop if done else now, span.enqueued)
        return snapshot.span_record(
            span,
            cluster_id=self.cluster_id,
            max_code_chars=self.max_code_chars,
            figures=snapshot.SpanSums(
                states=states,
                nbytes_total=figures.nbytes,
                durations=figures.durations,
                duration_s=figures.duration,
                started_at=start,
                stopped_at=stop,
                done=done,
                active_cpu_seconds=active_cpu_seconds(list(history), span.enqueued, stop),
            ),
        )

    def remember(self, tracks: dict[str, SpanTrack]) -> None:
        """The records of :meth:`snapshot` are stored."""
        self.written.update(tracks)
        if self._pending_interval is not None:
            self.interval_start, self.carry = self._pending_interval
            self._pending_interval = None

    def forget(self) -> None:
        """Write every span again at the next snapshot (the store was lost)."""
        self.written.clear()
