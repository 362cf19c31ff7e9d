"""Advice rules: scheduling (issue 14) — how the work was cut into tasks and spread over
the cluster's threads.

(Over 400 lines: eight rules of one family, each with its evidence and remedy over the
shared helpers at the top; a rule is read on its own, and the family in one place.)

Every rule reads :class:`AdviceFacts`: the task groups (``detail["task_groups"]``, for a
computation only its own), the computations, the cluster row, and what
``views/advice.py`` gathered from the task timeline into ``extra`` (see
:data:`EXTRA_KEYS`). Thresholds are the module's constants, named in the docs.
"""

# ruff: noqa: RUF001 (the multiplication sign of ratios in the docs)

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from daskscope.analysis.advice.base import Advice, AdviceFacts, Evidence, rule

__all__ = [
    "EXTRA_KEYS",
    "FEW_TASKS_MIN_WALL_S",
    "LARGE_GRAPH_TASKS",
    "REPEATED_MIN_S",
    "SCHEDULER_OVERHEAD_S",
    "SMALL_TASK_MIN_TASKS",
    "SMALL_TASK_S",
    "TASK_SKEW_MIN_S",
    "TASK_SKEW_MIN_TASKS",
    "TASK_SKEW_RATIO",
    "TRANSFER_MIN_S",
    "TRANSFER_RATIO",
    "UTILISATION_MIN_WALL_S",
    "UTILISATION_THRESHOLD",
    "WORKER_SKEW_MIN_BUSY_S",
    "WORKER_SKEW_RATIO",
]

Row = Mapping[str, Any]

#: What ``extra`` holds for these rules (``views/advice.py`` fills it):
#: ``worker_busy_s``: {worker: compute seconds on the timeline}, every worker seen;
#: ``group_actions_s``: {group: {action: seconds}} from the timeline's executions, or
#: None when the timeline was too large to read whole; ``slowest_tasks``: the longest
#: executions as {"group", "key", "worker", "duration_s", "computation_id"};
#: ``cluster_groups``: for a computation, every task group of its cluster (what ran
#: before it);
#: ``computation_windows``: {computation id: (first task start, last task stop)} from the
#: timeline, when it was read whole.
EXTRA_KEYS = (
    "worker_busy_s",
    "group_actions_s",
    "slowest_tasks",
    "cluster_groups",
    "computation_windows",
)

#: Dask's documented cost of scheduling one task ("about 1 ms", Dask's best practices)
SCHEDULER_OVERHEAD_S = 0.001
#: a prefix's tasks are too small below this mean compute time a task...
SMALL_TASK_S = 0.005
#: ...when it has at least this many tasks (a few small tasks cost nothing)
SMALL_TASK_MIN_TASKS = 500
#: a computation shorter than this never has "too few tasks" (its start-up dominates)
FEW_TASKS_MIN_WALL_S = 1.0
#: busy core-seconds / available core-seconds below this is idle cores...
UTILISATION_THRESHOLD = 0.5
#: ...counted over computations whose tasks ran at least this long
UTILISATION_MIN_WALL_S = 2.0
#: the busiest worker's utilisation (compute time over its threads x time present) over
#: all workers' together
WORKER_SKEW_RATIO = 1.5
#: ...when the workers were busy at least this long in total
WORKER_SKEW_MIN_BUSY_S = 2.0
#: a group's slowest task over the group's mean task time...
TASK_SKEW_RATIO = 10.0
#: ...when that task took at least this long...
TASK_SKEW_MIN_S = 1.0
#: ...in a group of at least this many tasks
TASK_SKEW_MIN_TASKS = 10
#: a group's time fetching its inputs from other workers over its compute time...
TRANSFER_RATIO = 1.0
#: ...when the transfers took at least this long
TRANSFER_MIN_S = 0.5
#: tasks in one computation from which its graph is large (Dask's best practices: the
#: scheduler's cost of a graph grows with its tasks, about 1 ms each)
LARGE_GRAPH_TASKS = 100_000
#: task time spent again on groups an earlier computation had already computed
REPEATED_MIN_S = 0.5

_MOST_SUBJECTS = 5  # per rule: the worst few, not one advice per group


def _groups(facts: AdviceFacts) -> list[Row]:
    return list(facts.detail.get("task_groups") or ())


def _computations(facts: AdviceFacts) -> list[Row]:
    comps = list(facts.detail.get("computations") or ())
    if facts.computation_id is not None:
        comps = [c for c in comps if c["id"] == facts.computation_id]
    return comps


def _threads(facts: AdviceFacts) -> int:
    cluster = facts.detail.get("cluster") or {}
    threads = int(cluster.get("threads_peak") or 0)
    if not threads:
        threads = sum(int(w.get("nthreads") or 0) for w in facts.detail.get("workers") or ())
    return threads


@dataclass
class _Work:
    """One computation's groups summed in one pass (rules share it: 40,000 groups)."""

    groups: list[Row] = field(default_factory=list)
    ran: int = 0
    busy_s: float = 0.0
    first: float | None = None
    last: float | None = None
    widest: Row | None = None
    widest_ran: int = -1


def _work(facts: AdviceFacts) -> dict[str | None, _Work]:
    """The work of each computation (each rule asks for it in turn: derived once)."""
    cached: dict[str | None, _Work] | None = facts.derived.get("work")
    if cached is not None:
        return cached
    found: dict[str | None, _Work] = {}
    for g in _groups(facts):
        w = found.get(g.get("computation_id"))
        if w is None:
            w = found[g.get("computation_id")] = _Work()
        w.groups.append(g)
        ran = _ran(g)
        w.ran += ran
        w.busy_s += float(g.get("duration_s") or 0.0)
        start, stop = g.get("started_at"), g.get("stopped_at")
        if start is not None and (w.first is None or start < w.first):
            w.first = start
        if stop is not None and (w.last is None or stop > w.last):
            w.last = stop
        if ran > w.widest_ran or (
            ran == w.widest_ran and w.widest is not None and g["name"] > w.widest["name"]
        ):
            w.widest, w.widest_ran = g, ran
    facts.derived["work"] = found
    return found


def _active_window(facts: AdviceFacts, comp: Row, work: _Work) -> tuple[float, float] | None:
    """First task start to last task stop of a computation: from the timeline when the
    view read it whole, else from its groups (a group alive across computations keeps its
    first start, so that is clipped to the computation's own start)."""
    windows: Mapping[str, Sequence[float]] = facts.extra.get("computation_windows") or {}
    if comp["id"] in windows:
        first, last = windows[comp["id"]]
        return float(first), float(last)
    if work.first is None or work.last is None:
        return None
    return max(work.first, float(comp["started_at"])), work.last


def _ran(group: Row) -> int:
    """Tasks of the group that ran for this computation (done or failed)."""
    return int(group.get("tasks_executed") or 0) + int(group.get("tasks_erred") or 0)


def _most(found: list[tuple[float, Advice]]) -> Iterator[Advice]:
    """The :data:`_MOST_SUBJECTS` findings of largest weight (a notebook's hundred
    computations give a few findings, not a hundred)."""
    found.sort(key=lambda item: -item[0])
    for _, advice in found[:_MOST_SUBJECTS]:
        yield advice


def _short(computation_id: str) -> str:
    return f"computation {computation_id[:8]}"


@rule(
    "tasks-too-small",
    title="Tasks too small for the scheduler's overhead",
    scopes=("cluster", "computation", "run"),
    explanation=(
        f"Per task prefix with at least {SMALL_TASK_MIN_TASKS} tasks: the mean compute time "
        f"a task (the prefix's task time / its tasks) below {SMALL_TASK_S * 1000:g} ms, "
        f"that is within a few times Dask's scheduling cost of about "
        f"{SCHEDULER_OVERHEAD_S * 1000:g} ms a task; critical at or below that cost."
    ),
)
def tasks_too_small(facts: AdviceFacts) -> Iterator[Advice]:
    prefixes: dict[str, list[float]] = {}
    for g in _groups(facts):
        seconds_tasks = prefixes.setdefault(g["prefix"], [0.0, 0.0])
        seconds_tasks[0] += float(g.get("duration_s") or 0.0)
        seconds_tasks[1] += int(g.get("tasks_executed") or 0)
    small = [
        (tasks, seconds, prefix)
        for prefix, (seconds, tasks) in prefixes.items()
        if tasks >= SMALL_TASK_MIN_TASKS and seconds / tasks < SMALL_TASK_S
    ]
    for tasks, seconds, prefix in sorted(small, reverse=True)[:_MOST_SUBJECTS]:
        mean = seconds / tasks
        yield Advice(
            rule="tasks-too-small",
            title="Tasks too small for the scheduler's overhead",
            severity="critical" if mean <= SCHEDULER_OVERHEAD_S else "warning",
            subject=prefix,
            evidence=(
                Evidence("Mean compute time a task", mean, "seconds", SMALL_TASK_S),
                Evidence("Tasks", int(tasks), "count", SMALL_TASK_MIN_TASKS),
                Evidence("Compute time of these tasks", seconds, "seconds"),
                Evidence(
                    "Scheduling cost at about 1 ms a task", tasks * SCHEDULER_OVERHEAD_S, "seconds"
                ),
            ),
            action=(
                "Give each task more work: larger chunks or partitions (e.g. rechunk, "
                "repartition(partition_size=...)), or batch many small calls into one "
                "delayed function, so that a task runs for 100 ms or more."
            ),
        )


@rule(
    "too-few-tasks",
    title="Too few tasks for the cluster's threads",
    scopes=("cluster", "computation", "run"),
    explanation=(
        "Per computation whose tasks ran for at least "
        f"{FEW_TASKS_MIN_WALL_S:g} s: its widest task group (most tasks) has fewer tasks "
        "than the cluster's threads (its peak), so some threads had nothing to do "
        f"(the {_MOST_SUBJECTS} longest such computations)."
    ),
)
def too_few_tasks(facts: AdviceFacts) -> Iterator[Advice]:
    threads = _threads(facts)
    if threads <= 1:
        return
    work = _work(facts)
    found: list[tuple[float, Advice]] = []
    for comp in _computations(facts):
        w = work.get(comp["id"])
        if w is None or w.widest is None or w.ran == 0:
            continue
        window = _active_window(facts, comp, w)
        if window is None or window[1] - window[0] < FEW_TASKS_MIN_WALL_S:
            continue
        widest = w.widest
        if w.widest_ran >= threads:
            continue
        found.append(
            (
                window[1] - window[0],
                Advice(
                    rule="too-few-tasks",
                    title="Too few tasks for the cluster's threads",
                    severity="warning",
                    subject=_short(comp["id"]),
                    evidence=(
                        Evidence(
                            f"Tasks in its widest group ({widest['name']})",
                            _ran(widest),
                            "count",
                            threads,
                        ),
                        Evidence("Threads of the cluster", threads, "count"),
                        Evidence(
                            "Time its tasks ran",
                            window[1] - window[0],
                            "seconds",
                            FEW_TASKS_MIN_WALL_S,
                        ),
                    ),
                    action=(
                        "Split the work into at least as many tasks as threads (smaller chunks or "
                        "more partitions), or run it on fewer workers."
                    ),
                ),
            )
        )
    yield from _most(found)


@rule(
    "idle-cores",
    title="Idle cores while computations ran",
    scopes=("cluster", "computation", "run"),
    explanation=(
        "Utilisation: the task time of the computations whose tasks ran for at least "
        f"{UTILISATION_MIN_WALL_S:g} s, over the cluster's threads (its peak) × the time "
        f"from each one's first task start to its last task stop; below "
        f"{UTILISATION_THRESHOLD:.0%} (critical below half of that)."
    ),
)
def idle_cores(facts: AdviceFacts) -> Iterator[Advice]:
    threads = _threads(facts)
    if threads <= 0:
        return
    work = _work(facts)
    busy = available = 0.0
    counted = 0
    for comp in _computations(facts):
        w = work.get(comp["id"])
        window = _active_window(facts, comp, w) if w is not None else None
        if w is None or window is None or window[1] - window[0] < UTILISATION_MIN_WALL_S:
            continue
        counted += 1
        busy += w.busy_s
        available += threads * (window[1] - window[0])
    if not available or busy / available >= UTILISATION_THRESHOLD:
        return
    utilisation = busy / available
    yield Advice(
        rule="idle-cores",
        title="Idle cores while computations ran",
        severity="critical" if utilisation < UTILISATION_THRESHOLD / 2 else "warning",
        subject=_short(facts.computation_id) if facts.computation_id else None,
        evidence=(
            Evidence("Utilisation", utilisation, "fraction", UTILISATION_THRESHOLD),
            Evidence("Busy core time (task time)", busy, "seconds"),
            Evidence("Available core time", available, "seconds"),
            Evidence("Computations counted", counted, "count"),
        ),
        action=(
            "The work did not keep the threads busy: look for long chains of dependent "
            "tasks or a few long tasks at the end (the task timeline shows them); expose "
            "more parallelism, or use fewer workers or adaptive scaling."
        ),
    )


@rule(
    "worker-skew",
    title="Work spread unevenly over the workers",
    scopes=("cluster", "computation", "run"),
    explanation=(
        "Each worker's utilisation: its compute time on the task timeline over its "
        "threads × the time it was in the cluster (between its worker-added and "
        "worker-removed events) while the computations' tasks ran; the busiest worker's "
        f"over the utilisation of all workers together at least {WORKER_SKEW_RATIO:g}×, "
        f"when the workers computed at least {WORKER_SKEW_MIN_BUSY_S:g} s in all. A "
        "worker that joined late or left early is not counted as idle while it was away."
    ),
)
def worker_skew(facts: AdviceFacts) -> Iterator[Advice]:
    busy: Mapping[str, float] = facts.extra.get("worker_busy_s") or {}
    total = sum(busy.values())
    if len(busy) < 2 or total < WORKER_SKEW_MIN_BUSY_S:
        return
    windows = _merged(_work_windows(facts))
    if not windows:
        return
    presence = _presence(facts.detail.get("events") or ())
    threads = _worker_threads(facts)
    available = {
        w: threads.get(w, 1) * _overlap(presence.get(w, [(-_INF, _INF)]), windows) for w in busy
    }
    # a worker never there while the work ran, yet busy, is one whose events were lost:
    # it is counted as present throughout rather than as infinitely busy
    for w, seconds in available.items():
        if seconds <= 0 and busy[w] > 0:
            available[w] = threads.get(w, 1) * _overlap([(-_INF, _INF)], windows)
    counted = {w: a for w, a in available.items() if a > 0}
    if len(counted) < 2:
        return
    overall = sum(busy[w] for w in counted) / sum(counted.values())
    if overall <= 0:
        return
    worker = max(counted, key=lambda w: (busy[w] / counted[w], w))
    ratio = busy[worker] / counted[worker] / overall
    if ratio < WORKER_SKEW_RATIO:
        return
    yield Advice(
        rule="worker-skew",
        title="Work spread unevenly over the workers",
        severity="warning",
        subject=worker,
        evidence=(
            Evidence(
                "Busiest worker's utilisation over all workers'",
                ratio,
                "ratio",
                WORKER_SKEW_RATIO,
            ),
            Evidence("Busiest worker's compute time", busy[worker], "seconds"),
            Evidence("Busiest worker's available core time", counted[worker], "seconds"),
            Evidence("Least busy worker's compute time", min(busy[w] for w in counted), "seconds"),
            Evidence("Workers", len(counted), "count"),
        ),
        action=(
            "Check for restrictions (workers=, resources=) or data placed on one worker "
            "(scatter, persist on a subset) that pin tasks there; rebalance the data or "
            "let Dask choose the workers."
        ),
    )


_INF = float("inf")


def _work_windows(facts: AdviceFacts) -> list[tuple[float, float]]:
    """First task start to last task stop of each computation in scope that ran tasks."""
    work = _work(facts)
    found = []
    for comp in _computations(facts):
        w = work.get(comp["id"])
        window = _active_window(facts, comp, w) if w is not None else None
        if window is not None and window[1] > window[0]:
            found.append(window)
    return found


def _merged(windows: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """The windows' union as disjoint intervals (computations may run at once)."""
    merged: list[tuple[float, float]] = []
    for start, stop in sorted(windows):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], stop))
        else:
            merged.append((start, stop))
    return merged


def _overlap(a: Sequence[tuple[float, float]], b: Sequence[tuple[float, float]]) -> float:
    """Seconds two sets of disjoint intervals share."""
    return sum(max(0.0, min(s1, s2) - max(f1, f2)) for f1, s1 in a for f2, s2 in b)


def _presence(events: Sequence[Row]) -> dict[str, list[tuple[float, float]]]:
    """Each worker's stays in the cluster from its lifecycle events: from worker-added
    (or always, when its first event is a removal: it was there when recording began) to
    worker-removed (or for good); a worker without events is absent from the result."""
    stays: dict[str, list[tuple[float, float]]] = {}
    joined: dict[str, float] = {}
    for e in sorted(events, key=lambda e: e["at"]):
        worker = e.get("worker")
        if worker is None:
            continue
        if e["kind"] == "worker-added":
            joined.setdefault(worker, float(e["at"]))
            stays.setdefault(worker, [])
        elif e["kind"] == "worker-removed":
            start = joined.pop(worker, None)
            if start is None and not stays.get(worker):
                start = -_INF
            if start is not None:
                stays.setdefault(worker, []).append((start, float(e["at"])))
    for worker, start in joined.items():
        stays[worker].append((start, _INF))
    return stays


def _worker_threads(facts: AdviceFacts) -> dict[str, int]:
    """Threads of each worker: its last sample's, else what its worker-added event said."""
    threads: dict[str, int] = {}
    for e in facts.detail.get("events") or ():
        n = (e.get("detail") or {}).get("nthreads")
        if e["kind"] == "worker-added" and e.get("worker") and n:
            threads[e["worker"]] = int(n)
    for w in facts.detail.get("workers") or ():
        if w.get("nthreads"):
            threads[w["worker"]] = int(w["nthreads"])
    return threads


@rule(
    "task-skew",
    title="A few tasks much slower than the rest of their group",
    scopes=("cluster", "computation", "run"),
    explanation=(
        f"Per task group of at least {TASK_SKEW_MIN_TASKS} tasks: its slowest execution "
        "(from the timeline) over the group's mean task time at least "
        f"{TASK_SKEW_RATIO:g}×, when that execution took at least {TASK_SKEW_MIN_S:g} s."
    ),
)
def task_skew(facts: AdviceFacts) -> Iterator[Advice]:
    # a group's name comes back in later computations: each use is its own row
    groups = {(g["name"], g.get("computation_id")): g for g in _groups(facts)}
    slowest: dict[tuple[str, str | None], Row] = {}
    for t in facts.extra.get("slowest_tasks") or ():
        use = (t["group"], t.get("computation_id"))
        if use in groups and t["duration_s"] > slowest.get(use, {}).get("duration_s", -1.0):
            slowest[use] = t
    found = []
    for use, t in slowest.items():
        g = groups[use]
        tasks = int(g.get("tasks_executed") or 0)
        if tasks < TASK_SKEW_MIN_TASKS or t["duration_s"] < TASK_SKEW_MIN_S:
            continue
        mean = float(g["duration_s"]) / tasks
        if mean > 0 and t["duration_s"] / mean >= TASK_SKEW_RATIO:
            found.append((t["duration_s"] / mean, use[0], t, mean, tasks))
    for ratio, name, t, mean, tasks in sorted(found, reverse=True)[:_MOST_SUBJECTS]:
        yield Advice(
            rule="task-skew",
            title="A few tasks much slower than the rest of their group",
            severity="warning",
            subject=name,
            evidence=(
                Evidence("Slowest task over the group's mean", ratio, "ratio", TASK_SKEW_RATIO),
                Evidence(f"Slowest task ({t['key']})", t["duration_s"], "seconds", TASK_SKEW_MIN_S),
                Evidence("Mean task time of the group", mean, "seconds"),
                Evidence("Tasks in the group", tasks, "count", TASK_SKEW_MIN_TASKS),
            ),
            action=(
                "Its input is probably uneven: a larger chunk or partition, or a skewed key "
                "in a groupby or join. Even the partitions out (repartition, a salted key) "
                "or split the slow task's work."
            ),
        )


@rule(
    "transfer-bound",
    title="Groups waiting on transfers more than computing",
    scopes=("cluster", "computation", "run"),
    explanation=(
        "Per task group, from the task timeline's actions: the time spent fetching its "
        f"inputs from other workers over its compute time at least {TRANSFER_RATIO:g}×, "
        f"when the transfers took at least {TRANSFER_MIN_S:g} s."
    ),
)
def transfer_bound(facts: AdviceFacts) -> Iterator[Advice]:
    actions: Mapping[str, Mapping[str, float]] | None = facts.extra.get("group_actions_s")
    if not actions:
        return
    names = {g["name"] for g in _groups(facts)}
    found = []
    for name, seconds in actions.items():
        if name not in names:
            continue
        transfer, compute = seconds.get("transfer", 0.0), seconds.get("compute", 0.0)
        if transfer < TRANSFER_MIN_S:
            continue
        if compute <= 0 or transfer / compute >= TRANSFER_RATIO:
            found.append((transfer, name, compute))
    for transfer, name, compute in sorted(found, reverse=True)[:_MOST_SUBJECTS]:
        yield Advice(
            rule="transfer-bound",
            title="Groups waiting on transfers more than computing",
            severity="warning",
            subject=name,
            evidence=(
                Evidence(
                    "Transfer time over compute time",
                    transfer / compute if compute > 0 else None,
                    "ratio",
                    TRANSFER_RATIO,
                ),
                Evidence(
                    "Time fetching inputs from other workers", transfer, "seconds", TRANSFER_MIN_S
                ),
                Evidence("Compute time", compute, "seconds"),
            ),
            action=(
                "Move less data between workers: reduce before combining (e.g. aggregate "
                "per partition first), keep chunk sizes moderate, avoid all-to-all "
                "shuffles where a map would do, or use fewer, larger workers."
            ),
        )


@rule(
    "large-graph",
    title="Large graph sent from the client",
    scopes=("cluster", "computation", "run"),
    explanation=(
        f"Per computation: at least {LARGE_GRAPH_TASKS:,} tasks ran for it, a graph whose "
        "sending, deserialising and ordering cost the client and scheduler seconds. "
        "(Its size in bytes is known only to the client, which warns above "
        "distributed.admin.large-graph-warning-threshold; the scheduler records "
        "neither that size nor the time it spent on the graph before the computation.)"
    ),
)
def large_graph(facts: AdviceFacts) -> Iterator[Advice]:
    work = _work(facts)
    found: list[tuple[float, Advice]] = []
    for comp in _computations(facts):
        w = work.get(comp["id"])
        if w is None or w.widest is None or w.ran < LARGE_GRAPH_TASKS:
            continue
        tasks, largest, groups = w.ran, w.widest, w.groups
        found.append(
            (
                tasks,
                Advice(
                    rule="large-graph",
                    title="Large graph sent from the client",
                    severity="warning",
                    subject=_short(comp["id"]),
                    evidence=(
                        Evidence("Tasks in the graph", tasks, "count", LARGE_GRAPH_TASKS),
                        Evidence(
                            f"Tasks of its largest group ({largest['name']})", w.widest_ran, "count"
                        ),
                        Evidence("Task groups", len(groups), "count"),
                    ),
                    action=(
                        "Send a smaller graph: larger chunks or partitions (fewer tasks); "
                        "load data inside the tasks (dask.array / dask.dataframe readers, "
                        "delayed functions that read files) instead of embedding it; scatter "
                        "large objects once and pass the futures."
                    ),
                ),
            )
        )
    yield from _most(found)


@rule(
    "repeated-computation",
    title="The same tasks computed again",
    scopes=("cluster", "computation", "run"),
    explanation=(
        "Task groups named by a collection's token (a name that is not just its prefix) "
        "whose tasks ran again in a later computation of the same cluster, when the "
        f"repeated task time is at least {REPEATED_MIN_S:g} s: the same result computed "
        "again instead of persisted."
    ),
)
def repeated_computation(facts: AdviceFacts) -> Iterator[Advice]:
    comps = list(facts.detail.get("computations") or ())
    order = {c["id"]: (c["started_at"], c["id"]) for c in comps}
    earlier: dict[str, list[Row]] = {}  # group name -> its executed uses, oldest first
    all_groups = facts.extra.get("cluster_groups") or _groups(facts)
    for g in sorted(all_groups, key=lambda g: order.get(g.get("computation_id"), (0.0, ""))):
        if g["name"] == g["prefix"] or not g.get("tasks_executed"):
            continue
        earlier.setdefault(g["name"], []).append(g)
    wanted = {c["id"] for c in _computations(facts)}
    by_comp: dict[str, list[tuple[Row, int]]] = {}
    for uses in earlier.values():
        for times, g in enumerate(uses[1:], start=2):
            if g.get("computation_id") in wanted:
                by_comp.setdefault(g["computation_id"], []).append((g, times))
    found: list[tuple[float, Advice]] = []
    for comp_id, repeated in sorted(by_comp.items(), key=lambda item: order[item[0]]):
        seconds = sum(float(g.get("duration_s") or 0.0) for g, _ in repeated)
        if seconds < REPEATED_MIN_S:
            continue
        names = sorted({g["name"] for g, _ in repeated})
        found.append(
            (
                seconds,
                Advice(
                    rule="repeated-computation",
                    title="The same tasks computed again",
                    severity="warning",
                    subject=_short(comp_id),
                    evidence=(
                        Evidence("Task time spent again", seconds, "seconds", REPEATED_MIN_S),
                        Evidence("Groups computed again", len(names), "count"),
                        Evidence("Times computed (most)", max(t for _, t in repeated), "count"),
                        Evidence("First of them", names[0], ""),
                    ),
                    action=(
                        "Persist the shared intermediate result once (x = x.persist()) or compute "
                        "the results together (dask.compute(a, b)) so that their common tasks run "
                        "once."
                    ),
                ),
            )
        )
    yield from _most(found)
