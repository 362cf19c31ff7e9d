"""A cluster's task log read column-wise, segment after segment, for exports that go
through every execution of a window (:mod:`daskscope.export.perfetto`).

:func:`scan_segments` decodes the segments overlapping a window one at a time, oldest
first, so that memory holds a few segments whatever the log's size.
:func:`ordered_rows` turns them into batches of executions in order of their first
start across segments (segments written by one flush after another overlap in time);
:class:`PlainColumns` gives a segment's columns as Python lists, which per-row code
reads many times faster than numpy scalars or pyarrow values.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import sqlalchemy as sa

import daskscope.store.schema as s
from daskscope.store.database import Database, as_engine
from daskscope.tasklog.reads import check_cluster
from daskscope.tasklog.segments import STATES, DecodedSegment, decode_segment, key_text

__all__ = [
    "LogExtent",
    "PlainColumns",
    "PlainColumnsCache",
    "RowBatch",
    "ScannedSegment",
    "log_extent",
    "ordered_rows",
    "scan_segments",
]

#: payloads read per query: a few segments in memory at a time
_SEGMENTS_PER_READ = 4


@dataclass(frozen=True, slots=True)
class ScannedSegment:
    """A decoded segment with the first start over all its executions' actions (what
    the store keeps beside it): no later segment holds an execution starting before."""

    first_start: float
    decoded: DecodedSegment


def scan_segments(
    store: Database | sa.Engine,
    cluster_id: str,
    start: float | None = None,
    stop: float | None = None,
) -> Iterator[ScannedSegment]:
    """The segments of the cluster overlapping ``[start, stop]``, decoded one after the
    other in order of their first start. Raises UnknownCluster."""
    t = s.task_segments.c
    engine = as_engine(store)
    with engine.connect() as conn:
        check_cluster(conn, cluster_id)
        query = sa.select(t.id).where(t.cluster_id == cluster_id)
        if stop is not None:
            query = query.where(t.first_start <= stop)
        if start is not None:
            query = query.where(t.last_stop >= start)
        ids = list(conn.execute(query.order_by(t.first_start, t.segment)).scalars())
    for at in range(0, len(ids), _SEGMENTS_PER_READ):
        wanted = ids[at : at + _SEGMENTS_PER_READ]
        with engine.connect() as conn:  # not held open while the caller writes
            rows = conn.execute(
                sa.select(t.id, t.first_start, t.format, t.payload).where(t.id.in_(wanted))
            ).all()
        by_id = {r[0]: r for r in rows}
        for segment_id in wanted:
            found = by_id.get(segment_id)
            if found is None:  # deleted meanwhile (the cluster's data was dropped)
                continue
            _, first_start, fmt, payload = found
            yield ScannedSegment(float(first_start), decode_segment(fmt, bytes(payload)))


@dataclass(frozen=True, slots=True)
class LogExtent:
    """How many executions the log holds, and from when to when (None when none)."""

    executions: int
    first: float | None
    last: float | None


def log_extent(
    store: Database | sa.Engine, cluster_id: str, *, computation: str | None = None
) -> LogExtent:
    """The cluster's task log's extent: from the segments' rows alone for the whole
    cluster, else by a pass over the segments' columns. Raises UnknownCluster."""
    if computation is not None:
        executions, first, last = 0, np.inf, -np.inf
        for item in scan_segments(store, cluster_id):
            seg = item.decoded
            chosen = seg.naming(seg.computation, (computation,))
            if chosen.any():
                executions += int(chosen.sum())
                first = min(first, float(seg.first[chosen].min()))
                last = max(last, float(seg.last[chosen].max()))
        return LogExtent(executions, first, last) if executions else LogExtent(0, None, None)
    t = s.task_segments.c
    with as_engine(store).connect() as conn:
        check_cluster(conn, cluster_id)
        query = sa.select(
            sa.func.coalesce(sa.func.sum(t.executions), 0),
            sa.func.min(t.first_start),
            sa.func.max(t.last_stop),
        ).where(t.cluster_id == cluster_id)
        executions, first, last = conn.execute(query).one()
    if not executions:
        return LogExtent(0, None, None)
    return LogExtent(int(executions), float(first), float(last))


@dataclass(frozen=True, slots=True)
class RowBatch:
    """Executions in order of first start: row ``rows[i]`` of ``segments[segment[i]]``."""

    segments: tuple[DecodedSegment, ...]
    segment: npt.NDArray[np.intp]
    rows: npt.NDArray[np.intp]

    def __len__(self) -> int:
        return len(self.rows)


def _window_mask(
    seg: DecodedSegment, start: float | None, stop: float | None, computation: str | None
) -> npt.NDArray[np.bool_]:
    """The executions overlapping ``[start, stop)`` (one of no length at ``start``
    too), of ``computation`` when given: what the timeline's window holds."""
    mask = np.ones(len(seg), dtype=bool)
    if start is not None:
        mask &= (seg.last > start) | ((seg.last == start) & (seg.first == start))
    if stop is not None:
        mask &= seg.first < stop
    if computation is not None:
        mask &= seg.naming(seg.computation, (computation,))
    return mask


def ordered_rows(
    scanned: Iterator[ScannedSegment],
    start: float | None = None,
    stop: float | None = None,
    *,
    computation: str | None = None,
) -> Iterator[RowBatch]:
    """The executions of the scanned segments in the window, in batches, in order of
    their first start (ties: segment, then row, so the order is the same every time).

    A segment's rows starting before the next segment's first start can go out, as no
    later segment holds one starting earlier; the rest wait beside the next segment."""
    pending: list[tuple[DecodedSegment, npt.NDArray[np.intp]]] = []
    for item in scanned:
        seg = item.decoded
        chosen = np.flatnonzero(_window_mask(seg, start, stop, computation))
        if pending:
            batch, pending = _release(pending, item.first_start)
            if batch is not None:
                yield batch
        if len(chosen):
            pending.append((seg, chosen[np.argsort(seg.first[chosen], kind="stable")]))
    if pending:
        batch, _ = _release(pending, np.inf)
        if batch is not None:
            yield batch


def _release(
    pending: list[tuple[DecodedSegment, npt.NDArray[np.intp]]], before: float
) -> tuple[RowBatch | None, list[tuple[DecodedSegment, npt.NDArray[np.intp]]]]:
    """The pending rows starting before ``before``, merged in order; and what stays."""
    segments: list[DecodedSegment] = []
    which: list[npt.NDArray[np.intp]] = []
    rows: list[npt.NDArray[np.intp]] = []
    firsts: list[npt.NDArray[np.float64]] = []
    staying: list[tuple[DecodedSegment, npt.NDArray[np.intp]]] = []
    for seg, chosen in pending:
        cut = int(np.searchsorted(seg.first[chosen], before, "left"))
        if cut:
            which.append(np.full(cut, len(segments), dtype=np.intp))
            rows.append(chosen[:cut])
            firsts.append(seg.first[chosen[:cut]])
            segments.append(seg)
        if cut < len(chosen):
            staying.append((seg, chosen[cut:]))
    if not segments:
        return None, staying
    segment = np.concatenate(which)
    row = np.concatenate(rows)
    order = np.lexsort((row, segment, np.concatenate(firsts)))
    return RowBatch(tuple(segments), segment[order], row[order]), staying


class PlainColumns:
    """A segment's columns as Python values, read row by row by the exporters: names
    resolved, keys as text, each row's other actions (not its compute) grouped."""

    __slots__ = (
        "computation",
        "group",
        "key",
        "nbytes",
        "other_actions",
        "prefix",
        "span",
        "start",
        "state",
        "stop",
        "thread",
        "worker",
    )

    def __init__(self, seg: DecodedSegment) -> None:
        names: list[str | None] = [*seg.names, None]  # code -1: the last, None
        self.group = [names[c] for c in seg.group.tolist()]
        self.prefix = [names[c] for c in seg.prefix.tolist()]
        self.worker = [names[c] for c in seg.worker.tolist()]
        self.computation = [names[c] for c in seg.computation.tolist()]
        self.span = [names[c] for c in seg.span.tolist()]
        self.thread: list[int] = seg.thread.tolist()
        self.start: list[float] = seg.start.tolist()
        self.stop: list[float] = seg.stop.tolist()
        self.state = [STATES[c] for c in seg.state.tolist()]
        self.nbytes = [None if b < 0 else b for b in seg.nbytes.tolist()]
        self.key = [
            key_text(form, rest or "", group or "")
            for form, rest, group in zip(
                seg.key_form.tolist(), seg.key_rest.to_pylist(), self.group, strict=True
            )
        ]
        #: row -> [(action, start, stop, source)], in the segment's order
        self.other_actions: dict[int, list[tuple[str, float, float, str | None]]] = {}
        for row, name, a_start, a_stop, source in zip(
            seg.action_row.tolist(),
            seg.action_name.tolist(),
            seg.action_start.tolist(),
            seg.action_stop.tolist(),
            seg.action_source.tolist(),
            strict=True,
        ):
            self.other_actions.setdefault(row, []).append(
                (str(names[name]), a_start, a_stop, names[source])
            )

    def actions(self, row: int) -> list[tuple[str, float, float, str | None]]:
        """The row's actions ``(name, start, stop, source)`` by start, as the timeline
        gives them: its compute (left out when none was reported: a zero-length one
        stands in the row then) and the others."""
        others = self.other_actions.get(row)
        start, stop = self.start[row], self.stop[row]
        if not others:
            return [("compute", start, stop, None)]
        found = [("compute", start, stop, None), *others] if start != stop else list(others)
        found.sort(key=lambda a: (a[1], a[2]))
        return found


class PlainColumnsCache:
    """The plain columns of a batch's segments, made once while a segment keeps coming
    in batches (its rows that start later wait for the next one)."""

    def __init__(self) -> None:
        self._held: dict[int, tuple[DecodedSegment, PlainColumns]] = {}

    def of(self, batch: RowBatch) -> list[PlainColumns]:
        held: dict[int, tuple[DecodedSegment, PlainColumns]] = {}
        for seg in batch.segments:
            found = self._held.get(id(seg))
            if found is None or found[0] is not seg:
                found = (seg, PlainColumns(seg))
            held[id(seg)] = found
        self._held = held  # those of earlier batches only: let go
        return [held[id(seg)][1] for seg in batch.segments]
