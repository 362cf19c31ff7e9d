"""The task timeline: every task execution of a cluster, read from its task-log segments
(:mod:`daskscope.segments`).

A window of time comes back raw (every execution) when it holds at most ``max_tasks``
executions, else as busy seconds per worker thread in ``bins`` bins. Segments carry their
time range, their groups and a filter of their keys, so a query decodes only the ones
that may hold what it asks; decoded segments are kept in a small cache (a segment never
changes once written: the same id is the same executions).
"""

from __future__ import annotations

import heapq
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import sqlalchemy as sa

from daskscope.segments import (
    KEY_IS_GROUP,
    KEY_TUPLE,
    KEY_WHOLE,
    NO_THREAD,
    STATES,
    DecodedSegment,
    decode_segment,
    key_filter_may_hold,
    key_parts,
)
from daskscope.store import schema as s
from daskscope.store.engine import Store, as_engine
from daskscope.store.errors import UnknownCluster
from daskscope.summaries import BINS, SLOWEST_PER_GROUP, Summary, busy_per_bin, read_summary

__all__ = [
    "Lane",
    "LaneBin",
    "TaskAction",
    "TaskExecution",
    "TimelineExtent",
    "TimelineWindow",
    "Transfer",
    "slowest_tasks",
    "task_executions",
    "timeline_extent",
    "timeline_window",
    "transfers",
]

COMPUTE = "compute"


@dataclass(frozen=True, slots=True)
class TaskAction:
    """One start/stop pair Dask reports for an execution."""

    #: "compute", "transfer", "disk-read", "disk-write", "deserialize", ...
    action: str
    #: epoch seconds, on the scheduler's clock (Dask corrects the workers' to it)
    start: float
    stop: float
    #: for "transfer": the worker the data came from
    source: str | None = None


@dataclass(frozen=True, slots=True)
class TaskExecution:
    """One execution of one task (a recomputation is another execution)."""

    key: str
    group: str
    prefix: str
    worker: str
    #: thread ident on the worker (0 when Dask did not say)
    thread: int
    #: first start and last stop of its actions
    start: float
    stop: float
    #: "memory" or "erred"
    state: str
    nbytes: int | None
    computation_id: str | None
    span_id: str | None
    actions: tuple[TaskAction, ...]


@dataclass(frozen=True, slots=True)
class LaneBin:
    """Aggregated time of one worker thread in ``[start, stop)``."""

    start: float
    stop: float
    #: seconds by activity: "compute" and the other action names
    busy_s: dict[str, float]
    #: executions overlapping the bin
    tasks: int
    #: the group with most compute time in the bin (its colour)
    top_group: str | None


@dataclass(frozen=True, slots=True)
class Lane:
    worker: str
    thread: int
    #: empty when the window is raw
    bins: tuple[LaneBin, ...]


@dataclass(frozen=True, slots=True)
class TimelineWindow:
    cluster_id: str
    #: the window asked (or the cluster's first start / last stop when not given)
    start: float
    stop: float
    #: executions overlapping the window (with the filters)
    total_tasks: int
    #: True: ``tasks`` holds every execution; False: ``lanes`` hold bins
    raw: bool
    tasks: tuple[TaskExecution, ...]
    #: one per worker thread that ran something (also when raw, with no bins)
    lanes: tuple[Lane, ...]


@dataclass(frozen=True, slots=True)
class Transfer:
    """Data a task's worker fetched from another worker before running it (Dask
    reports the transfer with the task that needed it, not with the data's key)."""

    key: str
    source: str
    target: str
    start: float
    stop: float
    #: Dask does not say how many bytes one transfer moved
    nbytes: int | None


@dataclass(frozen=True, slots=True)
class TimelineExtent:
    #: distinct keys executed
    tasks: int
    executions: int
    first: float | None
    last: float | None
    workers: int
    #: worker threads that ran something
    threads: int


# -- reading segments --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _SegmentRow:
    id: str
    first_start: float
    last_stop: float
    executions: int
    groups: list[str]


class _Lru:
    """Values by key, least recently used first out, bounded by a total weight."""

    def __init__(self, max_weight: int) -> None:
        self.max_weight = max_weight
        self._held: OrderedDict[tuple[str, str], tuple[Any, int]] = OrderedDict()
        self._weight = 0
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str]) -> Any:
        with self._lock:
            found = self._held.get(key)
            if found is None:
                return None
            self._held.move_to_end(key)
            return found[0]

    def put(self, key: tuple[str, str], value: Any, weight: int) -> None:
        with self._lock:
            if key in self._held:
                return
            self._held[key] = (value, weight)
            self._weight += weight
            while self._weight > self.max_weight and len(self._held) > 1:
                _, (_, dropped) = self._held.popitem(last=False)
                self._weight -= dropped


# In the server process: a segment never changes once written (its id is its cluster
# and number, and writing it again writes the same executions)
_decoded_cache = _Lru(max_weight=2_000_000)  # executions
_summary_cache = _Lru(max_weight=256 * 2**20)  # bytes
_filter_cache = _Lru(max_weight=64 * 2**20)  # bytes


def _check_cluster(conn: sa.Connection, cluster_id: str) -> None:
    found = conn.execute(sa.select(s.clusters.c.id).where(s.clusters.c.id == cluster_id))
    if found.first() is None:
        raise UnknownCluster(cluster_id)


def _segment_rows(
    conn: sa.Connection, cluster_id: str, start: float | None = None, stop: float | None = None
) -> list[_SegmentRow]:
    """The cluster's segments overlapping ``[start, stop]``, oldest first."""
    t = s.task_segments.c
    query = sa.select(t.id, t.first_start, t.last_stop, t.executions, t.groups).where(
        t.cluster_id == cluster_id
    )
    if stop is not None:
        query = query.where(t.first_start <= stop)
    if start is not None:
        query = query.where(t.last_stop >= start)
    rows = conn.execute(query.order_by(t.first_start, t.segment))
    return [_SegmentRow(r[0], r[1], r[2], r[3], list(r[4] or ())) for r in rows]


def _blobs(
    conn: sa.Connection, column: sa.ColumnElement[Any], ids: list[str], cache: _Lru
) -> dict[str, bytes]:
    """A bytes column of the segments ``ids``: from ``cache``, else read (and kept)."""
    url = str(conn.engine.url)
    found: dict[str, bytes] = {}
    missing = []
    for segment_id in ids:
        value = cache.get((url, segment_id))
        if value is None:
            missing.append(segment_id)
        else:
            found[segment_id] = value
    t = s.task_segments.c
    for first in range(0, len(missing), 500):
        query = sa.select(t.id, column).where(t.id.in_(missing[first : first + 500]))
        for segment_id, value in conn.execute(query):
            found[segment_id] = bytes(value or b"")
            cache.put((url, segment_id), found[segment_id], len(found[segment_id]) + 100)
    return found


def _summaries(conn: sa.Connection, rows: list[_SegmentRow]) -> dict[str, Summary]:
    blobs = _blobs(conn, s.task_segments.c.summary, [r.id for r in rows], _summary_cache)
    read = {segment_id: read_summary(blob) for segment_id, blob in blobs.items()}
    return {segment_id: found for segment_id, found in read.items() if found is not None}


def _decoded(conn: sa.Connection, rows: list[_SegmentRow]) -> Iterator[DecodedSegment]:
    """The segments of ``rows`` decoded: from the cache, else read in one query."""
    url = str(conn.engine.url)
    missing = [r.id for r in rows if _decoded_cache.get((url, r.id)) is None]
    fresh: dict[str, DecodedSegment] = {}
    t = s.task_segments.c
    for first in range(0, len(missing), 50):
        query = sa.select(t.id, t.format, t.payload).where(t.id.in_(missing[first : first + 50]))
        for segment_id, fmt, payload in conn.execute(query):
            segment = decode_segment(fmt, bytes(payload))
            _decoded_cache.put((url, segment_id), segment, len(segment))
            if len(fresh) < 8:  # a few survive a cache too small for the query
                fresh[segment_id] = segment
    for r in rows:
        segment = fresh.get(r.id) or _decoded_cache.get((url, r.id))
        if segment is None:  # evicted meanwhile by a larger query: read it alone
            query = sa.select(t.format, t.payload).where(t.id == r.id)
            fmt, payload = conn.execute(query).one()
            segment = decode_segment(fmt, bytes(payload))
        yield segment


# -- the executions of a segment ---------------------------------------------------------


def _spans(seg: DecodedSegment) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Each execution's first start and last stop over all its actions."""
    return seg.first, seg.last


def _selected(
    seg: DecodedSegment,
    start: float | None,
    stop: float | None,
    *,
    computation_id: str | None = None,
    span_id: str | None = None,
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
        (seg.computation, computation_id),
        (seg.span, span_id),
        (seg.group, group),
    ):
        if wanted is not None:
            mask &= column == seg.name_index(wanted)
    return mask, first, last


def _name(seg: DecodedSegment, index: int) -> str | None:
    return seg.names[index] if index >= 0 else None


def _execution(seg: DecodedSegment, row: int) -> TaskExecution:
    lo = int(np.searchsorted(seg.action_row, row, "left"))
    hi = int(np.searchsorted(seg.action_row, row, "right"))
    actions = [TaskAction(COMPUTE, float(seg.start[row]), float(seg.stop[row]))]
    for i in range(lo, hi):
        actions.append(
            TaskAction(
                seg.names[int(seg.action_name[i])],
                float(seg.action_start[i]),
                float(seg.action_stop[i]),
                _name(seg, int(seg.action_source[i])),
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
        computation_id=_name(seg, int(seg.computation[row])),
        span_id=_name(seg, int(seg.span[row])),
        actions=tuple(actions),
    )


# -- the window --------------------------------------------------------------------------


def timeline_window(
    store: Store | sa.Engine,
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

    Zoomed out, a segment wholly inside the window whose executions all pass the filters
    is taken from its summary (busy seconds in bins of 1/128 of its time range, spread
    over the window's bins by overlap) when the window's bins are at least twice as wide;
    its bins then count the executions that *start* in them."""
    if max_tasks < 0 or bins < 1:
        raise ValueError("max_tasks must be >= 0 and bins >= 1")
    if start is not None and stop is not None and stop < start:
        raise ValueError(f"the window's stop ({stop}) is before its start ({start})")
    filters = {"computation_id": computation_id, "span_id": span_id, "group": group}
    with as_engine(store).connect() as conn:
        _check_cluster(conn, cluster_id)
        rows = _segment_rows(conn, cluster_id, start, stop)
        if group is not None:
            rows = [r for r in rows if group in r.groups]
        summaries = {
            segment_id: summary
            for segment_id, summary in _summaries(conn, rows).items()
            if _passes_all(summary, computation_id, span_id, group)
        }
        whole = [r for r in rows if r.id in summaries]
        picked = _picked(conn, [r for r in rows if r.id not in summaries], start, stop, filters)
        total = sum(_started_within(summaries[r.id], r, start, stop) for r in whole)
        total += sum(len(c) for _, c, _, _ in picked)
        if start is None or stop is None:
            firsts = [r.first_start for r in whole] + [float(f[c].min()) for _, c, f, _ in picked]
            lasts = [r.last_stop for r in whole] + [float(la[c].max()) for _, c, _, la in picked]
            start = (min(firsts) if firsts else 0.0) if start is None else start
            stop = (max(lasts) if lasts else start) if stop is None else stop
        width = (stop - start) / bins
        summed: list[Summary] = []
        if total <= max_tasks:  # few: every one of them, exactly
            picked += _picked(conn, whole, start, stop, filters)
            total = sum(len(c) for _, c, _, _ in picked)
        else:
            summed = [summaries[r.id] for r in whole if summaries[r.id].width <= width]
            used = {id(summary) for summary in summed}
            rest = [r for r in whole if id(summaries[r.id]) not in used]
            picked += _picked(conn, rest, start, stop, filters)
            # exact where decoded, by the summaries' starts where not
            total = sum(len(c) for _, c, _, _ in picked) + sum(
                _started_within(summaries[r.id], r, start, stop)
                for r in whole
                if id(summaries[r.id]) in used
            )
    lane_names = sorted(
        {
            (seg.names[int(w)], int(t))
            for seg, chosen, _, _ in picked
            for w, t in set(
                zip(seg.worker[chosen].tolist(), seg.thread[chosen].tolist(), strict=True)
            )
        }
        | {lane for summary in summed for lane in summary.lanes}
    )
    if not summed and total <= max_tasks:
        tasks = [_execution(seg, int(row)) for seg, chosen, _, _ in picked for row in chosen]
        tasks.sort(key=lambda t: (t.start, t.worker, t.thread, t.key))
        lanes = tuple(Lane(w, t, ()) for w, t in lane_names)
        return TimelineWindow(cluster_id, start, stop, total, True, tuple(tasks), lanes)
    binned = _binned(picked, summed, lane_names, start, stop, bins)
    return TimelineWindow(cluster_id, start, stop, total, False, (), binned)


_Picked = tuple[DecodedSegment, "npt.NDArray[np.intp]", "npt.NDArray[np.float64]", Any]


def _picked(
    conn: sa.Connection,
    rows: list[_SegmentRow],
    start: float | None,
    stop: float | None,
    filters: dict[str, str | None],
) -> list[_Picked]:
    """The executions of the segments of ``rows`` in the window and passing the filters:
    (segment, rows chosen, first starts, last stops)."""
    picked: list[_Picked] = []
    for seg in _decoded(conn, rows):
        mask, first, last = _selected(seg, start, stop, **filters)
        chosen = np.flatnonzero(mask)
        if len(chosen):
            picked.append((seg, chosen, first, last))
    return picked


def _started_within(
    summary: Summary, row: _SegmentRow, start: float | None, stop: float | None
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


def _passes_all(
    summary: Summary, computation_id: str | None, span_id: str | None, group: str | None
) -> bool:
    """Every execution of the summary's segment passes the filters."""
    return (
        (computation_id is None or summary.computations == [computation_id])
        and (span_id is None or summary.spans == [span_id])
        and (group is None or summary.groups == [group])
    )


class _LaneSums:
    """One lane's figures in the window's bins, added up from decoded segments and from
    summaries; a bin's colour from sparse (bin, group, seconds) triples."""

    def __init__(self, bins: int) -> None:
        self.bins = bins
        self.busy: dict[str, npt.NDArray[np.float64]] = {}
        self.counts = np.zeros(bins, dtype=np.int64)
        self.top_bins: list[npt.NDArray[np.int64]] = []
        self.top_groups: list[npt.NDArray[np.int64]] = []
        self.top_seconds: list[npt.NDArray[np.float64]] = []

    def add_busy(self, activity: str, seconds: npt.NDArray[np.float64]) -> None:
        held = self.busy.get(activity)
        self.busy[activity] = seconds if held is None else held + seconds

    def add_top(
        self,
        where: npt.NDArray[np.int64],
        groups: npt.NDArray[np.int64],
        seconds: npt.NDArray[np.float64],
    ) -> None:
        self.top_bins.append(where)
        self.top_groups.append(groups)
        self.top_seconds.append(seconds)

    def colours(self, group_names: list[str]) -> list[str | None]:
        top: list[str | None] = [None] * self.bins
        if not self.top_bins:
            return top
        where = np.concatenate(self.top_bins)
        groups = np.concatenate(self.top_groups)
        seconds = np.concatenate(self.top_seconds)
        n = max(len(group_names), 1)
        combos, inverse = np.unique(where * n + groups, return_inverse=True)
        sums = np.bincount(inverse.ravel(), weights=seconds)
        cells = combos // n
        by_cell = np.lexsort((sums, cells))
        best = by_cell[np.r_[cells[by_cell][1:] != cells[by_cell][:-1], True]]
        for cell, combo, total in zip(
            cells[best].tolist(), combos[best].tolist(), sums[best].tolist(), strict=True
        ):
            if total > 0:
                top[cell] = group_names[combo % n]
        return top


def _binned(
    picked: list[_Picked],
    summed: list[Summary],
    lane_names: list[tuple[str, int]],
    start: float,
    stop: float,
    bins: int,
) -> tuple[Lane, ...]:
    edges = np.linspace(start, stop, bins + 1)
    width = (stop - start) / bins
    lanes = {lane: _LaneSums(bins) for lane in lane_names}
    group_ids: dict[str, int] = {}

    def gid(name: str) -> int:
        return group_ids.setdefault(name, len(group_ids))

    for seg, chosen, first, last in picked:
        _add_decoded(seg, chosen, first, last, lanes, edges, gid)
    for summary in summed:
        _add_summary(summary, lanes, start, width, bins, gid)
    names = sorted(group_ids, key=group_ids.__getitem__)
    out = []
    for (worker, thread), sums in lanes.items():
        colours = sums.colours(names)
        activities = list(sums.busy)
        # one dict a bin, made in C where every activity was busy (the common case)
        per_bin = zip(*(sums.busy[a].tolist() for a in activities), strict=True)
        busy = [
            dict(zip(activities, xs, strict=True))
            if min(xs) > 0
            else {a: x for a, x in zip(activities, xs, strict=True) if x > 0}
            for xs in per_bin
        ] or [{} for _ in range(bins)]
        counts = sums.counts.tolist()
        lo, hi = edges[:-1].tolist(), edges[1:].tolist()
        out.append(
            Lane(
                worker,
                thread,
                tuple(
                    map(LaneBin, lo, hi, busy, counts, colours),
                ),
            )
        )
    return tuple(out)


def _add_decoded(
    seg: DecodedSegment,
    chosen: npt.NDArray[np.intp],
    first: npt.NDArray[np.float64],
    last: npt.NDArray[np.float64],
    lanes: dict[tuple[str, int], _LaneSums],
    edges: npt.NDArray[np.float64],
    gid: Any,
) -> None:
    """Exact figures of a decoded segment's chosen executions."""
    workers, threads = seg.worker[chosen], seg.thread[chosen]
    bins = len(edges) - 1
    for w in np.unique(workers).tolist():
        w_mask = workers == w
        for t in np.unique(threads[w_mask]).tolist():
            rows = chosen[w_mask & (threads == t)]
            lane = lanes[(seg.names[w], t)]
            starts, stops = seg.start[rows], seg.stop[rows]
            # (an execution without compute has a zero-length one: it adds nothing)
            lane.add_busy(COMPUTE, busy_per_bin(starts, stops, edges))
            lane.counts += _overlapping_per_bin(first[rows], last[rows], edges)
            groups = seg.group[rows]
            present = np.unique(groups).tolist()
            for g in present if len(present) <= _EXACT_TOP_GROUPS else ():
                mine = groups == g
                seconds = busy_per_bin(starts[mine], stops[mine], edges)
                where = np.flatnonzero(seconds)
                lane.add_top(where, np.full(len(where), gid(seg.names[g])), seconds[where])
            if len(present) > _EXACT_TOP_GROUPS:  # by the bin each execution starts in
                where = np.clip(((starts - edges[0]) / (edges[1] - edges[0])), 0, bins - 1)
                ids = np.array([gid(seg.names[g]) for g in groups.tolist()], dtype=np.int64)
                lane.add_top(where.astype(np.int64), ids, stops - starts)
            a_mask = np.isin(seg.action_row, rows)
            for a in np.unique(seg.action_name[a_mask]).tolist():
                sel = a_mask & (seg.action_name == a)
                lane.add_busy(
                    seg.names[a], busy_per_bin(seg.action_start[sel], seg.action_stop[sel], edges)
                )


def _add_summary(
    summary: Summary,
    lanes: dict[tuple[str, int], _LaneSums],
    start: float,
    width: float,
    bins: int,
    gid: Any,
) -> None:
    """A summary's figures spread over the window's bins: each of its bins (no wider
    than the window's) splits between the one or two window bins it overlaps."""
    own = summary.start + summary.width * np.arange(BINS)
    # a summary's bins straddling the window's edges count for the part inside
    lo = np.clip(own, start, start + width * bins)
    hi = np.clip(own + summary.width, start, start + width * bins)
    inside = (hi - lo) / summary.width
    left = np.clip(((lo - start) / width).astype(np.int64), 0, bins - 1)
    right = np.clip(((hi - start) / width).astype(np.int64), 0, bins - 1)
    boundary = start + (left + 1) * width
    part = np.where(hi > lo, (np.minimum(boundary, hi) - lo) / np.maximum(hi - lo, 1e-300), 0.0)
    share = np.where(left == right, 1.0, np.clip(part, 0.0, 1.0)) * inside
    rest = np.where(left == right, 0.0, 1.0 - np.clip(part, 0.0, 1.0)) * inside
    centre = own + summary.width / 2
    counted = (centre >= start) & (centre < start + width * bins)
    middle = np.clip(((centre - start) / width).astype(np.int64), 0, bins - 1)
    ids = np.array([gid(g) for g in summary.groups], dtype=np.int64)
    n_lanes = len(summary.lanes)
    # every lane at once: cell = lane * bins + window bin
    offset = (np.arange(n_lanes) * bins)[:, None]
    cells_left, cells_right = (offset + left).ravel(), (offset + right).ravel()
    size = n_lanes * bins
    for j, activity in enumerate(summary.activities):
        seconds = summary.busy[:, j, :].astype(np.float64)
        if not seconds.any():
            continue
        spread = np.zeros(size, dtype=np.float64)
        spread += np.bincount(cells_left, weights=(seconds * share).ravel(), minlength=size)
        spread += np.bincount(cells_right, weights=(seconds * rest).ravel(), minlength=size)
        for i, row in enumerate(spread.reshape(n_lanes, bins)):
            lanes[summary.lanes[i]].add_busy(activity, row)
    cells_middle = (offset + middle).ravel()
    started = np.bincount(cells_middle, weights=(summary.starts * counted).ravel(), minlength=size)
    for i, lane_counts in enumerate(started.reshape(n_lanes, bins).astype(np.int64)):
        lane = lanes[summary.lanes[i]]
        lane.counts += lane_counts
        coloured = np.flatnonzero((summary.top[i] >= 0) & counted)
        lane.add_top(
            middle[coloured],
            ids[summary.top[i][coloured]],
            summary.top_seconds[i][coloured].astype(np.float64),
        )


def _overlapping_per_bin(
    firsts: npt.NDArray[np.float64], lasts: npt.NDArray[np.float64], edges: npt.NDArray[np.float64]
) -> npt.NDArray[np.int64]:
    """Executions overlapping each bin: all but those starting at or after its end and
    those ending at or before its start."""
    firsts, lasts = np.sort(firsts), np.sort(lasts)
    later = len(firsts) - np.searchsorted(firsts, edges[1:], "left")
    earlier = np.searchsorted(lasts, edges[:-1], "right")
    return np.asarray(len(firsts) - later - earlier, dtype=np.int64)


#: above this many groups in a lane's part of a segment, a bin's colour is the group
#: that started the most compute time in it (exact sums cost a pass per group)
_EXACT_TOP_GROUPS = 64


# -- lookups -----------------------------------------------------------------------------


def task_executions(store: Store | sa.Engine, cluster_id: str, key: str) -> list[TaskExecution]:
    """Every execution of ``key`` (the str of a Dask key), oldest first."""
    found: list[TaskExecution] = []
    with as_engine(store).connect() as conn:
        _check_cluster(conn, cluster_id)
        rows = _segment_rows(conn, cluster_id)
        filters = _blobs(conn, s.task_segments.c.key_filter, [r.id for r in rows], _filter_cache)
        rows = [r for r in rows if key_filter_may_hold(filters[r.id], key)]
        for seg in _decoded(conn, rows):
            found += [_execution(seg, int(row)) for row in _rows_of_key(seg, key)]
    return sorted(found, key=lambda t: (t.start, t.stop))


def _rows_of_key(seg: DecodedSegment, key: str) -> npt.NDArray[np.intp]:
    """The rows of ``key``: kept whole, or as its group's name (and a tuple's rest)."""
    import pyarrow.compute as pc  # type: ignore[import-untyped]

    def rest_is(text: str) -> npt.NDArray[np.bool_]:
        return np.asarray(pc.equal(seg.key_rest, text).fill_null(False), dtype=bool)

    mask = (seg.key_form == KEY_WHOLE) & rest_is(key)
    for g in np.unique(seg.group).tolist():
        form, rest = key_parts(key, seg.names[g])
        if form == KEY_IS_GROUP:
            mask |= (seg.group == g) & (seg.key_form == KEY_IS_GROUP)
        elif form == KEY_TUPLE:
            mask |= (seg.group == g) & (seg.key_form == KEY_TUPLE) & rest_is(rest)
    return np.flatnonzero(mask)


def slowest_tasks(
    store: Store | sa.Engine,
    cluster_id: str,
    *,
    group: str | None = None,
    computation_id: str | None = None,
    limit: int = 20,
) -> list[TaskExecution]:
    """The ``limit`` longest executions (last stop - first start), longest first.

    Each segment's summary names its groups' slowest executions: only the segments
    holding the longest of those are decoded."""
    if limit <= 0:
        return []
    with as_engine(store).connect() as conn:
        _check_cluster(conn, cluster_id)
        rows = _segment_rows(conn, cluster_id)
        if group is not None:
            rows = [r for r in rows if group in r.groups]
        summaries = {
            segment_id: summary
            for segment_id, summary in _summaries(conn, rows).items()
            if limit <= SLOWEST_PER_GROUP and _passes_all(summary, computation_id, None, None)
        }
        # (duration, segment, row) of the candidates the summaries name
        candidates: list[tuple[float, int, int]] = []
        for index, r in enumerate(rows):
            summary = summaries.get(r.id)
            if summary is None:
                continue
            wanted = summary.slowest_group >= 0
            if group is not None:
                wanted &= summary.slowest_group == _index(summary.groups, group)
            candidates += zip(
                summary.slowest_duration[wanted].tolist(),
                [index] * int(wanted.sum()),
                summary.slowest_row[wanted].tolist(),
                strict=True,
            )
        best = heapq.nlargest(limit, candidates)
        needed = sorted({index for _, index, _ in best})
        decoded = dict(zip(needed, _decoded(conn, [rows[i] for i in needed]), strict=True))
        found = [(d, row, decoded[index]) for d, index, row in best]
        for seg in _decoded(conn, [r for r in rows if r.id not in summaries]):
            mask, first, last = _selected(
                seg, None, None, group=group, computation_id=computation_id
            )
            chosen = np.flatnonzero(mask)
            durations = (last - first)[chosen]
            if len(chosen) > limit:
                top = np.argpartition(-durations, limit - 1)[:limit]
                chosen, durations = chosen[top], durations[top]
            found += [
                (d, row, seg) for d, row in zip(durations.tolist(), chosen.tolist(), strict=True)
            ]
    found.sort(key=lambda item: -item[0])
    return [_execution(seg, row) for _, row, seg in found[:limit]]


def _index(names: list[str], name: str) -> int:
    try:
        return names.index(name)
    except ValueError:
        return -2  # matches nothing (not even "none")


def transfers(
    store: Store | sa.Engine,
    cluster_id: str,
    start: float | None = None,
    stop: float | None = None,
    *,
    limit: int = 1000,
) -> list[Transfer]:
    """Transfers overlapping ``[start, stop]``, oldest first, at most ``limit``."""
    found: list[Transfer] = []
    with as_engine(store).connect() as conn:
        _check_cluster(conn, cluster_id)
        for seg in _decoded(conn, _segment_rows(conn, cluster_id, start, stop)):
            name = seg.name_index("transfer")
            if name < 0:
                continue
            mask = seg.action_name == name
            if start is not None:
                mask &= seg.action_stop >= start
            if stop is not None:
                mask &= seg.action_start <= stop
            for i in np.flatnonzero(mask).tolist():
                row = int(seg.action_row[i])
                found.append(
                    Transfer(
                        key=seg.key(row),
                        source=_name(seg, int(seg.action_source[i])) or "",
                        target=seg.names[int(seg.worker[row])],
                        start=float(seg.action_start[i]),
                        stop=float(seg.action_stop[i]),
                        nbytes=None,
                    )
                )
    found.sort(key=lambda t: (t.start, t.stop, t.key))
    return found[: max(0, limit)]


def timeline_extent(
    store: Store | sa.Engine, cluster_id: str, *, computation_id: str | None = None
) -> TimelineExtent:
    """How much the task log of the cluster (or of one computation) holds."""
    keys: set[tuple[str, int, str]] = set()
    executions = 0
    first: float | None = None
    last: float | None = None
    lanes: set[tuple[str, int]] = set()
    with as_engine(store).connect() as conn:
        _check_cluster(conn, cluster_id)
        for seg in _decoded(conn, _segment_rows(conn, cluster_id)):
            mask, f, la = _selected(seg, None, None, computation_id=computation_id)
            chosen = np.flatnonzero(mask)
            if not len(chosen):
                continue
            executions += len(chosen)
            lo, hi = float(f[chosen].min()), float(la[chosen].max())
            first = lo if first is None else min(first, lo)
            last = hi if last is None else max(last, hi)
            keys.update(_keys(seg, chosen))
            lanes.update(
                (seg.names[w], t)
                for w, t in zip(
                    seg.worker[chosen].tolist(), seg.thread[chosen].tolist(), strict=True
                )
            )
    return TimelineExtent(
        tasks=len(keys),
        executions=executions,
        first=first,
        last=last,
        workers=len({w for w, _ in lanes}),
        threads=len({lane for lane in lanes if lane[1] != NO_THREAD} or lanes),
    )


def _keys(seg: DecodedSegment, rows: npt.NDArray[np.intp]) -> Iterator[tuple[str, int, str]]:
    """Each row's key as (group's name, form, rest): equal exactly when the keys are (a
    key's group follows from the key)."""
    rests = seg.key_rest.take(rows).to_pylist()
    forms = seg.key_form[rows].tolist()
    names = seg.names
    for g, f, r in zip(seg.group[rows].tolist(), forms, rests, strict=True):
        yield (names[g], f, r)
