"""A window of a cluster's task timeline, read from its task-log segments: every
execution of ``[start, stop)`` when it holds at most ``max_tasks`` (``raw``), else busy
seconds per worker thread in ``bins`` bins (:class:`~daskscope.tasklog.forms.Lane`
columns, summed by :class:`~daskscope.tasklog.bins.BinSums`).

A read goes in named steps: the segments that may hold the window (by time range and
group) and the summaries of those whose every execution passes the filters; the other
segments decoded and filtered; the executions counted; then, few enough, every segment
decoded, else each whole segment taken from its summary when it has one as coarse as
the window's bins.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import sqlalchemy as sa

from daskscope.store.database import Database
from daskscope.tasklog.bins import BinSums
from daskscope.tasklog.forms import Lane, TimelineWindow
from daskscope.tasklog.reads import (
    LogReader,
    SegmentRow,
    check_cluster,
    execution_at,
    passes_all,
    reading,
    selected,
    span_ids,
)
from daskscope.tasklog.segments import DecodedSegment
from daskscope.tasklog.summaries import BINS, Summary

__all__ = ["timeline_window"]

#: executions of a decoded segment in the window: (segment, rows chosen, each row's
#: first start, each row's last stop)
_Picked = tuple[DecodedSegment, "npt.NDArray[np.intp]", "npt.NDArray[np.float64]", Any]


@dataclass(frozen=True, slots=True)
class _Filters:
    computation_id: str | None
    #: the span asked and the spans below it
    span_ids: frozenset[str] | None
    group: str | None

    def pick(
        self, seg: DecodedSegment, start: float | None, stop: float | None
    ) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        return selected(
            seg,
            start,
            stop,
            computation_id=self.computation_id,
            span_ids=self.span_ids,
            group=self.group,
        )

    def hold_all(self, summary: Summary) -> bool:
        return passes_all(summary, self.computation_id, self.span_ids, self.group)


@dataclass(frozen=True, slots=True)
class _Read:
    """What a window read: executions picked from decoded segments, summaries spread
    whole, and the executions in the window (exact where decoded, by the summaries'
    starts where not)."""

    picked: list[_Picked]
    summed: list[Summary]
    total: int


def timeline_window(
    store: Database | sa.Engine,
    cluster_id: str,
    start: float | None = None,
    stop: float | None = None,
    *,
    computation_id: str | None = None,
    span_id: str | None = None,
    group: str | None = None,
    max_tasks: int = 5000,
    bins: int = 1000,
) -> TimelineWindow:
    """The executions of ``[start, stop)`` (the whole log when not given): raw when
    at most ``max_tasks``, else busy time per worker thread in ``bins`` bins.

    Zoomed out, a segment whose executions all pass the filters is taken from its
    summary (busy seconds in :data:`~daskscope.tasklog.summaries.BINS` bins of its time
    range, spread over the window's bins by overlap) when the window's bins are at least
    as wide; its executions then count in the bin where they *start*. ``span_id`` keeps
    the tasks of the span and of every span below it."""
    _check_window(start, stop, max_tasks, bins)
    with reading(store) as log:
        check_cluster(log.conn, cluster_id)
        filters = _Filters(computation_id, span_ids(log.conn, cluster_id, span_id), group)
        rows, held = _candidates(log, cluster_id, start, stop, filters)
        whole = [r for r in rows if r.id in held]
        picked = _picked(log, [r for r in rows if r.id not in held], start, stop, filters)
        total = _count(picked) + sum(_started_within(held[r.id], r, start, stop) for r in whole)
        start, stop = _bounds(start, stop, whole, picked)
        if total <= max_tasks:  # few: every one of them, exactly
            picked += _picked(log, whole, start, stop, filters)
            read = _Read(picked, [], _count(picked))
        else:
            read = _coarse(log, whole, held, picked, (start, stop, bins), filters)
    if not read.summed and read.total <= max_tasks:
        return _raw_window(cluster_id, start, stop, read)
    return _binned_window(cluster_id, start, stop, bins, read)


def _check_window(start: float | None, stop: float | None, max_tasks: int, bins: int) -> None:
    if max_tasks < 0 or bins < 1:
        raise ValueError("max_tasks must be >= 0 and bins >= 1")
    if start is not None and stop is not None and stop < start:
        raise ValueError(f"the window's stop ({stop}) is before its start ({start})")


def _candidates(
    log: LogReader,
    cluster_id: str,
    start: float | None,
    stop: float | None,
    filters: _Filters,
) -> tuple[list[SegmentRow], dict[str, Summary]]:
    """The segments that may hold executions of the window, and the summaries of those
    whose every execution passes the filters (by segment id)."""
    rows = log.segment_rows(cluster_id, start, stop)
    if filters.group is not None:
        rows = [r for r in rows if filters.group in r.groups]
    held = {i: summary for i, summary in log.summaries(rows).items() if filters.hold_all(summary)}
    return rows, held


def _picked(
    log: LogReader,
    rows: list[SegmentRow],
    start: float | None,
    stop: float | None,
    filters: _Filters,
) -> list[_Picked]:
    """The executions of the segments of ``rows`` in the window and passing the filters."""
    picked: list[_Picked] = []
    for seg in log.decoded(rows):
        mask, first, last = filters.pick(seg, start, stop)
        chosen = np.flatnonzero(mask)
        if len(chosen):
            picked.append((seg, chosen, first, last))
    return picked


def _count(picked: list[_Picked]) -> int:
    return sum(len(chosen) for _, chosen, _, _ in picked)


def _started_within(
    summary: Summary, row: SegmentRow, start: float | None, stop: float | None
) -> int:
    """The segment's executions in the window: all when it lies inside, else those its
    summary says started in bins whose middle is inside."""
    if (start is None or row.first_start >= start) and (stop is None or row.last_stop < stop):
        return row.executions
    middle = summary.start + summary.width * (np.arange(BINS) + 0.5)
    within = np.ones(BINS, dtype=bool)
    if start is not None:
        within &= middle >= start
    if stop is not None:
        within &= middle < stop
    return int(summary.starts[:, within].sum())


def _bounds(
    start: float | None, stop: float | None, whole: list[SegmentRow], picked: list[_Picked]
) -> tuple[float, float]:
    """The window asked, its open ends closed at the first start / last stop found."""
    if start is not None and stop is not None:
        return start, stop
    firsts = [r.first_start for r in whole] + [float(f[c].min()) for _, c, f, _ in picked]
    lasts = [r.last_stop for r in whole] + [float(la[c].max()) for _, c, _, la in picked]
    if start is None:
        start = min(firsts) if firsts else 0.0
    if stop is None:
        stop = max(lasts) if lasts else start
    return start, stop


def _coarse(
    log: LogReader,
    whole: list[SegmentRow],
    held: dict[str, Summary],
    picked: list[_Picked],
    window: tuple[float, float, int],
    filters: _Filters,
) -> _Read:
    """Zoomed out: each whole segment from its summary when the summary has a level as
    coarse as the window's bins, else decoded."""
    start, stop, bins = window
    width = (stop - start) / bins
    levels = {r.id: held[r.id].coarse(width) for r in whole}
    spread = [r for r in whole if levels[r.id] is not None]
    decode = [r for r in whole if levels[r.id] is None]
    picked = picked + _picked(log, decode, start, stop, filters)
    counted = sum(_started_within(held[r.id], r, start, stop) for r in spread)
    summed = [level for r in spread if (level := levels[r.id]) is not None]
    return _Read(picked, summed, _count(picked) + counted)


def _lane_names(read: _Read) -> list[tuple[str, int]]:
    """The (worker, thread) of every lane the read touched, sorted."""
    return sorted(
        {lane for seg, chosen, _, _ in read.picked for lane in _lanes_of(seg, chosen)}
        | {lane for summary in read.summed for lane in summary.lanes}
    )


def _lanes_of(seg: DecodedSegment, rows: npt.NDArray[np.intp]) -> list[tuple[str, int]]:
    """The worker threads that ran ``rows`` of the segment."""
    threads, thread_of = np.unique(seg.thread[rows], return_inverse=True)
    pairs = np.unique(seg.worker[rows].astype(np.int64) * len(threads) + thread_of.ravel())
    return [(seg.names[p // len(threads)], int(threads[p % len(threads)])) for p in pairs.tolist()]


def _raw_window(cluster_id: str, start: float, stop: float, read: _Read) -> TimelineWindow:
    tasks = [execution_at(seg, int(row)) for seg, chosen, _, _ in read.picked for row in chosen]
    tasks.sort(key=lambda t: (t.start, t.worker, t.thread, t.key))
    lanes = tuple(Lane(w, t) for w, t in _lane_names(read))
    return TimelineWindow(cluster_id, start, stop, read.total, True, tuple(tasks), lanes)


def _binned_window(
    cluster_id: str, start: float, stop: float, bins: int, read: _Read
) -> TimelineWindow:
    names = _lane_names(read)
    sums = BinSums(names, start, stop, bins)
    for seg, chosen, first, last in read.picked:
        sums.add_decoded(seg, chosen, first, last)
    for summary in read.summed:
        sums.add_summary(summary)
    lanes = tuple(
        Lane(w, t, columns) for (w, t), columns in zip(names, sums.columns(), strict=True)
    )
    return TimelineWindow(cluster_id, start, stop, read.total, False, (), lanes)
