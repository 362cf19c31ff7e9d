"""One computation's critical path and what-if estimates (the computation page, its
JSON and ``daskscope critical-path``): the model is :mod:`daskscope.analysis.critical_path`;
task durations come from the task log, or from the groups' totals where it has none."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import quote

from daskscope.analysis.code import code_frames, code_note
from daskscope.analysis.critical_path import (
    critical_path,
    simulate_threads,
    stages_of,
    task_path,
    what_if,
)
from daskscope.analysis.duration import elapsed
from daskscope.analysis.graph import ACTIVITY_COLOURS, task_group_graph
from daskscope.store import Store
from daskscope.store.groups import computation_graph_groups
from daskscope.store.timeline import TaskExecution, timeline_window
from daskscope.views.cluster import CodeFrame
from daskscope.views.computation import GraphEdge
from daskscope.views.rows import pick

__all__ = ["CriticalPathView", "PathGroup", "PathTask", "WhatIf", "critical_path_view"]

#: Groups read for the path: a computation with more is refused (its graph is not one
#: a person reads, and the simulation would take seconds)
MAX_GROUPS = 20_000
#: Executions read from the task log; beyond, every group's tasks are its mean
MAX_TASKS = 50_000
#: Tasks past which only the counts measured and asked for are simulated (a simulation
#: is O(tasks log threads) in Python: 0.4 s for 50,000 tasks, loaded; bench/critical_path.py)
MAX_SIMULATED_TASKS = 10_000
#: Largest thread count asked for
MAX_THREADS = 100_000

Source = Literal["task log", "group totals"]


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
    path: list[str]
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


def _compute_s(task: TaskExecution) -> float:
    return sum(a.stop - a.start for a in task.actions if a.action == "compute")


def _executions(
    store: Store, cluster_id: str, computation_id: str
) -> tuple[list[TaskExecution], str | None]:
    """The computation's executions from the task log, or none and why."""
    window = timeline_window(
        store, cluster_id, computation_id=computation_id, max_tasks=MAX_TASKS, bins=1
    )
    if not window.raw:
        return [], (
            f"the computation ran more than {MAX_TASKS:,} tasks: the task log is read "
            "task by task up to that many"
        )
    if not window.tasks:
        return [], "the task log holds no task of this computation"
    return list(window.tasks), None


def _durations(
    tasks: list[TaskExecution],
) -> tuple[dict[str, list[float]], float | None, int | None]:
    """Compute seconds of every execution by group, the measured wall time and threads
    (empty, None, None without executions)."""
    if not tasks:
        return {}, None, None
    by_group: dict[str, list[float]] = defaultdict(list)
    for t in tasks:
        by_group[t.group].append(_compute_s(t))
    wall = max(t.stop for t in tasks) - min(t.start for t in tasks)
    return dict(by_group), wall, len({(t.worker, t.thread) for t in tasks})


def _task_path(tasks: list[TaskExecution]) -> list[PathTask]:
    if not tasks:
        return []
    origin = min(t.start for t in tasks)
    steps = task_path(
        [t.key for t in tasks],
        [t.start for t in tasks],
        [t.stop for t in tasks],
        [t.trigger for t in tasks],
    )
    return [
        PathTask(
            key=tasks[s.index].key,
            group=tasks[s.index].group,
            worker=tasks[s.index].worker,
            start_s=tasks[s.index].start - origin,
            duration_s=tasks[s.index].stop - tasks[s.index].start,
            compute_s=_compute_s(tasks[s.index]),
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


def critical_path_view(
    store: Store, cluster_id: str, computation_id: str, *, threads: int | None = None
) -> CriticalPathView | None:
    """The view (None: the cluster has no such computation). ``threads``: also estimate
    for this many threads. Raises :class:`TooLarge` past :data:`MAX_GROUPS` groups and
    ``ValueError`` for a thread count below 1 or above :data:`MAX_THREADS`."""
    if threads is not None and not 1 <= threads <= MAX_THREADS:
        raise ValueError(f"threads must be between 1 and {MAX_THREADS}, not {threads}")
    found = computation_graph_groups(store, cluster_id, computation_id, limit=MAX_GROUPS + 1)
    if found is None:
        return None
    comp, groups, total = found
    if total > MAX_GROUPS:
        raise TooLarge(
            f"computation {computation_id} has {total:,} task groups; the critical path is "
            f"worked out for at most {MAX_GROUPS:,}"
        )
    executions, missing = _executions(store, cluster_id, computation_id)
    logged, wall, lanes = _durations(executions)
    chain = _task_path(executions)
    chain_s = chain[-1].start_s + chain[-1].duration_s - chain[0].start_s if chain else None
    sources: dict[str, Source] = {
        g["name"]: "task log" if g["name"] in logged else "group totals" for g in groups
    }
    stages = stages_of(
        (g["name"], g.get("dependencies") or [], logged.get(g["name"]) or _spread(g))
        for g in groups
    )
    path = critical_path(stages)
    on_path = set(path.path)
    layout = {n["name"]: n for n in task_group_graph(groups)["nodes"]}
    if wall is None:
        wall = elapsed(comp["started_at"], comp["stopped_at"])
    used = set(sources.values())
    measured = [lanes] if lanes else []
    complete = sum(len(st.durations) for st in stages.values()) <= MAX_SIMULATED_TASKS
    if complete:
        estimates = what_if(stages, *measured)
    else:
        one = sum(st.total_s for st in stages.values())
        estimates = sorted({1: one, **{n: simulate_threads(stages, n) for n in measured}}.items())
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
        path=list(path.path),
        critical_path_s=path.length_s,
        path_fraction=path.length_s / wall if wall else None,
        estimates=[WhatIf(n, s) for n, s in estimates],
        estimates_complete=complete,
        requested=WhatIf(threads, simulate_threads(stages, threads)) if threads else None,
        groups=[
            PathGroup(
                name=n,
                prefix=layout[n]["prefix"],
                tasks=len(st.durations),
                total_s=st.total_s,
                longest_s=st.longest_s,
                earliest_start_s=path.earliest_start[n],
                earliest_finish_s=path.earliest_finish[n],
                on_path=n in on_path,
                durations_from=sources[n],
                x=layout[n]["x"],
                y=layout[n]["y"],
                colour=layout[n]["colour"],
            )
            for n, st in sorted(stages.items(), key=lambda i: (path.earliest_start[i[0]], i[0]))
        ],
        edges=[GraphEdge(d, n) for n, st in stages.items() for d in st.dependencies],
        task_path=chain,
        task_path_s=chain_s,
        task_path_fraction=chain_s / wall if chain_s is not None and wall else None,
        task_path_busy_s=sum(t.duration_s for t in chain) if chain else None,
        task_path_note=missing,
        timeline_url=f"/clusters/{cluster_id}/timeline?computation={quote(computation_id)}",
        activity_colours=dict(ACTIVITY_COLOURS),
    )
