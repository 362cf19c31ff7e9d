"""The task timeline of a cluster (or of one computation, span or task group): one row
per worker thread, what it ran and when, as the timeline page, its JSON
(``/api/v1/clusters/{id}/timeline``) and ``daskscope timeline`` show it.

(Over 400 lines: one view and its dataclasses, built raw or binned from one window of
the task log's reads (:mod:`daskscope.tasklog`); both forms share the lanes, keys, gaps
and totals built here.)

A window holding few executions comes with every task (``raw``); a larger one comes as
bins per thread, each with its busy seconds by activity and the group that computed
most in it. Zooming in asks for a narrower window, until the tasks themselves come back.

Colours: compute is coloured by the task's prefix, as Dask's task stream colours it (so
a loop's hundred groups of the same prefix read as one colour), the other activities in
their colours of the metric catalogue (``daskscope.catalogue.TASK_ACTIONS``), as every
page draws them.
"""

from __future__ import annotations

import math
import zlib
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from dask.utils import key_split

from daskscope.catalogue import task_action_colours
from daskscope.store import Store
from daskscope.tasklog.forms import (
    COMPUTE,
    LaneColumns,
    TaskAction,
    TaskExecution,
    TimelineExtent,
    TimelineWindow,
)
from daskscope.tasklog.reads import LogVersion
from daskscope.tasklog.timeline import Interval, clipped_seconds, idle_gaps, spread

__all__ = [
    "DEFAULT_BINS",
    "MAX_BINS",
    "MAX_RAW_TASKS",
    "PREFIX_PALETTE",
    "ActivityKey",
    "BinGroup",
    "IdleGap",
    "PrefixKey",
    "TaskAction",
    "TaskDetailView",
    "TimelineBins",
    "TimelineFilters",
    "TimelineLane",
    "TimelineTask",
    "TimelineTotals",
    "TimelineView",
    "UtilisationBin",
    "prefix_colour",
    "span_of_tag",
    "task_detail_view",
    "timeline_view",
]

#: Bins per thread when the window holds more than :data:`MAX_RAW_TASKS` executions:
#: about one per pixel of a wide screen
DEFAULT_BINS = 1000
MAX_BINS = 4000
#: Windows holding at most this many executions come with every task
MAX_RAW_TASKS = 5000
#: Points of the utilisation series, whatever the window
UTILISATION_BINS = 100
#: Gaps and slowest tasks listed
LISTED = 10

#: Compute colours, one per task prefix (by a hash of its name, stable across pages and
#: windows); none of them a colour of the catalogue's activities or task actions
PREFIX_PALETTE = (
    "#1f77b4", "#2ca02c", "#9467bd", "#17becf", "#8c564b", "#e377c2", "#bcbd22",
    "#393b79", "#637939", "#7b4173", "#3182bd", "#31a354", "#756bb1", "#6baed6",
    "#74c476", "#a55194", "#5254a3", "#8ca252", "#ce6dbd", "#0b6e4f",
)  # fmt: skip


def prefix_colour(prefix: str) -> str:
    """The compute colour of a task prefix: the same on every page and in every window."""
    return PREFIX_PALETTE[zlib.crc32(prefix.encode()) % len(PREFIX_PALETTE)]


@dataclass(frozen=True)
class TimelineFilters:
    """What the tasks shown were chosen by: ``span`` keeps the tasks Dask put in that
    span itself (the store's task log knows a task's innermost span only)."""

    computation: str | None
    span: str | None
    group: str | None


@dataclass(frozen=True)
class TimelineTask:
    """One execution, drawn on row ``lane`` of :attr:`TimelineView.lanes`."""

    key: str
    group: str
    prefix: str
    lane: int
    start: float
    stop: float
    #: seconds of its compute actions
    compute_s: float
    state: str
    nbytes: int | None
    computation_id: str | None
    span_id: str | None
    actions: list[TaskAction]
    #: the key of the dependency whose end made it ready (the last of its dependencies
    #: to end, as the task log records it; the page draws it as an arrow); None when it
    #: waited for none, or the log was written before triggers were kept
    trigger: str | None = None


@dataclass(frozen=True)
class BinGroup:
    """A group that computed most in some bin: its prefix and that prefix's colour."""

    name: str
    prefix: str
    colour: str


@dataclass(frozen=True)
class TimelineBins:
    """A thread's bins that hold something, column-wise (item ``i`` of each list is
    one bin, ``[start[i], stop[i])``): seconds by activity, executions overlapping it,
    and the group that computed most in it (an index into
    :attr:`TimelineView.bin_groups`, -1 when nothing computed). Thousands of bins
    a thread read and travel faster as lists than as objects."""

    start: list[float]
    stop: list[float]
    tasks: list[int]
    top_group: list[int]
    #: per activity, its seconds in each bin
    busy_s: dict[str, list[float]]


@dataclass(frozen=True)
class TimelineLane:
    """One worker thread that ran tasks in the cluster: ``label`` is "worker · thread
    number" (threads numbered from 1 within their worker, by Dask's thread ident)."""

    label: str
    worker: str
    thread: int
    #: compute seconds in the window
    busy_s: float
    #: None when the window is raw
    bins: TimelineBins | None


@dataclass(frozen=True)
class PrefixKey:
    """A colour of the legend: compute of tasks of this prefix."""

    prefix: str
    colour: str


@dataclass(frozen=True)
class ActivityKey:
    """An activity in the window, its colour and its seconds there (compute: the colour
    of its prefix, ``colour`` is None)."""

    name: str
    colour: str | None
    seconds: float


@dataclass(frozen=True)
class IdleGap:
    """Time in the window when no thread computed (``lane`` None), or when one thread
    (``lane`` its label) did not."""

    start: float
    stop: float
    duration_s: float
    lane: str | None


@dataclass(frozen=True)
class UtilisationBin:
    """Busy thread-seconds in ``[start, stop)`` over what the threads could give
    (``fraction`` capped at 1: every thread busy)."""

    start: float
    stop: float
    busy_s: float
    fraction: float


@dataclass(frozen=True)
class TimelineTotals:
    """``tasks``: executions overlapping the window; ``busy_s``: their compute seconds
    in it; ``utilisation``: ``busy_s / (threads * window)``; ``executions``, ``first``,
    ``last``: of the whole cluster (or computation)."""

    tasks: int
    workers: int
    threads: int
    busy_s: float
    utilisation: float | None
    executions: int
    first: float | None
    last: float | None


@dataclass(frozen=True)
class TimelineView:
    """What the cluster's threads did in ``[start, stop)``.

    ``recorded`` is false when the cluster has no task recorded (recorded with
    ``daskscope.tasks.enabled`` off, or before the task log existed). ``raw``: ``tasks``
    holds every execution overlapping the window; else ``lanes`` hold bins.
    ``resolution_s`` is how exact the gaps are: 0 when raw, else a bin's width."""

    cluster_id: str
    start: float | None
    stop: float | None
    filters: TimelineFilters
    recorded: bool
    raw: bool
    resolution_s: float
    totals: TimelineTotals
    lanes: list[TimelineLane]
    tasks: list[TimelineTask]
    prefixes: list[PrefixKey]
    activities: list[ActivityKey]
    idle_gaps: list[IdleGap]
    lane_gaps: list[IdleGap]
    utilisation: list[UtilisationBin]
    #: the groups the bins name (``lanes[].bins.top_group``)
    bin_groups: list[BinGroup]
    #: the longest executions (first start to last stop, so waiting for transfers
    #: counts) of the cluster or computation, with the group filter, in any window
    slowest: list[TimelineTask]


@dataclass(frozen=True)
class TaskDetailView:
    """Every execution of one key (a recomputation after a worker loss is another)."""

    cluster_id: str
    key: str
    lanes: list[TimelineLane]
    executions: list[TimelineTask]
    prefixes: list[PrefixKey]


# -- what the whole cluster holds, kept until it records more ----------------------------

# each kept by the Store (store.kept: a closed store drops them, two stores never share
# them) with the version of the log it was read from (Store.log_version), at most _KEPT
_KEPT = 256
_Extents = dict[tuple[str, str | None], tuple[LogVersion, TimelineExtent]]
_Lanes = dict[str, tuple[LogVersion, list[tuple[str, int]]]]
_Slowest = dict[tuple[str, str | None, str | None], tuple[LogVersion, list[TaskExecution]]]


def _version(store: Store, cluster_id: str) -> LogVersion:
    """How much the cluster's task log holds: the extent and the lanes read every
    segment, so they are read again only when this changes."""
    return store.log_version(cluster_id)


def _extent(
    store: Store, cluster_id: str, computation_id: str | None, version: LogVersion
) -> TimelineExtent:
    extents: _Extents = store.kept("views.timeline.extents", dict)
    key = (cluster_id, computation_id)
    kept = extents.get(key)
    if kept is not None and kept[0] == version:
        return kept[1]
    extent = store.timeline_extent(cluster_id, computation_id=computation_id)
    if len(extents) > _KEPT:
        extents.clear()
    extents[key] = (version, extent)
    return extent


def _slowest(
    store: Store,
    cluster_id: str,
    computation_id: str | None,
    group: str | None,
    version: LogVersion,
) -> list[TaskExecution]:
    """The longest executions: the same in every window, read once per state of the log."""
    slowest: _Slowest = store.kept("views.timeline.slowest", dict)
    key = (cluster_id, computation_id, group)
    kept = slowest.get(key)
    if kept is not None and kept[0] == version:
        return kept[1]
    found = store.slowest_tasks(
        cluster_id, group=group, computation_id=computation_id, limit=LISTED
    )
    if len(slowest) > _KEPT:
        slowest.clear()
    slowest[key] = (version, found)
    return found


def _cluster_lanes(store: Store, cluster_id: str, version: LogVersion) -> list[tuple[str, int]]:
    """Every (worker, thread) that ran a task in the cluster, sorted (one binned query
    over the whole log)."""
    lanes: _Lanes = store.kept("views.timeline.lanes", dict)
    kept = lanes.get(cluster_id)
    if kept is not None and kept[0] == version:
        return kept[1]
    whole = store.timeline_window(cluster_id, max_tasks=0, bins=1)
    found = sorted({(lane.worker, lane.thread) for lane in whole.lanes})
    if len(lanes) > _KEPT:
        lanes.clear()
    lanes[cluster_id] = (version, found)
    return found


def _labels(lanes: Sequence[tuple[str, int]]) -> list[str]:
    numbered: dict[str, int] = defaultdict(int)
    labels = []
    for worker, _ in lanes:  # sorted: threads of a worker in ident order
        numbered[worker] += 1
        labels.append(f"{worker.split('://', 1)[-1]} · {numbered[worker]}")
    return labels


def _lanes_with(
    cluster_lanes: list[tuple[str, int]], extra: Iterable[tuple[str, int]]
) -> list[tuple[str, int]]:
    missing = set(extra) - set(cluster_lanes)
    return sorted([*cluster_lanes, *missing]) if missing else cluster_lanes


# -- tasks -----------------------------------------------------------------------------


def _compute_intervals(task: TaskExecution) -> list[Interval]:
    found = [(a.start, a.stop) for a in task.actions if a.action == COMPUTE]
    if not found and not task.actions:  # no startstops reported: its whole span
        found = [(task.start, task.stop)]
    return found


def _task(task: TaskExecution, lane: int) -> TimelineTask:
    return TimelineTask(
        key=task.key,
        group=task.group,
        prefix=task.prefix,
        lane=lane,
        start=task.start,
        stop=task.stop,
        compute_s=sum(b - a for a, b in _compute_intervals(task)),
        state=task.state,
        nbytes=task.nbytes,
        computation_id=task.computation_id,
        span_id=task.span_id,
        actions=list(task.actions),
        trigger=task.trigger,
    )


def _prefix_keys(seconds: dict[str, float]) -> list[PrefixKey]:
    ordered = sorted(seconds, key=lambda p: (-seconds[p], p))
    return [PrefixKey(p, prefix_colour(p)) for p in ordered]


# -- the window ------------------------------------------------------------------------


def timeline_view(
    store: Store,
    cluster_id: str,
    start: float | None = None,
    stop: float | None = None,
    *,
    computation_id: str | None = None,
    span_id: str | None = None,
    group: str | None = None,
    width_bins: int = DEFAULT_BINS,
    max_tasks: int = MAX_RAW_TASKS,
) -> TimelineView:
    """The window ``[start, stop)`` (None: from the first task / to the last one) of
    the tasks that pass the filters; raises :class:`~daskscope.store.UnknownCluster`."""
    _check_window(start, stop, width_bins)
    filters = TimelineFilters(computation_id, span_id, group)
    window = store.timeline_window(
        cluster_id,
        start,
        stop,
        computation_id=computation_id,
        span_id=span_id,
        group=group,
        max_tasks=max_tasks,
        bins=width_bins,
    )
    version = _version(store, cluster_id)
    extent = _extent(store, cluster_id, computation_id, version)
    if version[0] == 0:
        return _empty(cluster_id, start, stop, filters, extent)
    pairs = _lanes_with(
        _cluster_lanes(store, cluster_id, version),
        [(lane.worker, lane.thread) for lane in window.lanes]
        + [(t.worker, t.thread) for t in window.tasks],
    )
    index = {pair: i for i, pair in enumerate(pairs)}
    slowest = _slowest(store, cluster_id, computation_id, group, version)
    pairs = _lanes_with(pairs, [(t.worker, t.thread) for t in slowest])
    index = {pair: i for i, pair in enumerate(pairs)}
    labels = _labels(pairs)
    if window.raw:
        shown = _raw_parts(window, index, labels)
    else:
        shown = _binned_parts(window, index, labels)
    threads = len(pairs)
    span = window.stop - window.start
    busy = sum(lane.busy_s for lane in shown.lanes)
    return TimelineView(
        cluster_id=cluster_id,
        start=window.start,
        stop=window.stop,
        filters=filters,
        recorded=True,
        raw=window.raw,
        resolution_s=shown.resolution,
        totals=TimelineTotals(
            tasks=window.total_tasks,
            workers=len({w for w, _ in pairs}),
            threads=threads,
            busy_s=busy,
            utilisation=busy / (threads * span) if threads and span > 0 else None,
            executions=extent.executions,
            first=extent.first,
            last=extent.last,
        ),
        lanes=shown.lanes,
        tasks=shown.tasks,
        prefixes=shown.prefixes,
        activities=shown.activities,
        idle_gaps=shown.idle_gaps,
        lane_gaps=shown.lane_gaps,
        utilisation=_utilisation(shown.weighted, window.start, window.stop, threads),
        bin_groups=shown.bin_groups,
        slowest=[_task(t, index[(t.worker, t.thread)]) for t in slowest],
    )


def _check_window(start: float | None, stop: float | None, width_bins: int) -> None:
    for name, value in (("start", start), ("stop", stop)):
        if value is not None and not math.isfinite(value):
            raise ValueError(f"the window's {name} must be a finite number, got {value}")
    if start is not None and stop is not None and not math.isfinite(stop - start):
        raise ValueError("the window is too wide: give start and stop as epoch seconds")
    if start is not None and stop is not None and stop <= start:
        raise ValueError(f"the window's stop ({stop}) must be after its start ({start})")
    if not 1 <= width_bins <= MAX_BINS:
        raise ValueError(f"bins must be between 1 and {MAX_BINS}, got {width_bins}")


@dataclass
class _Parts:
    lanes: list[TimelineLane]
    tasks: list[TimelineTask]
    prefixes: list[PrefixKey]
    activities: list[ActivityKey]
    idle_gaps: list[IdleGap]
    lane_gaps: list[IdleGap]
    #: (start, stop, compute seconds) to spread over the utilisation bins
    weighted: list[tuple[float, float, float]]
    resolution: float
    bin_groups: list[BinGroup]


def _activity_keys(seconds: dict[str, float]) -> list[ActivityKey]:
    order = sorted(seconds, key=lambda a: (a != COMPUTE, -seconds[a], a))
    colours = task_action_colours(order)
    return [ActivityKey(a, None if a == COMPUTE else colours[a], seconds[a]) for a in order]


def _gaps(
    busy_by_lane: dict[int, list[Interval]], labels: list[str], start: float, stop: float
) -> tuple[list[IdleGap], list[IdleGap]]:
    every = [iv for ivs in busy_by_lane.values() for iv in ivs]
    whole = [IdleGap(a, b, b - a, None) for a, b in idle_gaps(every, start, stop)[:LISTED]]
    per_lane = [
        IdleGap(a, b, b - a, labels[i])
        for i in range(len(labels))
        for a, b in idle_gaps(busy_by_lane.get(i, []), start, stop)[:LISTED]
    ]
    per_lane.sort(key=lambda g: (-g.duration_s, g.start, g.lane or ""))
    return whole, per_lane[:LISTED]


def _raw_parts(
    window: TimelineWindow, index: dict[tuple[str, int], int], labels: list[str]
) -> _Parts:
    start, stop = window.start, window.stop
    tasks = [_task(t, index[(t.worker, t.thread)]) for t in window.tasks]
    tasks.sort(key=lambda t: (t.start, t.lane, t.key))
    busy_by_lane: dict[int, list[Interval]] = defaultdict(list)
    activity: dict[str, float] = defaultdict(float)
    by_prefix: dict[str, float] = defaultdict(float)
    for t in tasks:
        for a in t.actions:
            activity[a.action] += max(0.0, min(a.stop, stop) - max(a.start, start))
        computing = [(a.start, a.stop) for a in t.actions if a.action == COMPUTE] or (
            [] if t.actions else [(t.start, t.stop)]
        )
        if not t.actions:
            activity[COMPUTE] += clipped_seconds(computing, start, stop)
        busy_by_lane[t.lane].extend(computing)
        by_prefix[t.prefix] += clipped_seconds(computing, start, stop)
    lanes = [
        TimelineLane(labels[i], w, th, clipped_seconds(busy_by_lane.get(i, []), start, stop), None)
        for (w, th), i in index.items()
    ]
    whole, per_lane = _gaps(busy_by_lane, labels, start, stop)
    weighted = [(a, b, b - a) for ivs in busy_by_lane.values() for a, b in ivs]
    return _Parts(
        lanes,
        tasks,
        _prefix_keys(by_prefix),
        _activity_keys(activity),
        whole,
        per_lane,
        weighted,
        0.0,
        [],
    )


def _binned_parts(
    window: TimelineWindow, index: dict[tuple[str, int], int], labels: list[str]
) -> _Parts:
    start, stop = window.start, window.stop
    given: dict[int, LaneColumns] = {
        index[(lane.worker, lane.thread)]: lane.columns
        for lane in window.lanes
        if lane.columns is not None
    }
    busy_by_lane: dict[int, list[Interval]] = {}
    activity: dict[str, float] = defaultdict(float)
    by_prefix: dict[str, float] = defaultdict(float)
    # a window has few groups and thousands of bins: each group's prefix and colour once
    groups: dict[str, int] = {}
    bin_groups: list[BinGroup] = []
    widest = 0.0
    lanes = []
    computed: list[LaneColumns] = []
    for (worker, thread), i in index.items():
        columns = given.get(i)
        if columns is None:
            lanes.append(TimelineLane(labels[i], worker, thread, 0.0, _no_bins()))
            continue
        bins, lane_widest = _column_bins(columns, groups, bin_groups, activity, by_prefix)
        computing = bins.busy_s.get(COMPUTE, [])
        busy_by_lane[i] = _busy_runs(columns)
        computed.append(columns)
        widest = max(widest, lane_widest)
        lanes.append(TimelineLane(labels[i], worker, thread, math.fsum(computing), bins))
    whole, per_lane = _gaps(busy_by_lane, labels, start, stop)
    # compute summed over the threads per bin: bins share their edges across threads,
    # so the utilisation series spreads one interval a bin, not one a bin and thread
    by_bin = _compute_per_bin(computed)
    weighted = [(a, b, seconds) for (a, b), seconds in by_bin.items()]
    return _Parts(
        lanes,
        [],
        _prefix_keys(by_prefix),
        _activity_keys(activity),
        whole,
        per_lane,
        weighted,
        widest,
        bin_groups,
    )


def _column_bins(
    columns: LaneColumns,
    groups: dict[str, int],
    bin_groups: list[BinGroup],
    activity: dict[str, float],
    by_prefix: dict[str, float],
) -> tuple[TimelineBins, float]:
    """A lane's bins that hold something, from the store's arrays (and its widest bin);
    adds its seconds per activity and per prefix of each bin's main group."""
    kept = columns.tasks > 0
    for seconds in columns.busy.values():
        kept |= seconds > 0
    busy = {name: seconds[kept] for name, seconds in sorted(columns.busy.items())}
    busy = {name: seconds for name, seconds in busy.items() if (seconds > 0).any()}
    for name, seconds in busy.items():
        activity[name] += float(seconds.sum())
    computing = busy.get(COMPUTE, np.zeros(int(kept.sum())))
    top = columns.top[kept]
    # the store's group indices as the view's (a group's prefix and colour once)
    present = np.unique(top[top >= 0]).tolist()
    mapping = np.full(len(columns.groups) + 1, -1, dtype=np.int64)
    for g in present:
        name = columns.groups[g]
        at = groups.get(name)
        if at is None:
            prefix = key_split(name)
            at = groups[name] = len(bin_groups)
            bin_groups.append(BinGroup(name, prefix, prefix_colour(prefix)))
        mapping[g] = at
        by_prefix[bin_groups[at].prefix] += float(computing[top == g].sum())
    starts, stops = columns.start[kept], columns.stop[kept]
    widest = float((stops - starts).max()) if len(starts) else 0.0
    bins = TimelineBins(
        start=starts.tolist(),
        stop=stops.tolist(),
        tasks=columns.tasks[kept].tolist(),
        top_group=mapping[top].tolist(),
        busy_s={name: seconds.tolist() for name, seconds in busy.items()},
    )
    return bins, widest


def _busy_runs(columns: LaneColumns) -> list[Interval]:
    """The lane's bins that computed, runs of neighbours merged (what idle gaps read)."""
    seconds = columns.busy.get(COMPUTE)
    if seconds is None:
        return []
    busy = np.r_[False, seconds > 0, False]
    edges = np.flatnonzero(busy[1:] != busy[:-1])
    firsts, lasts = edges[0::2], edges[1::2] - 1
    return list(zip(columns.start[firsts].tolist(), columns.stop[lasts].tolist(), strict=True))


def _compute_per_bin(lanes: list[LaneColumns]) -> dict[tuple[float, float], float]:
    """Compute seconds summed over the lanes per bin (the lanes of a window share
    their bins' edges)."""
    total: dict[tuple[float, float], float] = {}
    by_edges: dict[int, list[LaneColumns]] = defaultdict(list)
    for lane in lanes:
        by_edges[id(lane.start)].append(lane)
    for same in by_edges.values():
        seconds = sum(
            (lane.busy[COMPUTE] for lane in same if COMPUTE in lane.busy),
            np.zeros(len(same[0].start)),
        )
        where = np.flatnonzero(seconds > 0)
        for a, b, x in zip(
            same[0].start[where].tolist(),
            same[0].stop[where].tolist(),
            seconds[where].tolist(),
            strict=True,
        ):
            total[(a, b)] = total.get((a, b), 0.0) + x
    return total


def _no_bins() -> TimelineBins:
    return TimelineBins([], [], [], [], {})


def _utilisation(
    weighted: list[tuple[float, float, float]], start: float, stop: float, threads: int
) -> list[UtilisationBin]:
    if stop <= start or threads == 0:
        return []
    busy = spread(weighted, start, stop, UTILISATION_BINS)
    width = (stop - start) / UTILISATION_BINS
    return [
        UtilisationBin(
            start + i * width,
            start + (i + 1) * width,
            seconds,
            min(1.0, seconds / (threads * width)),
        )
        for i, seconds in enumerate(busy)
    ]


def _empty(
    cluster_id: str,
    start: float | None,
    stop: float | None,
    filters: TimelineFilters,
    extent: TimelineExtent,
) -> TimelineView:
    return TimelineView(
        cluster_id=cluster_id,
        start=start,
        stop=stop,
        filters=filters,
        recorded=False,
        raw=True,
        resolution_s=0.0,
        totals=TimelineTotals(0, 0, 0, 0.0, None, extent.executions, extent.first, extent.last),
        lanes=[],
        tasks=[],
        prefixes=[],
        activities=[],
        idle_gaps=[],
        lane_gaps=[],
        utilisation=[],
        bin_groups=[],
        slowest=[],
    )


# -- one key ---------------------------------------------------------------------------


def task_detail_view(store: Store, cluster_id: str, key: str) -> TaskDetailView | None:
    """Every execution of ``key`` (None: the cluster recorded no task of that key)."""
    found = store.task_executions(cluster_id, key)
    if not found:
        return None
    # numbered as on the timeline: among all the cluster's threads
    version = _version(store, cluster_id)
    pairs = _lanes_with(
        _cluster_lanes(store, cluster_id, version), [(t.worker, t.thread) for t in found]
    )
    index = {pair: i for i, pair in enumerate(pairs)}
    labels = _labels(pairs)
    executions = [_task(t, index[(t.worker, t.thread)]) for t in found]
    executions.sort(key=lambda t: t.start)
    lanes = [
        TimelineLane(labels[i], w, th, sum(t.compute_s for t in executions if t.lane == i), None)
        for (w, th), i in index.items()
    ]
    seconds: dict[str, float] = defaultdict(float)
    for t in executions:
        seconds[t.prefix] += t.compute_s
    return TaskDetailView(cluster_id, key, lanes, executions, _prefix_keys(seconds))


# -- spans -----------------------------------------------------------------------------


def span_of_tag(store: Store, cluster_id: str, tag_or_id: str) -> str:
    """The id of the span named by ``tag_or_id``: a span id, or a tag carried by one
    span (with the spans below it, which carry their parents' tags too). Raises
    ``LookupError`` saying which spans there are when none or several match."""
    spans, _ = store.span_tree_rows(cluster_id)
    ids = {r["span_id"] for r in spans}
    if tag_or_id in ids:
        return tag_or_id
    tagged = {r["span_id"]: r for r in spans if tag_or_id in (r["name"] or ())}
    # the tagged spans whose parent is not tagged: the tops of the tagged subtrees
    tops = [r for r in tagged.values() if r["parent_span_id"] not in tagged]
    if len(tops) == 1:
        return str(tops[0]["span_id"])
    tags = sorted({t for r in spans for t in (r["name"] or ())})
    if not tops:
        known = ", ".join(repr(t) for t in tags[:20]) or "none: the cluster recorded no span"
        raise LookupError(
            f"no span of cluster {cluster_id} has the tag {tag_or_id!r} (tags: {known})"
        )
    listed = ", ".join(f"{r['span_id']} ({' / '.join(r['name'])})" for r in tops[:10])
    raise LookupError(f"{len(tops)} spans carry the tag {tag_or_id!r}: give one's id ({listed})")
