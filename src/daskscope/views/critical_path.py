"""One computation's critical path and what-if estimates (the computation page, its
JSON and ``daskscope critical-path``): the model is :mod:`daskscope.analysis.critical_path`,
through the task dependencies the task log records (each execution's trigger) wherever
it has them, through the task groups as stages where it does not (the view says which:
``model``, each group's ``model``); task durations come from the task log, or from the
groups' totals where it has none.

(Over 400 lines: the one view of both models of :mod:`daskscope.analysis.critical_path`,
with the task-log read and the per-group figures each model needs; they share the view's
dataclasses.)
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import quote

import numpy as np

from daskscope.analysis.code import code_frames, code_note
from daskscope.analysis.critical_path import (
    CriticalPath,
    JobGraph,
    JobPath,
    Stage,
    critical_path,
    estimate_jobs,
    job_graph,
    job_path,
    job_width,
    jobs_what_if,
    simulate_threads,
    stages_of,
    task_path,
    what_if,
)
from daskscope.analysis.duration import elapsed
from daskscope.analysis.graph import task_group_graph
from daskscope.catalogue import NO_ACTIVITY_COLOUR, task_action_colours
from daskscope.store import Store
from daskscope.tasklog.segments import key_text
from daskscope.views.cluster import CodeFrame
from daskscope.views.computation import GraphEdge
from daskscope.views.rows import pick

__all__ = [
    "AmbiguousComputation",
    "CriticalPathView",
    "PathGroup",
    "PathTask",
    "WhatIf",
    "critical_path_view",
]

#: Groups read for the path: a computation with more is refused (its graph is not one
#: a person reads, and the simulation would take seconds)
MAX_GROUPS = 20_000
#: Executions read from the task log; beyond, the groups are the stages of the group
#: model, every group's tasks its mean
MAX_TASKS = 200_000
#: Tasks past which only the counts measured and asked for are simulated with the group
#: model (a simulation is O(tasks log threads) in Python: 0.4 s for 50,000 tasks,
#: loaded; bench/critical_path.py) ...
MAX_SIMULATED_TASKS = 10_000
#: ... and with the task dependencies (jobs kept flat: the whole list costs about 1 s
#: of CPU at 100,000 tasks; bench/critical_path.py)
MAX_SIMULATED_JOBS = 100_000
#: Largest thread count asked for
MAX_THREADS = 100_000
#: Executions of a computation are looked for in task-log segments from this long
#: before its start to this long after its stop (workers' clocks are shifted to the
#: scheduler's by estimates that can be off by a fraction of a second)
LOG_MARGIN_S = 60.0

Source = Literal["task log", "group totals"]
#: Which model a figure came from: every group through its tasks' dependencies, every
#: group as a stage, or some each way
Model = Literal["task dependencies", "task groups", "mixed"]
GroupModel = Literal["task dependencies", "task group"]


@dataclass(frozen=True)
class PathGroup:
    """A task group as a stage: its tasks, their total and longest seconds, where it
    starts and ends with infinite workers (seconds from the computation's start), and
    whether it is on the critical path; ``x``, ``y`` place it in the group graph."""

    name: str
    prefix: str | None
    tasks: int
    total_s: float
    longest_s: float
    earliest_start_s: float
    earliest_finish_s: float
    on_path: bool
    durations_from: Source
    #: "task dependencies": its executions wait for their own dependencies (the task
    #: log's triggers); "task group": it is a stage, waiting for whole groups
    model: GroupModel
    x: int
    y: float
    colour: str


@dataclass(frozen=True)
class PathTask:
    """An execution on the task-level critical path: when it started (seconds from the
    computation's first task start), how long it ran (all its actions) and computed, and
    how long it waited after the dependency before it ended (None for the first)."""

    key: str
    group: str
    worker: str
    start_s: float
    duration_s: float
    compute_s: float
    waited_s: float | None


@dataclass(frozen=True)
class WhatIf:
    """The estimated wall time on ``threads`` worker threads."""

    threads: int
    wall_s: float


@dataclass(frozen=True)
class CriticalPathView:
    """A computation's code and figures, its group graph with the critical path, and the
    estimated wall time for 1, 2, 4, … threads and for infinitely many."""

    cluster_id: str
    computation_id: str
    started_at: float
    duration_s: float | None
    tasks_executed: int
    tasks_erred: int
    group_count: int
    code: list[str]
    code_frames: list[CodeFrame]
    code_note: str | None
    #: first task start to last task stop in the task log (else the computation's
    #: duration); the threads that ran its tasks (None without a task log)
    measured_wall_s: float | None
    measured_threads: int | None
    #: where the task durations came from: "task log" (every task), "group totals"
    #: (each group's seconds spread evenly over its tasks), or both ("mixed")
    durations_from: str
    #: the model the critical path and the estimates came from: "task dependencies"
    #: (every execution waits for the dependency it waited for last, as the task log
    #: recorded it), "task groups" (groups as stages: the task log has no dependencies
    #: of this computation), or "mixed" (stages for the groups named in ``model_note``)
    model: Model
    #: why (some) groups are stages; None when none is
    model_note: str | None
    #: the groups the critical path runs through, in order (a group twice in a row once)
    path: list[str]
    #: executions on the critical path (None with the group model)
    path_tasks: int | None
    critical_path_s: float
    #: the critical path's length over the measured wall time
    path_fraction: float | None
    estimates: list[WhatIf]
    #: False when the computation had too many tasks to simulate every count: then
    #: ``estimates`` holds 1 thread and the measured count only
    estimates_complete: bool
    #: the estimate for the thread count asked for (None: none asked)
    requested: WhatIf | None
    groups: list[PathGroup]
    edges: list[GraphEdge]
    #: the chain of executions that ended the computation, through the dependency each
    #: waited for last (the task log's record of it), first to last; its span (first
    #: start to last end), that over the measured wall time, and the time its tasks ran
    task_path: list[PathTask]
    task_path_s: float | None
    task_path_fraction: float | None
    task_path_busy_s: float | None
    #: why there is no task-level path (None when there is one)
    task_path_note: str | None
    timeline_url: str
    activity_colours: dict[str, str]


class TooLarge(ValueError):
    """The computation has more groups than :data:`MAX_GROUPS`."""


class AmbiguousComputation(ValueError):
    """The computation id given is the start of more than one."""


@dataclass
class _Log:
    """A computation's executions from the task log, column by column: key, group,
    worker and thread, first start and last stop over its actions, compute seconds and
    trigger (the dependency it waited for last); the groups with executions from
    segments written before triggers were kept."""

    keys: list[str] = field(default_factory=list)
    groups: list[str] = field(default_factory=list)
    workers: list[str] = field(default_factory=list)
    threads: list[int] = field(default_factory=list)
    first: list[float] = field(default_factory=list)
    last: list[float] = field(default_factory=list)
    compute: list[float] = field(default_factory=list)
    triggers: list[str | None] = field(default_factory=list)
    untriggered: set[str] = field(default_factory=set)

    def __len__(self) -> int:
        return len(self.keys)


def _read_log(
    store: Store, cluster_id: str, computation_id: str, comp: Mapping[str, Any]
) -> tuple[_Log, str | None]:
    """The computation's executions from the task log (column-wise: 100,000 of them
    read in a fraction of a second), or none and why."""
    log = _Log()
    start = comp["started_at"] - LOG_MARGIN_S if comp["started_at"] is not None else None
    stop = comp["stopped_at"] + LOG_MARGIN_S if comp["stopped_at"] is not None else None
    for item in store.scan_segments(cluster_id, start, stop):
        seg = item.decoded
        rows = np.flatnonzero(seg.naming(seg.computation, (computation_id,)))
        if not len(rows):
            continue
        if len(log) + len(rows) > MAX_TASKS:
            return _Log(), (
                f"the computation ran more than {MAX_TASKS:,} tasks: the task log is read "
                "task by task up to that many"
            )
        names = seg.names
        groups = [names[c] for c in seg.group[rows].tolist()]
        rests = seg.key_rest.to_pylist()
        log.keys += [
            key_text(form, rests[r] or "", g)
            for form, r, g in zip(seg.key_form[rows].tolist(), rows.tolist(), groups, strict=True)
        ]
        log.groups += groups
        log.workers += [names[c] for c in seg.worker[rows].tolist()]
        log.threads += seg.thread[rows].tolist()
        log.first += seg.first[rows].tolist()
        log.last += seg.last[rows].tolist()
        compute = seg.stop - seg.start
        code = seg.name_index("compute")
        computes = np.flatnonzero(seg.action_name == code) if code >= 0 else rows[:0]
        if len(computes):  # a second compute action of an execution
            np.add.at(
                compute,
                seg.action_row[computes],
                seg.action_stop[computes] - seg.action_start[computes],
            )
        log.compute += compute[rows].tolist()
        if seg.trigger_rest is None:  # written before triggers were kept
            log.triggers += [None] * len(rows)
            log.untriggered.update(groups)
            continue
        trigger_rests = seg.trigger_rest.to_pylist()
        log.triggers += [
            None if c < 0 else key_text(form, trigger_rests[r] or "", names[c])
            for c, form, r in zip(
                seg.trigger_group[rows].tolist(),
                seg.trigger_form[rows].tolist(),
                rows.tolist(),
                strict=True,
            )
        ]
    if not log:
        return log, "the task log holds no task of this computation"
    return log, None


def _durations(log: _Log) -> tuple[dict[str, list[float]], float | None, int | None]:
    """Compute seconds of every execution by group, the measured wall time and threads
    (empty, None, None without executions)."""
    if not log:
        return {}, None, None
    by_group: dict[str, list[float]] = defaultdict(list)
    for g, seconds in zip(log.groups, log.compute, strict=True):
        by_group[g].append(seconds)
    wall = max(log.last) - min(log.first)
    return dict(by_group), wall, len(set(zip(log.workers, log.threads, strict=True)))


def _task_path(log: _Log) -> list[PathTask]:
    if not log:
        return []
    origin = min(log.first)
    steps = task_path(log.keys, log.first, log.last, log.triggers)
    return [
        PathTask(
            key=log.keys[s.index],
            group=log.groups[s.index],
            worker=log.workers[s.index],
            start_s=log.first[s.index] - origin,
            duration_s=log.last[s.index] - log.first[s.index],
            compute_s=log.compute[s.index],
            waited_s=s.waited_s,
        )
        for s in steps
    ]


def _spread(group: Mapping[str, Any]) -> list[float]:
    """A group's compute seconds (all its seconds when Dask split none out) spread
    evenly over its executed tasks."""
    n = int(group.get("tasks_executed") or 0)
    if n == 0:
        return []
    seconds = (group.get("durations") or {}).get("compute") or group.get("duration_s") or 0.0
    return [float(seconds) / n] * n


@dataclass(frozen=True)
class _Figures:
    """What either model gives the view: the path through the groups, its length and
    executions, each group's figures, the estimates."""

    model: Model
    note: str | None
    path: list[str]
    path_tasks: int | None
    length_s: float
    #: group -> (tasks, total, longest, earliest start, earliest finish, on the path)
    groups: dict[str, tuple[int, float, float, float, float, bool]]
    group_model: dict[str, GroupModel]
    estimates: list[tuple[int, float]]
    complete: bool
    requested: float | None


def _through_groups(
    stages: Mapping[str, Stage], measured: Sequence[int], threads: int | None, note: str | None
) -> _Figures:
    """The group model: every group a stage."""
    path = critical_path(stages)
    complete = sum(len(st.durations) for st in stages.values()) <= MAX_SIMULATED_TASKS
    if complete:
        estimates = what_if(stages, *measured)
    else:
        one = sum(st.total_s for st in stages.values())
        estimates = sorted({1: one, **{n: simulate_threads(stages, n) for n in measured}}.items())
    on_path = set(path.path)
    return _Figures(
        model="task groups",
        note=note,
        path=list(path.path),
        path_tasks=None,
        length_s=path.length_s,
        groups={n: _stage_figures(st, path, n in on_path) for n, st in stages.items()},
        group_model=dict.fromkeys(stages, "task group"),
        estimates=estimates,
        complete=complete,
        requested=simulate_threads(stages, threads) if threads else None,
    )


def _stage_figures(
    st: Stage, path: CriticalPath, on_path: bool
) -> tuple[int, float, float, float, float, bool]:
    n = st.name
    return (len(st.durations), st.total_s, st.longest_s, path.earliest_start[n],
            path.earliest_finish[n], on_path)  # fmt: skip


def _through_tasks(
    log: _Log,
    covered: set[str],
    stages: Mapping[str, Stage],
    groups: Sequence[Mapping[str, Any]],
    measured: Sequence[int],
    threads: int | None,
) -> _Figures:
    """The task model: the executions of the ``covered`` groups through their triggers,
    the other groups as stages."""
    rows = [i for i, g in enumerate(log.groups) if g in covered]
    whole = len(rows) == len(log)

    def column(values: list[Any]) -> list[Any]:
        return values if whole else [values[i] for i in rows]

    staged = {n: st for n, st in stages.items() if n not in covered}
    graph = job_graph(
        column(log.keys),
        column(log.groups),
        column(log.first),
        column(log.last),
        column(log.compute),
        column(log.triggers),
        stages=staged,
        stage_starts={
            g["name"]: float(g["started_at"]) for g in groups if g.get("started_at") is not None
        },
        dependencies={n: st.dependencies for n, st in stages.items() if n in covered},
    )
    path = job_path(graph)
    width = job_width(graph, path)
    complete = graph.tasks <= MAX_SIMULATED_JOBS
    if complete:
        estimates = jobs_what_if(graph, *measured, path=path, width=width)
    else:
        estimates = sorted(
            {1: graph.total_s, **{n: estimate_jobs(graph, n, path=path, width=width)
                                  for n in measured}}.items()
        )  # fmt: skip
    known = set(stages)
    route: list[str] = []
    for j in path.jobs:
        g = graph.group[j]
        if g in known and (not route or route[-1] != g):
            route.append(g)
    with_tasks = sorted(n for n, st in staged.items() if st.durations)
    note = None
    if with_tasks:
        old = sorted(n for n in with_tasks if n in log.untriggered)
        absent = [n for n in with_tasks if n not in log.untriggered]
        reasons = []
        if absent:
            reasons.append(f"not in the task log: {_names(absent)}")
        if old:
            reasons.append(
                f"in task-log segments written before daskscope kept dependencies: {_names(old)}"
            )
        note = (
            f"{len(with_tasks)} of {len(stages)} task groups are stages of the group model, "
            "waited for as a whole (" + "; ".join(reasons) + ")"
        )
    return _Figures(
        model="mixed" if with_tasks else "task dependencies",
        note=note,
        path=route,
        path_tasks=len(path.jobs),
        length_s=path.length_s,
        groups=_group_figures(graph, path, known),
        group_model={n: "task group" if n in staged else "task dependencies" for n in stages},
        estimates=estimates,
        complete=complete,
        requested=estimate_jobs(graph, threads, path=path, width=width) if threads else None,
    )


def _names(names: Sequence[str], shown: int = 5) -> str:
    more = f" and {len(names) - shown:,} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def _group_figures(
    graph: JobGraph, path: JobPath, names: set[str]
) -> dict[str, tuple[int, float, float, float, float, bool]]:
    """Each group's jobs, their total and longest seconds, their earliest start and
    finish with infinite workers (a group without jobs: its join's), and whether the
    critical path runs through it."""
    on_path = {graph.group[j] for j in path.jobs}
    # [tasks, total, longest, first start, last finish] of the jobs; a join's times
    found: dict[str, list[Any]] = {}
    ends: dict[str, tuple[float, float]] = {}
    starts, finishes, seconds, join = (
        path.earliest_start, path.earliest_finish, graph.seconds, graph.join,
    )  # fmt: skip
    for j, g in enumerate(graph.group):
        if join[j]:
            ends[g] = (starts[j], finishes[j])
            continue
        f = found.get(g)
        if f is None:
            found[g] = [1, seconds[j], seconds[j], starts[j], finishes[j]]
            continue
        f[0] += 1
        f[1] += seconds[j]
        if seconds[j] > f[2]:
            f[2] = seconds[j]
        if starts[j] < f[3]:
            f[3] = starts[j]
        if finishes[j] > f[4]:
            f[4] = finishes[j]
    out = {}
    for g in names:
        lo, hi = ends.get(g, (0.0, 0.0))
        tasks, total, longest, first, last = found.get(g, (0, 0.0, 0.0, lo, hi))
        out[g] = (tasks, total, longest, first, last, g in on_path)
    return out


def _computation_id(store: Store, cluster_id: str, asked: str) -> str | None:
    """The full id of the cluster's computation ``asked`` (an id or a unique start of
    one); None when none. Raises :class:`AmbiguousComputation`."""
    found = store.computation_ids_starting(cluster_id, asked, limit=2)
    if asked in found:
        return asked
    if len(found) > 1:
        raise AmbiguousComputation(
            f"{asked!r} is the start of more than one computation of cluster {cluster_id}: "
            "give more of its id (the cluster page lists its computations)"
        )
    return found[0] if found and asked else None


def critical_path_view(
    store: Store, cluster_id: str, computation_id: str, *, threads: int | None = None
) -> CriticalPathView | None:
    """The view (None: the cluster has no such computation; an id or a unique start of
    one). ``threads``: also estimate for this many threads. Raises :class:`TooLarge`
    past :data:`MAX_GROUPS` groups, :class:`AmbiguousComputation`, and ``ValueError``
    for a thread count below 1 or above :data:`MAX_THREADS`."""
    if threads is not None and not 1 <= threads <= MAX_THREADS:
        raise ValueError(f"threads must be between 1 and {MAX_THREADS}, not {threads}")
    full_id = _computation_id(store, cluster_id, computation_id)
    if full_id is None:
        return None
    computation_id = full_id
    found = store.computation_graph_groups(cluster_id, computation_id, limit=MAX_GROUPS + 1)
    if found is None:
        return None
    comp, groups, total = found
    if total > MAX_GROUPS:
        raise TooLarge(
            f"computation {computation_id} has {total:,} task groups; the critical path is "
            f"worked out for at most {MAX_GROUPS:,}"
        )
    log, missing = _read_log(store, cluster_id, computation_id, comp)
    logged, wall, lanes = _durations(log)
    chain = _task_path(log)
    chain_s = chain[-1].start_s + chain[-1].duration_s - chain[0].start_s if chain else None
    sources: dict[str, Source] = {
        g["name"]: "task log" if g["name"] in logged else "group totals" for g in groups
    }
    stages = stages_of(
        (g["name"], g.get("dependencies") or [], logged.get(g["name"]) or _spread(g))
        for g in groups
    )
    layout = {n["name"]: n for n in task_group_graph(groups)["nodes"]}
    colours = task_action_colours(n["activity"] for n in layout.values())
    if wall is None:
        wall = elapsed(comp["started_at"], comp["stopped_at"])
    used = set(sources.values())
    measured = [lanes] if lanes else []
    covered = {g for g in logged if g not in log.untriggered}
    if covered:
        figures = _through_tasks(log, covered, stages, groups, measured, threads)
    else:
        why = missing or (
            "the task log of this computation was written before daskscope kept each "
            "task's dependencies"
        )
        figures = _through_groups(stages, measured, threads, why)
    return CriticalPathView(
        cluster_id=cluster_id,
        computation_id=computation_id,
        started_at=comp["started_at"],
        duration_s=elapsed(comp["started_at"], comp["stopped_at"]),
        tasks_executed=comp["tasks_executed"],
        tasks_erred=comp["tasks_erred"],
        group_count=comp["group_count"],
        code=comp["code"],
        code_frames=[pick(CodeFrame, f) for f in code_frames(comp["code"])],
        code_note=code_note(comp["code"]),
        measured_wall_s=wall,
        measured_threads=lanes,
        durations_from=used.pop() if len(used) == 1 else ("mixed" if used else "task log"),
        model=figures.model,
        model_note=figures.note,
        path=figures.path,
        path_tasks=figures.path_tasks,
        critical_path_s=figures.length_s,
        path_fraction=figures.length_s / wall if wall else None,
        estimates=[WhatIf(n, s) for n, s in figures.estimates],
        estimates_complete=figures.complete,
        requested=WhatIf(threads, figures.requested)
        if threads and figures.requested is not None
        else None,
        groups=[
            PathGroup(
                name=n,
                prefix=layout[n]["prefix"],
                tasks=f[0],
                total_s=f[1],
                longest_s=f[2],
                earliest_start_s=f[3],
                earliest_finish_s=f[4],
                on_path=f[5],
                durations_from=sources[n],
                model=figures.group_model[n],
                x=layout[n]["x"],
                y=layout[n]["y"],
                colour=colours.get(layout[n]["activity"] or "", NO_ACTIVITY_COLOUR),
            )
            for n, f in sorted(figures.groups.items(), key=lambda i: (i[1][3], i[0]))
        ],
        edges=[GraphEdge(d, n) for n, st in stages.items() for d in st.dependencies],
        task_path=chain,
        task_path_s=chain_s,
        task_path_fraction=chain_s / wall if chain_s is not None and wall else None,
        task_path_busy_s=sum(t.duration_s for t in chain) if chain else None,
        task_path_note=missing,
        timeline_url=f"/clusters/{cluster_id}/timeline?computation={quote(computation_id)}",
        activity_colours=colours,
    )
