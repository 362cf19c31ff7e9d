"""A computation's critical path through its task-group graph, and how long it would
take with more or fewer worker threads (pure: groups and task durations in, seconds out).

The model, after Sparklens' for Spark stages:

- **Groups are stages.** A group's tasks may start once *every* task of every group it
  depends on has finished (Dask only records dependencies between groups, not between
  tasks, so the task-level overlap Dask allows between a group and the next is not
  modelled: the estimates lean long where groups pipeline).
- **A task's duration is the recorded one**, the same on any thread: no contention for
  memory, disk or the GIL, no transfers between workers, no scheduler overhead.
- **Infinite workers**: every task of a stage runs at once, so a stage lasts as long as
  its longest task; the *critical path* is the chain of groups whose longest tasks add
  up to the most, and its length is the shortest the computation could take.
- **N worker threads**: a list-scheduling simulation. Whenever a thread is free it takes
  the waiting task whose stage has the longest path still ahead of it (its own longest
  task plus the longest chain after it), the longest task of that stage first. With one
  thread the estimate is the sum of all durations; with as many threads as tasks it
  equals the critical path's length.

Dependencies on groups outside the computation are left out (their data existed
before it started).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "CriticalPath",
    "Stage",
    "TaskStep",
    "critical_path",
    "simulate_threads",
    "stages_of",
    "task_path",
    "what_if",
]


@dataclass(frozen=True)
class Stage:
    """A task group as a stage: its name, the groups it waits for, its tasks' seconds."""

    name: str
    dependencies: tuple[str, ...]
    durations: tuple[float, ...]

    @property
    def longest_s(self) -> float:
        return max(self.durations, default=0.0)

    @property
    def total_s(self) -> float:
        return sum(self.durations)


@dataclass(frozen=True)
class CriticalPath:
    """The critical path (sources first) and its length; for every stage its earliest
    start and finish with infinite workers, and the longest chain from its start to the
    end of the computation (``remaining_s``)."""

    path: tuple[str, ...]
    length_s: float
    earliest_start: Mapping[str, float]
    earliest_finish: Mapping[str, float]
    remaining_s: Mapping[str, float]


def stages_of(
    groups: Iterable[tuple[str, Sequence[str], Sequence[float]]],
) -> dict[str, Stage]:
    """Stages from (name, dependencies, durations), dependencies outside the set dropped.

    Task groups can depend on each other both ways: in ``inc(double(inc(1)))`` the group
    ``inc`` feeds ``double`` and follows it. Such a cycle has no stage order, so it is
    broken where a depth-first walk (names in order) finds the edge that closes it: the
    groups of a cycle are taken one after the other, an approximation of a graph whose
    tasks interleave. Raises ``ValueError`` on a negative duration."""
    rows = list(groups)
    names = {name for name, _, _ in rows}
    deps_of: dict[str, set[str]] = {}
    for name, deps, durations in rows:
        if any(d < 0 for d in durations):
            raise ValueError(f"group {name!r} has a negative task duration")
        deps_of[name] = {d for d in deps if d in names and d != name}
    for name, closing in _cycle_edges(deps_of):
        deps_of[name].discard(closing)
    stages = {
        name: Stage(name, tuple(sorted(deps_of[name])), tuple(float(d) for d in durations))
        for name, _, durations in rows
    }
    _order(stages)  # no cycle is left
    return stages


def _cycle_edges(deps_of: Mapping[str, set[str]]) -> list[tuple[str, str]]:
    """The edges (group, dependency) that close a cycle in a depth-first walk over the
    dependencies (iterative: a graph may be deep)."""
    on_path: set[str] = set()
    done: set[str] = set()
    closing: list[tuple[str, str]] = []
    for root in sorted(deps_of):
        if root in done:
            continue
        on_path.add(root)
        stack = [(root, iter(sorted(deps_of[root])))]
        while stack:
            node, deps = stack[-1]
            for dep in deps:
                if dep in on_path:
                    closing.append((node, dep))
                elif dep not in done:
                    on_path.add(dep)
                    stack.append((dep, iter(sorted(deps_of[dep]))))
                    break
            else:
                stack.pop()
                on_path.discard(node)
                done.add(node)
    return closing


def _order(stages: Mapping[str, Stage]) -> list[str]:
    """The stages in dependency order (Kahn's algorithm, ties by name)."""
    waiting = {n: len(st.dependencies) for n, st in stages.items()}
    dependents = _dependents(stages)
    ready = sorted(n for n, k in waiting.items() if k == 0)
    heapq.heapify(ready)
    order: list[str] = []
    while ready:
        n = heapq.heappop(ready)
        order.append(n)
        for m in dependents[n]:
            waiting[m] -= 1
            if waiting[m] == 0:
                heapq.heappush(ready, m)
    if len(order) != len(stages):
        stuck = sorted(n for n in stages if n not in set(order))[:5]
        raise ValueError(f"the group graph has a cycle through {', '.join(stuck)}")
    return order


def _dependents(stages: Mapping[str, Stage]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {n: [] for n in stages}
    for n, st in stages.items():
        for d in st.dependencies:
            out[d].append(n)
    return out


def critical_path(stages: Mapping[str, Stage]) -> CriticalPath:
    """The longest chain of stages weighted by their longest task (ties: by name)."""
    order = _order(stages)
    start: dict[str, float] = {}
    finish: dict[str, float] = {}
    before: dict[str, str | None] = {}
    for n in order:
        deps = stages[n].dependencies
        # the dependency finishing last holds this stage back (ties: the first by name)
        last = min(deps, key=lambda d: (-finish[d], d), default=None)
        before[n] = last
        start[n] = finish[last] if last is not None else 0.0
        finish[n] = start[n] + stages[n].longest_s
    remaining: dict[str, float] = {}
    dependents = _dependents(stages)
    for n in reversed(order):
        after = max((remaining[m] for m in dependents[n]), default=0.0)
        remaining[n] = stages[n].longest_s + after
    if not stages:
        return CriticalPath((), 0.0, {}, {}, {})
    end = min(order, key=lambda n: (-finish[n], n))
    path = [end]
    while (previous := before[path[-1]]) is not None:
        path.append(previous)
    return CriticalPath(tuple(reversed(path)), finish[end], start, finish, remaining)


@dataclass(frozen=True)
class _Plan:
    """What every simulation of the same stages reads: priorities, dependents, each
    stage's durations longest first."""

    remaining: Mapping[str, float]
    dependents: Mapping[str, list[str]]
    longest_first: Mapping[str, list[float]]
    dependencies: Mapping[str, int]


def _plan(stages: Mapping[str, Stage]) -> _Plan:
    return _Plan(
        remaining=critical_path(stages).remaining_s,
        dependents=_dependents(stages),
        longest_first={n: sorted(st.durations, reverse=True) for n, st in stages.items()},
        dependencies={n: len(st.dependencies) for n, st in stages.items()},
    )


def simulate_threads(stages: Mapping[str, Stage], threads: int) -> float:
    """Seconds from the first task's start to the last one's end on ``threads`` threads
    (the list scheduling of the module's docstring)."""
    if threads < 1:
        raise ValueError(f"threads must be 1 or more, not {threads}")
    return _simulate(_plan(stages), threads)


def _simulate(plan: _Plan, threads: int) -> float:
    waiting = dict(plan.dependencies)
    unfinished = {n: len(d) for n, d in plan.longest_first.items()}
    started = dict.fromkeys(plan.longest_first, 0)
    # stages with tasks not yet started, the longest path ahead first: (-path, name)
    ready: list[tuple[float, str]] = []
    # tasks running: (finish time, stage name)
    running: list[tuple[float, str]] = []
    now = 0.0

    def release(name: str) -> None:
        """Stage ``name`` may start; one without tasks is done at once, and its
        dependents may start in turn."""
        pending = [name]
        while pending:
            n = pending.pop()
            if unfinished[n]:
                heapq.heappush(ready, (-plan.remaining[n], n))
                continue
            for m in plan.dependents[n]:
                waiting[m] -= 1
                if waiting[m] == 0:
                    pending.append(m)

    for n in sorted(n for n, k in waiting.items() if k == 0):
        release(n)
    free = threads
    while ready or running:
        while free and ready:
            n = ready[0][1]
            durations = plan.longest_first[n]
            i = started[n]
            take = min(free, len(durations) - i)
            for d in durations[i : i + take]:
                heapq.heappush(running, (now + d, n))
            started[n] = i + take
            free -= take
            if started[n] == len(durations):
                heapq.heappop(ready)
        now, n = heapq.heappop(running)
        finished = [n]
        while running and running[0][0] <= now:  # everything ending at the same moment
            finished.append(heapq.heappop(running)[1])
        free += len(finished)
        for n in finished:
            unfinished[n] -= 1
            if unfinished[n] == 0:
                for m in plan.dependents[n]:
                    waiting[m] -= 1
                    if waiting[m] == 0:
                        release(m)
    return now


def what_if(stages: Mapping[str, Stage], *also: int, limit: int = 1024) -> list[tuple[int, float]]:
    """(threads, estimated seconds) for 1, 2, 4, … threads, stopping at the first count
    that reaches the critical path's length (more threads change nothing) or at
    ``limit``; the counts of ``also`` are added."""
    floor = critical_path(stages).length_s
    tasks = sum(len(st.durations) for st in stages.values())
    plan = _plan(stages)
    out: dict[int, float] = {}
    n = 1
    while True:
        # one thread is never idle while a task waits: the sum, without simulating
        out[n] = sum(map(sum, plan.longest_first.values())) if n == 1 else _simulate(plan, n)
        if out[n] <= floor + 1e-9 * max(1.0, floor) or n >= min(limit, max(tasks, 1)):
            break
        n *= 2
    for a in also:
        if a >= 1 and a not in out:
            out[a] = _simulate(plan, a)
    return sorted(out.items())


# -- through the tasks: what did happen --------------------------------------------------

#: A dependency's end may read after its dependent's start by the workers' clock offsets
#: (Dask corrects them, within a few ms): up to this much it is still the one waited for
CLOCK_SLACK_S = 0.5


@dataclass(frozen=True)
class TaskStep:
    """One execution on the task-level critical path (``index`` into the executions
    given), and how long it waited after the dependency before it ended (its start less
    that dependency's end: scheduling, queuing and transfers; None for the first)."""

    index: int
    waited_s: float | None


def task_path(
    keys: Sequence[str],
    starts: Sequence[float],
    stops: Sequence[float],
    triggers: Sequence[str | None],
) -> list[TaskStep]:
    """The chain of executions that ended the computation, first to last: from the
    execution that ended last, back through the dependency each one waited for last
    (``triggers``: its key, as the task log records it), while that dependency ran in
    these executions (one that ran before them, or none, starts the chain).

    Unlike the group-level path this is what happened, not a model: every step is a
    real dependency, and each execution on it could not start before its predecessor
    ended. A key run more than once (a recomputation) is taken at its execution that
    ended last before the dependent started."""
    if not keys:
        return []
    runs: dict[str, list[int]] = {}
    for i, key in enumerate(keys):
        runs.setdefault(key, []).append(i)
    current = max(range(len(keys)), key=lambda i: (stops[i], -i))
    chain = [current]
    seen = {current}
    while (trigger := triggers[current]) is not None:
        ran = runs.get(trigger)
        if not ran:
            break
        before = [i for i in ran if stops[i] <= starts[current] + CLOCK_SLACK_S]
        previous = max(before, key=lambda i: stops[i]) if before else None
        if previous is None or previous in seen:
            break
        chain.append(previous)
        seen.add(previous)
        current = previous
    chain.reverse()
    return [
        TaskStep(i, None if n == 0 else starts[i] - stops[chain[n - 1]])
        for n, i in enumerate(chain)
    ]
