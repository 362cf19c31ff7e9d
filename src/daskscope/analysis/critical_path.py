"""A computation's critical path, and how long it would take with more or fewer worker
threads (pure: groups or executions and their durations in, seconds out).

(Over 400 lines: two models of one question, the groups as stages and the executions
through their triggers, each with its critical path and its simulation on N threads;
they share the stage ordering, and the model's documentation is this docstring.)

The group model (where the task log holds no dependencies), after Sparklens' for Spark
stages:

- **Groups are stages.** A group's tasks may start once *every* task of every group it
  depends on has finished (Dask's task groups record dependencies between groups, not
  between tasks, so the task-level overlap Dask allows between a group and the next is
  not modelled: the estimates lean long where groups pipeline, and a chain of tasks
  inside one group is not seen at all).
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

**Through the task dependencies** (:func:`job_graph`), the model wherever the task log
holds them: every execution is a job that waits for the one dependency it waited for
last in the run (its *trigger*, which the task log records) and for the key's previous
run, if any; a group the task log does not cover is a stage as above, waited for as a
whole (a zero-time *join*). The critical path is the longest chain of jobs by their
seconds; every link of it is a real dependency, so no run with these durations can be
shorter. A task's other dependencies ended before its trigger in the run and are taken
to end before it here too: exact for chains and trees (one input per task), and where a
task has several inputs the length is a lower bound of the full graph's. On N threads a
free thread takes the ready job that started first in the recorded run (Dask's own
priorities show in that order), so a hidden dependency, which started earlier, tends to
be run earlier too.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "CriticalPath",
    "JobGraph",
    "JobPath",
    "Stage",
    "TaskStep",
    "critical_path",
    "estimate_jobs",
    "job_graph",
    "job_path",
    "job_width",
    "jobs_what_if",
    "simulate_jobs",
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

#: A dependency's end may read after its dependent's start: a worker reports its times
#: shifted by its estimate of its clock's offset to the scheduler's (``scheduler_delay``),
#: made again at each heartbeat and off by up to half the heartbeat's round trip (0.2 s
#: seen under load), so two times of one worker can carry different shifts. Up to this
#: much it is still the one waited for
CLOCK_SLACK_S = 0.5


@dataclass(frozen=True)
class TaskStep:
    """One execution on the task-level critical path (``index`` into the executions
    given), and how long it waited after the dependency before it ended (its start less
    that dependency's end, at least 0: scheduling, queuing and transfers; None for the
    first). A task cannot start before its input exists, so a wait that reads below zero
    is the two times' different clock shifts (see :data:`CLOCK_SLACK_S`): it is 0."""

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
    index = {key: i for i, key in enumerate(keys)}  # no list per key ...
    runs: dict[str, list[int]] = {}
    if len(index) < len(keys):  # ... but for those that ran more than once
        for i, key in enumerate(keys):
            runs.setdefault(key, []).append(i)
        runs = {key: ran for key, ran in runs.items() if len(ran) > 1}
    last_stop = max(stops)
    current = next(i for i, stop in enumerate(stops) if stop == last_stop)
    chain = [current]
    seen = {current}
    while (trigger := triggers[current]) is not None:
        ran = runs.get(trigger) or ([index[trigger]] if trigger in index else None)
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
        TaskStep(i, None if n == 0 else max(0.0, starts[i] - stops[chain[n - 1]]))
        for n, i in enumerate(chain)
    ]


# -- through the task dependencies: the model on executions ------------------------------


@dataclass(frozen=True)
class JobGraph:
    """Jobs and what each waits for (see the module's docstring). A job takes one thread
    for ``seconds[j]`` once every one of its parents is done; a join takes no thread and
    no time. ``group[j]`` is its task group; ``execution[j]`` its index into the
    executions given (-1 for a stage's task or a join). ``topo`` is an order in which
    every parent comes first (an edge that would close a cycle is left out); ``rank[j]``
    the place of ``j`` in the order in which free threads take ready jobs, ``by_rank``
    its inverse. Parents and children are kept flat (``pflat[pstart[j]:pstart[j + 1]]``
    are the parents of ``j``): a graph of 100,000 jobs is a few lists, not 200,000 that
    the garbage collector would walk again and again."""

    seconds: list[float]
    join: list[bool]
    group: list[str]
    execution: list[int]
    topo: list[int]
    rank: list[int]
    by_rank: list[int]
    pstart: list[int]
    pflat: list[int]
    cstart: list[int]
    cflat: list[int]

    def __len__(self) -> int:
        return len(self.seconds)

    def parents(self, j: int) -> list[int]:
        return self.pflat[self.pstart[j] : self.pstart[j + 1]]

    def children(self, j: int) -> list[int]:
        return self.cflat[self.cstart[j] : self.cstart[j + 1]]

    @property
    def tasks(self) -> int:
        """The jobs that take a thread (all but the joins)."""
        return len(self.seconds) - sum(self.join)

    @property
    def total_s(self) -> float:
        return sum(self.seconds)


def _trigger_edges(
    keys: Sequence[str],
    starts: Sequence[float],
    stops: Sequence[float],
    triggers: Sequence[str | None],
) -> tuple[list[int], list[int]]:
    """Edges (parent, child) among the executions: to each one from the run of its
    trigger that ended last before it started (give or take :data:`CLOCK_SLACK_S`, as
    :func:`task_path` picks it), and from the previous run of its own key (a retry or a
    recomputation follows the run before it)."""
    index = {key: i for i, key in enumerate(keys)}
    src: list[int] = []
    dst: list[int] = []
    runs: dict[str, list[int]] = {}
    if len(index) < len(keys):  # some key ran more than once
        for i, key in enumerate(keys):
            runs.setdefault(key, []).append(i)
        runs = {key: ran for key, ran in runs.items() if len(ran) > 1}
        for repeated in runs.values():
            repeated.sort(key=lambda i: (starts[i], stops[i], i))
            src.extend(repeated[:-1])
            dst.extend(repeated[1:])
    for i, trigger in enumerate(triggers):
        if trigger is None or trigger == keys[i]:
            continue
        latest = starts[i] + CLOCK_SLACK_S
        ran = runs.get(trigger)
        if ran is None:
            only = index.get(trigger)
            if only is not None and stops[only] <= latest:
                src.append(only)
                dst.append(i)
            continue  # else it ran before the computation (or outside the task log)
        ended = [r for r in ran if stops[r] <= latest]
        if ended:
            src.append(max(ended, key=lambda r: (stops[r], -r)))
            dst.append(i)
    return src, dst


def job_graph(
    keys: Sequence[str],
    groups: Sequence[str],
    starts: Sequence[float],
    stops: Sequence[float],
    seconds: Sequence[float],
    triggers: Sequence[str | None],
    *,
    stages: Mapping[str, Stage] | None = None,
    stage_starts: Mapping[str, float] | None = None,
    dependencies: Mapping[str, Sequence[str]] | None = None,
) -> JobGraph:
    """The jobs of a computation: its executions (``keys`` … ``triggers``: one entry
    each; ``starts``/``stops`` place them in the run, ``seconds`` is what each takes of
    a thread), each waiting for its trigger's run and its key's previous run; and the
    ``stages``, groups the task log does not cover: each of their tasks waits for every
    group its stage depends on, as a whole. ``dependencies`` are the groups each covered
    group depends on: a covered group's executions wait for the stages among them.
    Free threads take executions in the order of their starts, a stage's tasks at its
    group's ``stage_starts`` (else after every execution), longest first.

    Raises ``ValueError`` on a negative duration or columns of different lengths."""
    n = len(keys)
    if not len(groups) == len(starts) == len(stops) == len(seconds) == len(triggers) == n:
        raise ValueError("the executions' columns differ in length")
    job_seconds = [float(d) for d in seconds]
    if any(d < 0 for d in job_seconds):
        raise ValueError("an execution has a negative duration")
    src, dst = _trigger_edges(keys, starts, stops, triggers)
    group = list(groups)
    execution = list(range(n))
    join = [False] * n
    when = [float(t) for t in starts]
    if stages:
        _add_stages(
            stages, stage_starts or {}, dependencies or {},
            job_seconds, group, execution, join, when, src, dst,
        )  # fmt: skip
    total = len(job_seconds)
    # free threads take jobs by when, longer first, then in order (two stable sorts on
    # plain floats: no tuple per job)
    longer = [-d for d in job_seconds]
    order = sorted(range(total), key=longer.__getitem__)
    order.sort(key=when.__getitem__)
    rank = [0] * total
    for r, j in enumerate(order):
        rank[j] = r
    if all(rank[p] < rank[c] for p, c in zip(src, dst, strict=True)):
        topo = order  # every parent before its children: the rank is an order
    else:
        topo, src, dst = _kahn(total, src, dst, order)
    pstart, pflat = _flat(total, dst, src)
    cstart, cflat = _flat(total, src, dst)
    return JobGraph(
        seconds=job_seconds,
        join=join,
        group=group,
        execution=execution,
        topo=topo,
        rank=rank,
        by_rank=order,
        pstart=pstart,
        pflat=pflat,
        cstart=cstart,
        cflat=cflat,
    )


def _flat(total: int, of: Sequence[int], values: Sequence[int]) -> tuple[list[int], list[int]]:
    """``values`` grouped by ``of`` (a counting sort): ``flat[start[j]:start[j + 1]]``
    are the values of ``j``, in their order."""
    start = [0] * (total + 1)
    for j in of:
        start[j + 1] += 1
    for j in range(total):
        start[j + 1] += start[j]
    at = start[:-1]
    flat = [0] * len(values)
    for j, v in zip(of, values, strict=True):
        flat[at[j]] = v
        at[j] += 1
    return start, flat


def _add_stages(
    stages: Mapping[str, Stage],
    stage_starts: Mapping[str, float],
    dependencies: Mapping[str, Sequence[str]],
    seconds: list[float],
    group: list[str],
    execution: list[int],
    join: list[bool],
    when: list[float],
    src: list[int],
    dst: list[int],
) -> None:
    """Append the stages' tasks and the joins (a stage's end, and the end of each
    covered group a stage waits for) to the jobs, and their edges."""
    by_group: dict[str, list[int]] = {}
    for i, g in enumerate(group):
        by_group.setdefault(g, []).append(i)
    joins: dict[str, int] = {}

    def add(seconds_: float, group_: str, is_join: bool, at: float) -> int:
        seconds.append(seconds_)
        group.append(group_)
        execution.append(-1)
        join.append(is_join)
        when.append(at)
        return len(seconds) - 1

    def join_of(name: str) -> int | None:
        """The join of group ``name`` (a stage, or a covered group a stage waits for);
        None for a group that is neither (outside the computation)."""
        if name not in joins and (name in stages or name in by_group):
            joins[name] = add(0.0, name, True, math.inf)
        return joins.get(name)

    def edges(parents: Iterable[int], child: int) -> None:
        for p in parents:
            src.append(p)
            dst.append(child)

    members = {
        name: [add(d, name, False, stage_starts.get(name, math.inf)) for d in st.durations]
        for name, st in stages.items()
    }
    for name, st in stages.items():
        waits = sorted({j for d in st.dependencies if (j := join_of(d)) is not None})
        for j in members[name]:
            edges(waits, j)
        end = join_of(name)
        assert end is not None
        edges(members[name] or waits, end)
    for name, deps in dependencies.items():
        waits = sorted({j for d in deps if d in stages and (j := join_of(d)) is not None})
        for i in by_group.get(name, ()):
            edges(waits, i)
    for name, j in joins.items():
        if name not in stages:  # a covered group a stage waits for: all its runs
            edges(by_group[name], j)


def _kahn(
    total: int, src: list[int], dst: list[int], by_rank: list[int]
) -> tuple[list[int], list[int], list[int]]:
    """A topological order by Kahn's algorithm, and the edges that do not close a cycle
    (when every job left waits for another, the one first in rank is taken as ready;
    never from a run's own record, a guard)."""
    cstart, cflat = _flat(total, src, dst)
    waiting = [0] * total
    for c in dst:
        waiting[c] += 1
    ready = [j for j in range(total) if waiting[j] == 0]
    topo: list[int] = []
    place = [-1] * total
    forced = 0
    while len(topo) < total:
        if not ready:  # a cycle: take the first waiting job by rank
            while place[by_rank[forced]] >= 0:
                forced += 1
            ready.append(by_rank[forced])
        j = ready.pop()
        if place[j] >= 0:
            continue
        place[j] = len(topo)
        topo.append(j)
        for c in cflat[cstart[j] : cstart[j + 1]]:
            waiting[c] -= 1
            if waiting[c] == 0 and place[c] < 0:
                ready.append(c)
    kept = [(p, c) for p, c in zip(src, dst, strict=True) if place[p] < place[c]]
    return topo, [p for p, _ in kept], [c for _, c in kept]


@dataclass(frozen=True)
class JobPath:
    """The longest chain of jobs (joins left out, first to last) and its length; every
    job's earliest start and finish with infinite workers."""

    jobs: tuple[int, ...]
    length_s: float
    earliest_start: list[float]
    earliest_finish: list[float]


def job_path(graph: JobGraph) -> JobPath:
    """The critical path through the jobs (ties: the job first in rank)."""
    n = len(graph)
    if not n:
        return JobPath((), 0.0, [], [])
    start = [0.0] * n
    finish = [0.0] * n
    before = [-1] * n
    seconds, rank, pstart, pflat = graph.seconds, graph.rank, graph.pstart, graph.pflat
    for j in graph.topo:
        lo, hi = pstart[j], pstart[j + 1]
        if hi > lo:
            last = pflat[lo]
            for p in pflat[lo + 1 : hi]:
                if finish[p] > finish[last] or (finish[p] == finish[last] and rank[p] < rank[last]):
                    last = p
            before[j] = last
            start[j] = finish[last]
            finish[j] = start[j] + seconds[j]
        else:
            finish[j] = seconds[j]
    end = min(range(n), key=lambda j: (-finish[j], rank[j]))
    chain = [end]
    while before[chain[-1]] >= 0:
        chain.append(before[chain[-1]])
    jobs = tuple(j for j in reversed(chain) if not graph.join[j])
    return JobPath(jobs, finish[end], start, finish)


def job_width(graph: JobGraph, path: JobPath) -> int:
    """At most how many jobs run at once with infinite workers, each from its earliest
    start to its earliest finish: a job ending when another starts leaves it its thread
    (as a simulation finishes jobs before it starts others), and a job of no length
    holds one at its moment. With this many threads a free thread is there for every
    job the moment it is ready, so the estimate is the critical path's length."""
    starts: list[float] = []
    ends: list[float] = []  # of jobs that last
    instants: list[float] = []  # ends of jobs of no length
    for j in range(len(graph)):
        if graph.join[j]:
            continue
        starts.append(path.earliest_start[j])
        (ends if graph.seconds[j] > 0 else instants).append(path.earliest_finish[j])
    starts.sort()
    ends.sort()
    instants.sort()
    width = running = e = z = 0
    for t in starts:  # a sweep
        while e < len(ends) and ends[e] <= t:
            e += 1
            running -= 1
        while z < len(instants) and instants[z] < t:
            z += 1
            running -= 1
        running += 1
        width = max(width, running)
    return width


def simulate_jobs(graph: JobGraph, threads: int) -> float:
    """Seconds from the first job's start to the last one's end on ``threads`` threads
    (free threads take ready jobs in rank order; see the module's docstring)."""
    if threads < 1:
        raise ValueError(f"threads must be 1 or more, not {threads}")
    seconds, join, rank, by_rank = graph.seconds, graph.join, graph.rank, graph.by_rank
    cstart, cflat = graph.cstart, graph.cflat
    pstart = graph.pstart
    waiting = [pstart[j + 1] - pstart[j] for j in range(len(graph))]
    ready: list[int] = []  # ranks
    push, pop = heapq.heappush, heapq.heappop

    def release(j: int) -> None:
        """``j`` may start: a join is done at once, and its children may start."""
        pending = [j]
        while pending:
            k = pending.pop()
            if not join[k]:
                push(ready, rank[k])
                continue
            for c in cflat[cstart[k] : cstart[k + 1]]:
                waiting[c] -= 1
                if waiting[c] == 0:
                    pending.append(c)

    ready.extend(rank[j] for j in range(len(graph)) if not waiting[j] and not join[j])
    heapq.heapify(ready)
    for j in range(len(graph)):
        if not waiting[j] and join[j]:
            release(j)
    running: list[tuple[float, int]] = []
    now = 0.0
    free = threads
    while ready or running:
        while free and ready:
            j = by_rank[pop(ready)]
            push(running, (now + seconds[j], j))
            free -= 1
        now, j = pop(running)
        done = [j]
        while running and running[0][0] <= now:  # everything ending at the same moment
            done.append(pop(running)[1])
        free += len(done)
        for j in done:
            for c in cflat[cstart[j] : cstart[j + 1]]:
                waiting[c] -= 1
                if waiting[c] == 0:
                    if join[c]:
                        release(c)
                    else:
                        push(ready, rank[c])
    return now


def estimate_jobs(
    graph: JobGraph, threads: int, *, path: JobPath | None = None, width: int | None = None
) -> float:
    """The estimate on ``threads`` threads: the sum on one, the critical path's length
    on :func:`job_width` or more, else :func:`simulate_jobs`."""
    if threads < 1:
        raise ValueError(f"threads must be 1 or more, not {threads}")
    if threads == 1:  # one thread is never idle while a job waits: the sum
        return graph.total_s
    path = path or job_path(graph)
    if threads >= (job_width(graph, path) if width is None else width):
        return path.length_s
    return simulate_jobs(graph, threads)


def jobs_what_if(
    graph: JobGraph,
    *also: int,
    limit: int = 1024,
    path: JobPath | None = None,
    width: int | None = None,
) -> list[tuple[int, float]]:
    """(threads, estimated seconds) for 1, 2, 4, … threads, as :func:`what_if` does for
    stages: up to the first count that reaches the critical path's length, or
    ``limit``; the counts of ``also`` are added (each as :func:`estimate_jobs`)."""
    path = path or job_path(graph)
    floor = path.length_s
    width = job_width(graph, path) if width is None else width
    tasks = graph.tasks
    out: dict[int, float] = {}
    n = 1
    while True:
        out[n] = estimate_jobs(graph, n, path=path, width=width)
        if out[n] <= floor + 1e-9 * max(1.0, floor) or n >= min(limit, max(tasks, 1)):
            break
        n *= 2
    for a in also:
        if a >= 1 and a not in out:
            out[a] = estimate_jobs(graph, a, path=path, width=width)
    return sorted(out.items())
