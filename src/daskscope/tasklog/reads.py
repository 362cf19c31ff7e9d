"""Reading a cluster's task-log segments from the store, for the timeline's reads
(:mod:`daskscope.tasklog.window`, :mod:`daskscope.tasklog.lookups`): which segments
overlap a time range, their summaries, key filters and decoded columns, each kept in a
small cache of the Store (a segment never changes once written: the same id is the same
executions; :func:`reading` opens a connection with the store's caches); and which of a
decoded segment's executions a read wants, as :class:`TaskExecution` s.

Segments carry their time range, their groups and a filter of their keys, so a read
decodes only the ones that may hold what it asks.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import sqlalchemy as sa

import daskscope.store.schema as s
from daskscope.store.database import Database, as_engine
from daskscope.store.errors import UnknownCluster
from daskscope.store.groups import span_scope_ids
from daskscope.tasklog.forms import COMPUTE, TaskAction, TaskExecution
from daskscope.tasklog.segments import STATES, DecodedSegment, decode_segment
from daskscope.tasklog.summaries import Summary, read_summary

__all__ = [
    "LogReader",
    "LogVersion",
    "SegmentCaches",
    "SegmentRow",
    "check_cluster",
    "execution_at",
    "log_version",
    "name_at",
    "passes_all",
    "reading",
    "selected",
    "span_ids",
]

#: (segments, newest stop) of a cluster's task log: figures read from the whole log
#: stay true until it changes (a running cluster's log grows; a finished one's never does)
LogVersion = tuple[int, float | None]


def log_version(store: Database | sa.Engine, cluster_id: str) -> LogVersion:
    """How much the cluster's task log holds, read from the segments' index alone."""
    t = s.task_segments.c
    query = sa.select(sa.func.count(), sa.func.max(t.last_stop)).where(t.cluster_id == cluster_id)
    with as_engine(store).connect() as conn:
        count, newest = conn.execute(query).one()
    return int(count), None if newest is None else float(newest)


# -- reading segments --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SegmentRow:
    id: str
    first_start: float
    last_stop: float
    executions: int
    groups: list[str]


class _Lru:
    """Values by key, least recently used first out, bounded by a total weight."""

    def __init__(self, max_weight: int) -> None:
        self.max_weight = max_weight
        self._held: OrderedDict[str, tuple[Any, int]] = OrderedDict()
        self._weight = 0
        self._lock = threading.Lock()

    def get(self, key: str) -> Any:
        with self._lock:
            found = self._held.get(key)
            if found is None:
                return None
            self._held.move_to_end(key)
            return found[0]

    def put(self, key: str, value: Any, weight: int) -> None:
        with self._lock:
            if key in self._held:
                return
            self._held[key] = (value, weight)
            self._weight += weight
            while self._weight > self.max_weight and len(self._held) > 1:
                _, (_, dropped) = self._held.popitem(last=False)
                self._weight -= dropped


@dataclass(frozen=True, slots=True)
class SegmentCaches:
    """What a Store keeps of its task log between reads (``store.kept``, so a closed
    store drops it and two stores never share it), by segment id or cluster id: a
    segment never changes once written (its id is its cluster and number, and writing
    it again writes the same executions)."""

    decoded: _Lru = field(default_factory=lambda: _Lru(max_weight=2_000_000))  # executions
    summaries: _Lru = field(default_factory=lambda: _Lru(max_weight=512 * 2**20))  # bytes
    filters: _Lru = field(default_factory=lambda: _Lru(max_weight=64 * 2**20))  # bytes
    rows: _Lru = field(default_factory=lambda: _Lru(max_weight=1_000_000))  # segments listed


@contextmanager
def reading(store: Database | sa.Engine) -> Iterator[LogReader]:
    """A connection to the store with its task-log caches (an engine alone has no store
    to keep them in: its reads keep nothing past the call)."""
    if isinstance(store, Database):
        caches = store.kept("tasklog.segments", SegmentCaches)
    else:
        caches = SegmentCaches()
    with as_engine(store).connect() as conn:
        yield LogReader(conn, caches)


def check_cluster(conn: sa.Connection, cluster_id: str) -> None:
    """Raises :class:`~daskscope.store.UnknownCluster` when the store has no such cluster
    (a cluster without a task log reads as an empty one)."""
    found = conn.execute(sa.select(s.clusters.c.id).where(s.clusters.c.id == cluster_id))
    if found.first() is None:
        raise UnknownCluster(cluster_id)


@dataclass(frozen=True, slots=True)
class LogReader:
    """A connection and the store's task-log caches: the segments' reads."""

    conn: sa.Connection
    caches: SegmentCaches

    def segment_rows(
        self, cluster_id: str, start: float | None = None, stop: float | None = None
    ) -> list[SegmentRow]:
        """The cluster's segments overlapping ``[start, stop]``, oldest first.

        Read once per state of the log (its segment count and newest start, which the index
        answers alone) and kept: a segment's groups lie after its payload in the row, so
        reading them walks the payload's pages (a quarter of a second at 200 segments)."""
        t = s.task_segments.c
        state = tuple(
            self.conn.execute(
                sa.select(sa.func.count(), sa.func.max(t.first_start)).where(
                    t.cluster_id == cluster_id
                )
            ).one()
        )
        held = self.caches.rows.get(cluster_id)
        if held is None or held[0] != state:
            query = sa.select(t.id, t.first_start, t.last_stop, t.executions, t.groups).where(
                t.cluster_id == cluster_id
            )
            rows = self.conn.execute(query.order_by(t.first_start, t.segment))
            held = (state, [SegmentRow(r[0], r[1], r[2], r[3], list(r[4] or ())) for r in rows])
            self.caches.rows.put(cluster_id, held, len(held[1]) + 1)
        return [
            r
            for r in held[1]
            if (stop is None or r.first_start <= stop) and (start is None or r.last_stop >= start)
        ]

    def key_filters(self, ids: list[str]) -> dict[str, bytes]:
        """The key filters of the segments ``ids``: from the cache, else read (and kept)."""
        found: dict[str, bytes] = {}
        missing = []
        for segment_id in ids:
            value = self.caches.filters.get(segment_id)
            if value is None:
                missing.append(segment_id)
            else:
                found[segment_id] = value
        t = s.task_segments.c
        for first in range(0, len(missing), 500):
            query = sa.select(t.id, t.key_filter).where(t.id.in_(missing[first : first + 500]))
            for segment_id, value in self.conn.execute(query):
                found[segment_id] = bytes(value or b"")
                self.caches.filters.put(segment_id, found[segment_id], len(found[segment_id]) + 100)
        return found

    def summaries(self, rows: list[SegmentRow]) -> dict[str, Summary]:
        """The segments' summaries, read and parsed once per store."""
        found: dict[str, Summary | None] = {}
        missing = []
        for r in rows:
            held = self.caches.summaries.get(r.id)
            if held is None:
                missing.append(r.id)
            else:
                found[r.id] = held[0]
        t = s.task_segments.c
        for first in range(0, len(missing), 200):
            query = sa.select(t.id, t.summary).where(t.id.in_(missing[first : first + 200]))
            for segment_id, blob in self.conn.execute(query):
                summary = read_summary(bytes(blob or b""))
                found[segment_id] = summary
                weight = 100 if summary is None else summary.nbytes
                self.caches.summaries.put(segment_id, (summary,), weight)
        return {segment_id: summary for segment_id, summary in found.items() if summary is not None}

    def decoded(self, rows: list[SegmentRow]) -> Iterator[DecodedSegment]:
        """The segments of ``rows`` decoded: from the cache, else read in one query."""
        missing = [r.id for r in rows if self.caches.decoded.get(r.id) is None]
        fresh: dict[str, DecodedSegment] = {}
        t = s.task_segments.c
        for first in range(0, len(missing), 50):
            query = sa.select(t.id, t.format, t.payload).where(
                t.id.in_(missing[first : first + 50])
            )
            for segment_id, fmt, payload in self.conn.execute(query):
                segment = decode_segment(fmt, bytes(payload))
                self.caches.decoded.put(segment_id, segment, len(segment))
                if len(fresh) < 8:  # a few survive a cache too small for the query
                    fresh[segment_id] = segment
        for r in rows:
            segment = fresh.get(r.id) or self.caches.decoded.get(r.id)
            if segment is None:  # evicted meanwhile by a larger query: read it alone
                query = sa.select(t.format, t.payload).where(t.id == r.id)
                fmt, payload = self.conn.execute(query).one()
                segment = decode_segment(fmt, bytes(payload))
            yield segment


# -- the executions of a segment ---------------------------------------------------------


def _spans(seg: DecodedSegment) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Each execution's first start and last stop over all its actions."""
    return seg.first, seg.last


def selected(
    seg: DecodedSegment,
    start: float | None,
    stop: float | None,
    *,
    computation_id: str | None = None,
    span_ids: frozenset[str] | None = None,
    group: str | None = None,
) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Which executions overlap the window and pass the filters; with their spans."""
    first, last = _spans(seg)
    mask = np.ones(len(seg), dtype=bool)
    if start is not None:
        mask &= (last > start) | ((last == start) & (first == start))
    if stop is not None:
        mask &= first < stop if start is None or stop > start else first <= stop
    for column, wanted in (
        (seg.computation, None if computation_id is None else (computation_id,)),
        (seg.span, span_ids),
        (seg.group, None if group is None else (group,)),
    ):
        if wanted is not None:
            mask &= seg.naming(column, wanted)
    return mask, first, last


def name_at(seg: DecodedSegment, index: int) -> str | None:
    """The segment's string ``index`` (None: -1, not given)."""
    return seg.names[index] if index >= 0 else None


def execution_at(seg: DecodedSegment, row: int) -> TaskExecution:
    """Row ``row`` of the segment as an execution, its actions in time order."""
    lo = int(np.searchsorted(seg.action_row, row, "left"))
    hi = int(np.searchsorted(seg.action_row, row, "right"))
    actions = [TaskAction(COMPUTE, float(seg.start[row]), float(seg.stop[row]))]
    for i in range(lo, hi):
        actions.append(
            TaskAction(
                seg.names[int(seg.action_name[i])],
                float(seg.action_start[i]),
                float(seg.action_stop[i]),
                name_at(seg, int(seg.action_source[i])),
            )
        )
    if hi > lo and seg.start[row] == seg.stop[row]:
        # no compute was reported (a zero-length one stands in the row): leave it out
        actions = actions[1:]
    actions.sort(key=lambda a: (a.start, a.stop))
    nbytes = int(seg.nbytes[row])
    return TaskExecution(
        key=seg.key(row),
        group=seg.names[int(seg.group[row])],
        prefix=seg.names[int(seg.prefix[row])],
        worker=seg.names[int(seg.worker[row])],
        thread=int(seg.thread[row]),
        start=min(a.start for a in actions),
        stop=max(a.stop for a in actions),
        state=STATES[int(seg.state[row])],
        nbytes=None if nbytes < 0 else nbytes,
        computation_id=name_at(seg, int(seg.computation[row])),
        span_id=name_at(seg, int(seg.span[row])),
        actions=tuple(actions),
        trigger=seg.trigger(row),
    )


def passes_all(
    summary: Summary,
    computation_id: str | None,
    span_ids: frozenset[str] | None,
    group: str | None,
) -> bool:
    """Every execution of the summary's segment passes the filters."""
    return (
        (computation_id is None or summary.computations == [computation_id])
        and (span_ids is None or all(span in span_ids for span in summary.spans))
        and (group is None or summary.groups == [group])
    )


def span_ids(conn: sa.Connection, cluster_id: str, span_id: str | None) -> frozenset[str] | None:
    """The spans a span filter keeps: the span and its subtree (a task carries its
    innermost span); the span alone when the cluster recorded no such span."""
    if span_id is None:
        return None
    return frozenset(span_scope_ids(conn, cluster_id, span_id=span_id, tag=None) or {span_id})
