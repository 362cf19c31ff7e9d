"""Which computation ran which tasks, and what changed since the last write.

Dask hands a computation only the task groups it *creates* (``Computation.groups``), and
a group whose name comes back while it is still alive — a persisted array summed in a
notebook loop, the same expression computed twice — belongs to the first computation
only. daskscope instead follows the graphs themselves: each ``update_graph`` names the
tasks it touched, and from then on the tasks of those groups that run or fail count for
that computation, the newest to ask for them. One :class:`GroupUse` holds one group's
work within one computation: what the group had already done when the computation took
it over is its baseline, and the use's figures are the group's growth since.

Every hook marks what it changed; a flush writes only that (issue: recording cost
proportional to what changed, not to how much is alive).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from daskscope.collector import snapshot
from daskscope.model import ComputationRecord, Record, TaskGroupRecord, TaskPrefixRecord, stable_id

if TYPE_CHECKING:
    from distributed.scheduler import Computation, Scheduler, TaskGroup, TaskState

__all__ = ["ComputationTrack", "GroupUse", "WorkTracker"]


@dataclass(slots=True)
class Totals:
    """Additive totals of group uses (per cluster or per task prefix)."""

    executed: int = 0
    erred: int = 0
    nbytes: int = 0
    durations: dict[str, float] = field(default_factory=dict)

    def add(self, other: Totals, sign: int = 1) -> None:
        self.executed += sign * other.executed
        self.erred += sign * other.erred
        self.nbytes += sign * other.nbytes
        for activity, seconds in other.durations.items():
            self.durations[activity] = self.durations.get(activity, 0.0) + sign * seconds

    @property
    def duration_s(self) -> float:
        return sum(self.durations.values())


@dataclass(eq=False, slots=True)
class ComputationTrack:
    """One Dask ``Computation`` (one or more graphs sent while the cluster was busy)."""

    record_id: str
    computation: Computation
    #: groups its graphs touched that may still run tasks for it ("is it done?"):
    #: pruned as they finish, so each is looked at about once
    pending: set[TaskGroup] = field(default_factory=set)
    uses: set[GroupUse] = field(default_factory=set)
    #: sums over its group records as last snapshotted (kept up to date by deltas, so a
    #: computation of 40,000 groups costs no more to write than one of 4)
    executed: int = 0
    erred: int = 0
    groups: int = 0
    stop: float = 0.0
    code_frames: int = -1
    code: list[str] = field(default_factory=list)
    #: its record is stored as done: it goes once its last group use does
    done_written: bool = False


@dataclass(eq=False, slots=True)
class GroupUse:
    """One TaskGroup's work while one computation was the newest to ask for it."""

    record_id: str
    group: TaskGroup
    computation: ComputationTrack | None
    #: the group's cumulative figures when this use began (its growth since is ours)
    base_nbytes: int
    base_durations: dict[str, float]
    #: True when the group was new: its own start time is this use's start
    fresh: bool
    executed: int = 0
    erred: int = 0
    first_start: float | None = None
    #: Dask keeps no stop time for failed tasks in the group: the last failure's
    error_stop: float = 0.0
    #: the record as it stood when the group was handed to a later computation
    final: TaskGroupRecord | None = None
    #: what the cluster and prefix totals hold of this use
    counted: Totals = field(default_factory=Totals)
    dependencies: list[str] = field(default_factory=list)
    dependency_count: int = -1
    #: which lifetime of its group this is (unique within the recorder: a name that
    #: comes back after its group was forgotten is a new TaskGroup with a new number)
    lifetime: int = 0
    #: the record last handed to the sink: an equal one is not written again
    written: TaskGroupRecord | None = None

    @property
    def ran(self) -> bool:
        return bool(self.executed or self.erred)


def jsonable(value: Any) -> Any:
    """A JSON-safe copy (annotations may hold tuples, sets or arbitrary objects)."""
    return json.loads(json.dumps(value, default=str))


def _use_stop(use: GroupUse) -> float | None:
    """When the use's last task finished or failed."""
    if use.final is not None:
        return use.final.stopped_at
    return max(use.group.stop, use.error_stop) if use.ran else None


def _first_start(kwargs: Mapping[str, Any]) -> float | None:
    startstops = kwargs.get("startstops") or ()
    starts = [ss["start"] for ss in startstops if ss.get("action") == "compute"]
    return min(starts) if starts else None


class WorkTracker:
    """Counts each task's outcome for the right computation and group, and turns what
    changed into records. Runs on the scheduler's event loop only."""

    def __init__(self, cluster_id: str, *, max_code_chars: int) -> None:
        self.cluster_id = cluster_id
        self.max_code_chars = max_code_chars
        self.current: dict[TaskGroup, GroupUse] = {}
        self.computations: dict[Computation, ComputationTrack] = {}
        self.newest: ComputationTrack | None = None
        self.dirty: set[GroupUse] = set()
        #: changed uses whose record came out equal to the one last written (not sent)
        self.unchanged = 0
        self.dirty_computations: set[ComputationTrack] = set()
        self.totals = Totals()
        self.prefix_totals: dict[str, Totals] = {}
        self.prefix_groups: dict[str, int] = {}
        self.dirty_prefixes: set[str] = set()
        #: groups adopted since the last flush (their spans' figures take them in)
        self.adopted: list[TaskGroup] = []
        #: lifetimes numbered across all names: nothing to remember per name, so memory
        #: does not grow with the names a long-lived cluster has seen
        self._lifetimes = 0

    # -- hot path (transition hook) ------------------------------------------------------

    def task_finished(self, ts: TaskState, kwargs: Mapping[str, Any]) -> GroupUse:
        use = self.current.get(ts.group) or self._adopt(ts.group, None)
        if not use.ran and not use.fresh:
            use.first_start = _first_start(kwargs)
        use.executed += 1
        self.dirty.add(use)
        return use

    def task_erred(self, ts: TaskState, kwargs: Mapping[str, Any]) -> GroupUse:
        use = self.current.get(ts.group) or self._adopt(ts.group, None)
        if not use.ran and not use.fresh:
            use.first_start = _first_start(kwargs)
        for ss in kwargs.get("startstops") or ():
            use.error_stop = max(use.error_stop, ss.get("stop") or 0.0)
        use.erred += 1
        self.dirty.add(use)
        return use

    def task_forgotten(self, ts: TaskState) -> None:
        # the group's final states and its retirement are written at the next flush
        use = self.current.get(ts.group)
        if use is not None:
            self.dirty.add(use)

    # -- graphs --------------------------------------------------------------------------

    def graph_updated(self, scheduler: Scheduler, keys: Iterable[Any]) -> None:
        """A graph arrived: its groups now count their tasks for Dask's newest
        computation (the one this graph was added to)."""
        if not scheduler.computations:
            return
        computation = scheduler.computations[-1]
        track = self.computations.get(computation)
        if track is None:
            track = ComputationTrack(
                stable_id(self.cluster_id, "computation", computation.id), computation
            )
            self.computations[computation] = track
        if self.newest is not None and self.newest is not track:
            # the previous one is finished now: its record gets its stop time
            self.dirty_computations.add(self.newest)
        self.newest = track
        self.dirty_computations.add(track)
        tasks = scheduler.tasks
        seen: set[TaskGroup] = set()
        for key in keys:
            ts = tasks.get(key)
            if ts is None or ts.group in seen:
                continue
            tg = ts.group
            seen.add(tg)
            use = self.current.get(tg)
            if use is None:
                self._adopt(tg, track)
            elif use.computation is not track:
                self._hand_over(use, track)
        track.pending.update(tg for tg in seen if not tg.done)

    def _adopt(self, tg: TaskGroup, computation: ComputationTrack | None) -> GroupUse:
        # A group we do not follow is new to us (we drop a use only once its group is
        # forgotten, and a name that comes back is a new TaskGroup): number it so that
        # each lifetime of a name keeps its own record.
        self._lifetimes += 1
        lifetime = self._lifetimes
        self.adopted.append(tg)
        prefix = tg.prefix.name
        self.prefix_groups[prefix] = self.prefix_groups.get(prefix, 0) + 1
        self.dirty_prefixes.add(prefix)
        use = GroupUse(
            self._use_id(tg.name, lifetime, computation),
            tg,
            computation,
            base_nbytes=tg.nbytes_total,
            base_durations=dict(tg.all_durations),
            fresh=not tg.start,
            lifetime=lifetime,
        )
        self.current[tg] = use
        if computation is not None:
            computation.uses.add(use)
        return use

    def _use_id(self, name: str, lifetime: int, computation: ComputationTrack | None) -> str:
        owner = computation.record_id if computation is not None else None
        return stable_id(self.cluster_id, "task-group", name, lifetime, owner)

    def _hand_over(self, use: GroupUse, to: ComputationTrack) -> None:
        tg = use.group
        if use.ran:
            # freeze what the group did for the earlier computation
            use.final = self._group_record(use)
            self.dirty.add(use)
        elif use.computation is not None:
            use.computation.uses.discard(use)
        successor = GroupUse(
            self._use_id(tg.name, use.lifetime, to),
            tg,
            to,
            base_nbytes=tg.nbytes_total,
            base_durations=dict(tg.all_durations),
            fresh=False,
            lifetime=use.lifetime,
        )
        self.current[tg] = successor
        to.uses.add(successor)

    # -- snapshots -----------------------------------------------------------------------

    def _group_record(self, use: GroupUse) -> TaskGroupRecord:
        if use.final is not None:
            return use.final
        tg = use.group
        durations = {}
        for activity, seconds in tg.all_durations.items():
            grown = seconds - use.base_durations.get(activity, 0.0)
            if grown > 0:
                durations[activity] = grown
        if len(tg.dependencies) != use.dependency_count:
            use.dependencies = sorted(dep.name for dep in tg.dependencies)
            use.dependency_count = len(tg.dependencies)
        started = tg.start if use.fresh else use.first_start
        stopped = _use_stop(use)
        return TaskGroupRecord(
            id=use.record_id,
            cluster_id=self.cluster_id,
            name=tg.name,
            prefix=tg.prefix.name,
            computation_id=use.computation.record_id if use.computation else None,
            span_id=tg.span_id,
            dependencies=use.dependencies,
            states=snapshot.nonzero(tg.states),
            tasks_total=len(tg),
            tasks_executed=use.executed,
            tasks_erred=use.erred,
            nbytes_total=tg.nbytes_total - use.base_nbytes,
            duration_s=sum(durations.values()),
            durations=durations,
            types=sorted(tg.types),
            started_at=started or None,
            stopped_at=stopped or None,
        )

    def snapshot_groups(
        self, uses: Iterable[GroupUse], scheduler: Scheduler, records: list[Record]
    ) -> tuple[set[str], list[GroupUse]]:
        """Records of the given (changed) uses; returns the spans they touch and the uses
        that are finished for good (their group forgotten, or handed over), to drop once
        their records are stored."""
        spans: set[str] = set()
        finished: list[GroupUse] = []
        live_groups = scheduler.task_groups
        for use in uses:
            record = self._group_record(use)
            self._count(use, record)
            if use.ran:
                # a group marked changed whose record is what was last written (e.g. a
                # handed-over group's frozen record, marked again as its tasks are
                # forgotten) costs the store nothing
                if record == use.written:
                    self.unchanged += 1
                else:
                    records.append(record)
                    use.written = record
                    if record.span_id:
                        spans.add(record.span_id)
            tg = use.group
            if use.final is not None or (live_groups.get(tg.name) is not tg and tg.done):
                finished.append(use)
        return spans, finished

    def _count(self, use: GroupUse, record: TaskGroupRecord) -> None:
        now = Totals(record.tasks_executed, record.tasks_erred, record.nbytes_total)
        now.durations = record.durations
        before = use.counted
        if (now.executed, now.erred, now.nbytes, now.durations) == (
            before.executed,
            before.erred,
            before.nbytes,
            before.durations,
        ):
            return
        track = use.computation
        if track is not None:
            track.executed += now.executed - before.executed
            track.erred += now.erred - before.erred
            if not (before.executed or before.erred):
                track.groups += 1  # its first task ran or failed
            track.stop = max(track.stop, record.stopped_at or 0.0)
            self.dirty_computations.add(track)
        prefix = self.prefix_totals.setdefault(record.prefix, Totals())
        for totals in (self.totals, prefix):
            totals.add(use.counted, -1)
            totals.add(now)
        use.counted = Totals(now.executed, now.erred, now.nbytes, dict(now.durations))
        self.dirty_prefixes.add(record.prefix)

    def not_written(self, uses: Iterable[GroupUse]) -> None:
        """A write of these uses' records failed (or the store was lost): mark them
        changed, to be written at the next flush whatever they hold."""
        for use in uses:
            use.written = None
            self.dirty.add(use)

    def drop(self, finished: Iterable[GroupUse]) -> None:
        """Forget uses whose last state is stored: memory stays bounded by what is alive."""
        for use in finished:
            if self.current.get(use.group) is use:
                del self.current[use.group]
            track = use.computation
            if track is not None:
                track.uses.discard(use)
                if track.done_written and not track.uses:
                    self.computations.pop(track.computation, None)

    def computations_written(self, done: Iterable[ComputationTrack]) -> None:
        """Their records are stored as done: forget them once nothing of them is alive."""
        for track in done:
            track.done_written = True
            track.pending.clear()
            if not track.uses:
                self.computations.pop(track.computation, None)

    def finish_all(self) -> None:
        """After ``client.restart()`` Dask drops every group without forgetting its
        tasks one by one: write each use once more, then let it go."""
        for use in list(self.current.values()):
            use.final = self._group_record(use)  # final: dropped once written
            self.dirty.add(use)
        self.current.clear()
        if self.newest is not None:  # Dask starts its computations afresh
            self.dirty_computations.add(self.newest)
            self.newest = None

    def prefix_records(self, names: Iterable[str]) -> list[Record]:
        records: list[Record] = []
        for name in names:
            totals = self.prefix_totals.get(name, Totals())
            records.append(
                TaskPrefixRecord(
                    id=stable_id(self.cluster_id, "task-prefix", name),
                    cluster_id=self.cluster_id,
                    name=name,
                    group_count=self.prefix_groups.get(name, 0),
                    tasks_executed=totals.executed,
                    tasks_erred=totals.erred,
                    nbytes_total=totals.nbytes,
                    duration_s=totals.duration_s,
                    durations=dict(totals.durations),
                )
            )
        return records

    def computation_record(self, track: ComputationTrack) -> tuple[ComputationRecord, bool]:
        """The computation's record, and whether it is done (nothing of it left to run)."""
        done = track is not self.newest or self._all_done(track)
        computation = track.computation
        if len(computation.code) != track.code_frames:  # Dask adds code with each graph
            track.code = snapshot.code_snippets(computation.code, self.max_code_chars)
            track.code_frames = len(computation.code)
        return (
            ComputationRecord(
                id=track.record_id,
                cluster_id=self.cluster_id,
                started_at=computation.start,
                # a computation that ran nothing (its results were in memory) took no time
                stopped_at=max(track.stop, computation.start) if done else None,
                code=track.code,
                annotations=jsonable(computation.annotations),
                tasks_executed=track.executed,
                tasks_erred=track.erred,
                group_count=track.groups,
            ),
            done,
        )

    def _all_done(self, track: ComputationTrack) -> bool:
        current = self.current
        pending = track.pending
        for tg in list(pending):
            use = current.get(tg)
            if tg.done or (use is not None and use.computation is not track):
                pending.discard(tg)  # finished, or a newer computation runs it now
            else:
                return False
        return True
