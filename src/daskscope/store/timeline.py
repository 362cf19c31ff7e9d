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
    groups: list[str]
    key_filter: bytes


class _DecodedCache:
    """Decoded segments, least recently used first out, bounded by executions held."""

    def __init__(self, max_executions: int) -> None:
        self.max_executions = max_executions
        self._held: OrderedDict[tuple[str, str], DecodedSegment] = OrderedDict()
        self._executions = 0
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str]) -> DecodedSegment | None:
        with self._lock:
            found = self._held.get(key)
            if found is not None:
                self._held.move_to_end(key)
            return found

    def put(self, key: tuple[str, str], segment: DecodedSegment) -> None:
        with self._lock:
            if key in self._held:
                return
            self._held[key] = segment
            self._executions += len(segment)
            while self._executions > self.max_executions and len(self._held) > 1:
                _, dropped = self._held.popitem(last=False)
                self._executions -= len(dropped)


_cache = _DecodedCache(max_executions=2_000_000)


def _check_cluster(conn: sa.Connection, cluster_id: str) -> None:
    found = conn.execute(sa.select(s.clusters.c.id).where(s.clusters.c.id == cluster_id))
    if found.first() is None:
        raise UnknownCluster(cluster_id)


def _segment_rows(
    conn: sa.Connection, cluster_id: str, start: float | None = None, stop: float | None = None
) -> list[_SegmentRow]:
    """The cluster's segments overlapping ``[start, stop]``, oldest first."""
    t = s.task_segments.c
    query = sa.select(t.id, t.first_start, t.last_stop, t.groups, t.key_filter).where(
        t.cluster_id == cluster_id
    )
    if stop is not None:
        query = query.where(t.first_start <= stop)
    if start is not None:
        query = query.where(t.last_stop >= start)
    rows = conn.execute(query.order_by(t.first_start, t.segment))
    return [_SegmentRow(r[0], r[1], r[2], list(r[3] or ()), bytes(r[4] or b"")) for r in rows]


def _decoded(conn: sa.Connection, rows: list[_SegmentRow]) -> Iterator[DecodedSegment]:
    """The segments of ``rows`` decoded: from the cache, else read in one query."""
    url = str(conn.engine.url)
    missing = [r.id for r in rows if _cache.get((url, r.id)) is None]
    if missing:
        t = s.task_segments.c
        for start in range(0, len(missing), 500):
            part = missing[start : start + 500]
            query = sa.select(t.id, t.format, t.payload).where(t.id.in_(part))
            for segment_id, fmt, payload in conn.execute(query):
                _cache.put((url, segment_id), decode_segment(fmt, bytes(payload)))
    for r in rows:
        segment = _cache.get((url, r.id))
        if segment is None:  # evicted meanwhile by a larger query: read it alone
            query = sa.select(s.task_segments.c.format, s.task_segments.c.payload)
            fmt, payload = conn.execute(query.where(s.task_segments.c.id == r.id)).one()
            segment = decode_segment(fmt, bytes(payload))
        yield segment


# -- the executions of a segment ---------------------------------------------------------


def _spans(seg: DecodedSegment) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Each execution's first start and last stop over all its actions."""
    first, last = seg.start.copy(), seg.stop.copy()
    if len(seg.action_row):
        np.minimum.at(first, seg.action_row, seg.action_start)
        np.maximum.at(last, seg.action_row, seg.action_stop)
    return first, last


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


@dataclass(slots=True)
class _LaneParts:
    """One lane's intervals gathered from all segments, by activity."""

    intervals: dict[str, list[tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]]]
    firsts: list[npt.NDArray[np.float64]]
    lasts: list[npt.NDArray[np.float64]]
    #: compute intervals by group
    groups: dict[str, list[tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]]]


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
    at most ``max_tasks``, else busy time per worker thread in ``bins`` bins."""
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
        picked: list[tuple[DecodedSegment, npt.NDArray[np.intp], Any, Any]] = []
        for seg in _decoded(conn, rows):
            mask, first, last = _selected(seg, start, stop, **filters)
            chosen = np.flatnonzero(mask)
            if len(chosen):
                picked.append((seg, chosen, first, last))
    total = sum(len(chosen) for _, chosen, _, _ in picked)
    if start is None or stop is None:
        firsts = [float(first[c].min()) for _, c, first, _ in picked]
        lasts = [float(last[c].max()) for _, c, _, last in picked]
        start = (min(firsts) if firsts else 0.0) if start is None else start
        stop = (max(lasts) if lasts else start) if stop is None else stop
    lane_names = sorted(
        {
            (seg.names[int(w)], int(t))
            for seg, chosen, _, _ in picked
            for w, t in set(
                zip(seg.worker[chosen].tolist(), seg.thread[chosen].tolist(), strict=True)
            )
        }
    )
    if total <= max_tasks:
        tasks = [_execution(seg, int(row)) for seg, chosen, _, _ in picked for row in chosen]
        tasks.sort(key=lambda t: (t.start, t.worker, t.thread, t.key))
        lanes = tuple(Lane(w, t, ()) for w, t in lane_names)
        return TimelineWindow(cluster_id, start, stop, total, True, tuple(tasks), lanes)
    binned = _binned(picked, lane_names, start, stop, bins)
    return TimelineWindow(cluster_id, start, stop, total, False, (), binned)


def _binned(
    picked: list[tuple[DecodedSegment, npt.NDArray[np.intp], Any, Any]],
    lane_names: list[tuple[str, int]],
    start: float,
    stop: float,
    bins: int,
) -> tuple[Lane, ...]:
    parts = {lane: _LaneParts({}, [], [], {}) for lane in lane_names}
    for seg, chosen, first, last in picked:
        workers = seg.worker[chosen]
        threads = seg.thread[chosen]
        for w in np.unique(workers):
            w_mask = workers == w
            for t in np.unique(threads[w_mask]):
                rows = chosen[w_mask & (threads == t)]
                lane = parts[(seg.names[int(w)], int(t))]
                lane.firsts.append(first[rows])
                lane.lasts.append(last[rows])
                # (an execution without compute has a zero-length one: it adds nothing)
                computed = (seg.start[rows], seg.stop[rows])
                lane.intervals.setdefault(COMPUTE, []).append(computed)
                for g in np.unique(seg.group[rows]):
                    in_group = seg.group[rows] == g
                    lane.groups.setdefault(seg.names[int(g)], []).append(
                        (computed[0][in_group], computed[1][in_group])
                    )
                # the other actions of these rows
                a_mask = np.isin(seg.action_row, rows)
                for a in np.unique(seg.action_name[a_mask]):
                    sel = a_mask & (seg.action_name == a)
                    lane.intervals.setdefault(seg.names[int(a)], []).append(
                        (seg.action_start[sel], seg.action_stop[sel])
                    )
    edges = np.linspace(start, stop, bins + 1)
    lanes = []
    for (worker, thread), lane in parts.items():
        busy = {
            activity: _busy_per_bin(*_joined(pieces), edges)
            for activity, pieces in lane.intervals.items()
        }
        counts = _overlapping_per_bin(
            np.concatenate(lane.firsts), np.concatenate(lane.lasts), edges
        )
        top = _top_groups(lane.groups, edges)
        lanes.append(
            Lane(
                worker,
                thread,
                tuple(
                    LaneBin(
                        float(edges[b]),
                        float(edges[b + 1]),
                        {a: float(v[b]) for a, v in busy.items() if v[b] > 0},
                        int(counts[b]),
                        top[b],
                    )
                    for b in range(bins)
                ),
            )
        )
    return tuple(lanes)


def _joined(
    pieces: list[tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]],
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    return np.concatenate([p[0] for p in pieces]), np.concatenate([p[1] for p in pieces])


def _busy_per_bin(
    starts: npt.NDArray[np.float64], stops: npt.NDArray[np.float64], edges: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    """Seconds of the intervals inside each bin: F(edge) differences, where F(t) is the
    time covered before t, Σ (t - s) over starts before t - Σ (t - e) over stops before
    t; times relative to the first edge keep the sums precise."""
    origin = edges[0]
    ss = np.sort(np.clip(starts, edges[0], edges[-1]) - origin)
    es = np.sort(np.clip(stops, edges[0], edges[-1]) - origin)
    at = edges - origin
    cs = np.concatenate(([0.0], np.cumsum(ss)))
    ce = np.concatenate(([0.0], np.cumsum(es)))
    ns = np.searchsorted(ss, at, "left")
    ne = np.searchsorted(es, at, "left")
    covered = (ns * at - cs[ns]) - (ne * at - ce[ne])
    busy: npt.NDArray[np.float64] = np.maximum(np.diff(covered), 0.0)
    return busy


def _overlapping_per_bin(
    firsts: npt.NDArray[np.float64], lasts: npt.NDArray[np.float64], edges: npt.NDArray[np.float64]
) -> npt.NDArray[np.int64]:
    """Executions overlapping each bin: all but those starting at or after its end and
    those ending at or before its start."""
    firsts, lasts = np.sort(firsts), np.sort(lasts)
    later = len(firsts) - np.searchsorted(firsts, edges[1:], "left")
    earlier = np.searchsorted(lasts, edges[:-1], "right")
    return np.asarray(len(firsts) - later - earlier, dtype=np.int64)


#: above this many groups in a lane, a bin's colour is the group that started the most
#: compute time in it (exact per-group sums cost a pass per group)
_EXACT_TOP_GROUPS = 64


def _top_groups(
    groups: dict[str, list[tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]]],
    edges: npt.NDArray[np.float64],
) -> list[str | None]:
    names = list(groups)
    bins = len(edges) - 1
    if not names:
        return [None] * bins
    if len(names) <= _EXACT_TOP_GROUPS:
        busy = np.stack([_busy_per_bin(*_joined(groups[n]), edges) for n in names])
    else:
        busy = np.zeros((len(names), bins))
        width = (edges[-1] - edges[0]) / bins or 1.0
        for i, n in enumerate(names):
            starts, stops = _joined(groups[n])
            where = np.clip(((starts - edges[0]) / width).astype(np.int64), 0, bins - 1)
            np.add.at(busy[i], where, stops - starts)
    best = busy.argmax(axis=0)
    return [names[int(best[b])] if busy[best[b], b] > 0 else None for b in range(bins)]


# -- lookups -----------------------------------------------------------------------------


def task_executions(store: Store | sa.Engine, cluster_id: str, key: str) -> list[TaskExecution]:
    """Every execution of ``key`` (the str of a Dask key), oldest first."""
    found: list[TaskExecution] = []
    with as_engine(store).connect() as conn:
        _check_cluster(conn, cluster_id)
        rows = [
            r for r in _segment_rows(conn, cluster_id) if key_filter_may_hold(r.key_filter, key)
        ]
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
    """The ``limit`` longest executions (stop - start), longest first."""
    best: list[tuple[float, int, TaskExecution]] = []
    counter = 0
    with as_engine(store).connect() as conn:
        _check_cluster(conn, cluster_id)
        rows = _segment_rows(conn, cluster_id)
        if group is not None:
            rows = [r for r in rows if group in r.groups]
        for seg in _decoded(conn, rows):
            mask, first, last = _selected(
                seg, None, None, group=group, computation_id=computation_id
            )
            chosen = np.flatnonzero(mask)
            if not len(chosen) or limit <= 0:
                continue
            durations = (last - first)[chosen]
            if len(chosen) > limit:
                top = np.argpartition(-durations, limit - 1)[:limit]
                chosen, durations = chosen[top], durations[top]
            for row, duration in zip(chosen.tolist(), durations.tolist(), strict=True):
                if len(best) < limit or duration > best[0][0]:
                    counter += 1
                    item = (duration, counter, _execution(seg, row))
                    if len(best) < limit:
                        heapq.heappush(best, item)
                    else:
                        heapq.heapreplace(best, item)
    return [t for _, _, t in sorted(best, key=lambda x: (-x[0], x[1]))]


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
