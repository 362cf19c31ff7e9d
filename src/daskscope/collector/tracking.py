"""Which computation ran which tasks, and what changed since the last write.

(Over 400 lines: one class, :class:`WorkTracker`, whose bookkeeping of which computation
owns which group's work and what changed since the last write must stay consistent
across every hook and flush; it reads best whole.)

Dask hands a computation only the task groups it *creates* (``Computation.groups``), and
a group whose name comes back while it is still alive — a persisted array summed in a
notebook loop, the same expression computed twice — belongs to the first computation
only. daskscope instead follows the graphs themselves: each ``update_graph`` names the
tasks it touched, and from then on the tasks of those groups that run or fail count for
that computation, the newest to ask for them (the hook only notes a graph's new groups,
which the next flush adopts in chunks, or a hook as soon as a task of one ends). One
:class:`GroupUse` holds one group's work within one computation: what the group had
already done when the computation took it over is its baseline, and the use's figures
are the group's growth since.

Every hook marks what it changed; a flush writes only that (issue: recording cost
proportional to what changed, not to how much is alive). A group that began
running is written by a timed flush at most every ``progress_seconds`` (the setting
``daskscope.progress-interval``, :data:`PROGRESS_SECONDS` by default), counted
from the flush that first saw it running (most groups of a large graph are done by then:
one row a group instead of one a flush it spans), and a group that is done
is written again by a timed flush only when its figures change, not when its tasks only
move on from memory to released and forgotten (Dask keeps a large graph's intermediate
tasks released until its result is released, then forgets them all at once: each such
move would be a row a group); an explicit flush and the close write those of the groups
still alive. A group Dask forgot keeps the states of its last record, whichever flush
comes next (issue 28: a finished group written once).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from time import monotonic
from typing import TYPE_CHECKING, Any

from daskscope.collector import snapshot
from daskscope.model import ComputationRecord, Record, TaskGroupRecord, TaskPrefixRecord, stable_id

if TYPE_CHECKING:
    from distributed.scheduler import Computation, Scheduler, TaskGroup, TaskState

__all__ = ["ComputationTrack", "GroupUse", "WorkTracker"]


#: By default a timed flush writes a running group at most this often, counted from the
#: flush that first saw it running (an explicit flush and the close write it at once; a
#: group that is done, at the next flush)
PROGRESS_SECONDS = 10.0

#: the longest group row key made of its parts (ids referring to a group are short text,
#: at most 512 characters); a longer one, or one not ASCII, is a uuid5 of them
MAX_PLAIN_ID = 200


@dataclass(slots=True)
class Totals:
    """Additive totals of group uses (per cluster or per task prefix)."""

    executed: int = 0
    erred: int = 0
    nbytes: int = 0
    durations: dict[str, float] = field(default_factory=dict)

    def take(self, record: TaskGroupRecord, use: GroupUse) -> None:
        """Replace what a use added (as last counted) by what its ``record`` holds."""
        self.executed += record.tasks_executed - use.counted_executed
        self.erred += record.tasks_erred - use.counted_erred
        self.nbytes += record.nbytes_total - use.counted_nbytes
        durations = self.durations
        for activity, seconds in record.durations.items():
            durations[activity] = durations.get(activity, 0.0) + seconds
        for activity, seconds in use.counted_durations.items():
            durations[activity] -= seconds

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
    #: its group uses whose first record a flush put off (not counted yet): while any
    #: is, its record is not marked done
    awaiting: int = 0


@dataclass(eq=False, slots=True)
class GroupUse:
    """One TaskGroup's work while one computation was the newest to ask for it."""

    record_id: str
    group: TaskGroup
    computation: ComputationTrack | None
    #: the group's cumulative figures when this use began (its growth since is ours)
    base_nbytes: int
    base_durations: dict[str, float]
    executed: int = 0
    erred: int = 0
    #: when the first of its tasks' executions started computing, the last that ran
    #: stopped, and the last failure's stop, each from the task's own execution (see
    #: :meth:`WorkTracker.task_finished`), never Dask's TaskGroup start and stop
    first_start: float | None = None
    last_stop: float = 0.0
    error_stop: float = 0.0
    #: the record as it stood when the group was handed to a later computation
    final: TaskGroupRecord | None = None
    #: what the cluster and prefix totals hold of this use. Plain fields: a use lives as
    #: long as its group, and each object it kept would be tracked by Python's garbage
    #: collector, adding to every full collection over the scheduler's millions of
    #: objects (issue 16); a dict of numbers, a tuple of strings and an int are not.
    counted_executed: int = 0
    counted_erred: int = 0
    counted_nbytes: int = 0
    counted_durations: dict[str, float] = field(default_factory=dict)
    dependencies: tuple[str, ...] = ()
    dependency_count: int = -1
    #: which lifetime of its group this is (unique within the recorder: a name that
    #: comes back after its group was forgotten is a new TaskGroup with a new number)
    lifetime: int = 0
    #: a hash of what the record last handed to the sink held (:func:`_signature`): an
    #: equal one is not written again (two different records share a 64-bit hash by a
    #: chance of one in 2**64; a record kept instead would be a tracked object a group)
    written: int | None = None
    #: no task of it ended since its last record: its figures are as written (a done
    #: group's states alone moving on are not written by a timed flush)
    settled: bool = False
    #: a flush put it off while it ran (see snapshot_groups)
    put_off: bool = False
    #: when its record was last handed to the sink, or a flush first saw it running
    #: (``time.monotonic``)
    written_at: float = 0.0
    #: seconds by activity of its tasks' attempts that failed and ran again (Dask counts
    #: them nowhere: :meth:`WorkTracker.attempt_retried`); None while there are none
    retried: dict[str, float] | None = None
    #: seconds by activity Dask added to the group again from the entries of earlier
    #: executions a worker re-sent with a task's report (:meth:`WorkTracker._resent`):
    #: not this use's; None while there are none
    resent: dict[str, float] | None = None

    @property
    def ran(self) -> bool:
        return bool(self.executed or self.erred)


def _signature(record: TaskGroupRecord) -> int:
    """A hash of what a use's record holds that can change (its id, names and owner
    cannot)."""
    return hash(
        (
            record.span_id,
            len(record.dependencies),
            tuple(record.states.items()),
            record.tasks_total,
            record.tasks_executed,
            record.tasks_erred,
            record.nbytes_total,
            tuple(record.durations.items()),
            tuple(record.types),
            record.started_at,
            record.stopped_at,
        )
    )


def jsonable(value: Any) -> Any:
    """A JSON-safe copy (annotations may hold tuples, sets or arbitrary objects)."""
    return json.loads(json.dumps(value, default=str))


def _use_stop(use: GroupUse) -> float | None:
    """When the use's last task finished or failed."""
    if use.final is not None:
        return use.final.stopped_at
    return max(use.last_stop, use.error_stop) if use.ran else None


def _add_seconds(into: dict[str, float], startstops: Iterable[Mapping[str, Any]]) -> None:
    """Each entry's seconds added to ``into`` by action, in whole microseconds as Dask
    adds a finished task's to its group."""
    for ss in startstops:
        seconds = max(round((ss["stop"] - ss["start"]) * 1e6), 0) / 1e6
        into[ss["action"]] = into.get(ss["action"], 0.0) + seconds


class WorkTracker:
    """Counts each task's outcome for the right computation and group, and turns what
    changed into records. Runs on the scheduler's event loop only."""

    def __init__(
        self,
        cluster_id: str,
        *,
        max_code_chars: int,
        progress_seconds: float = PROGRESS_SECONDS,
    ) -> None:
        self.cluster_id = cluster_id
        self.max_code_chars = max_code_chars
        #: how often a timed flush writes a running group (0: at every flush)
        self.progress_seconds = progress_seconds
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
        #: new groups of graphs, each with the computation that asked for it, adopted by
        #: the next flush in chunks (:meth:`adopt_waiting`) rather than in the
        #: ``update_graph`` hook, which holds the loop for the whole graph: a hook that
        #: sees one of their tasks end adopts its group there, for that computation
        self.to_adopt: dict[TaskGroup, ComputationTrack] = {}
        #: done groups whose states alone moved on since their last record, kept for
        #: an explicit flush or the close (see the module's docstring), and their count
        self.states_pending: set[GroupUse] = set()
        self.states_only = 0
        #: running groups a timed flush put off and not taken since (their
        #: computations' counts lack them), and when each is due: a flush takes those
        #: due and those marked changed, not every running group
        self.put_off: dict[GroupUse, float] = {}
        #: lifetimes numbered across all names: nothing to remember per name, so memory
        #: does not grow with the names a long-lived cluster has seen
        self._lifetimes = 0

    # -- hot path (transition hook) ------------------------------------------------------

    def task_finished(self, ts: TaskState, kwargs: Mapping[str, Any]) -> GroupUse:
        use = self.current.get(ts.group) or self._adopt_now(ts.group)
        # The execution that just ended is the last "compute" entry. A worker that kept
        # the task from an earlier computation (Dask keeps a group's released tasks, and
        # the worker its own, while a dependent lives) sends that one's entries first,
        # each shifted by the clock offset the worker estimated at the time: they may lie
        # anywhere, even after this one (issue 25). Dask's TaskGroup start, stop and
        # durations take them in (and its start and stop every computation's tasks in
        # the group): never ours.
        this = None
        computes = 0
        for ss in kwargs.get("startstops") or ():
            if ss["action"] == "compute":
                this = ss
                computes += 1
        if this is not None:
            if this["stop"] > use.last_stop:
                use.last_stop = this["stop"]
            first = use.first_start
            if first is None or this["start"] < first:
                use.first_start = this["start"]
            if computes > 1:
                self._resent(use, kwargs["startstops"])
        use.executed += 1
        use.settled = False
        self.dirty.add(use)
        return use

    def task_erred(self, ts: TaskState, kwargs: Mapping[str, Any]) -> GroupUse:
        use = self.current.get(ts.group) or self._adopt_now(ts.group)
        # this attempt's entries: back from the end to its "compute" entry (as above)
        for ss in reversed(kwargs.get("startstops") or ()):
            use.error_stop = max(use.error_stop, ss.get("stop") or 0.0)
            if ss.get("action") == "compute":
                first = use.first_start
                if first is None or ss["start"] < first:
                    use.first_start = ss["start"]
                break
        use.erred += 1
        use.settled = False
        self.dirty.add(use)
        return use

    def attempt_retried(self, ts: TaskState, startstops: Iterable[Mapping[str, Any]]) -> GroupUse:
        """An attempt of ``ts`` failed and Dask runs it again: its actions' seconds count
        for its group as Dask counts a finished task's (whole microseconds), though
        Dask's own group drops them (rare: off the per-task path)."""
        use = self.current.get(ts.group) or self._adopt_now(ts.group)
        if use.retried is None:
            use.retried = {}
        _add_seconds(use.retried, startstops)
        use.settled = False
        self.dirty.add(use)
        return use

    def _resent(self, use: GroupUse, startstops: list[Mapping[str, Any]]) -> None:
        """A report that re-sent earlier executions' entries (rare): everything up to
        the previous execution's "compute" entry and its "disk-write", which Dask just
        added to the group's durations again (in whole microseconds, as Dask does)."""
        computes = [i for i, ss in enumerate(startstops) if ss["action"] == "compute"]
        end = computes[-2] + 1
        while end < len(startstops) and startstops[end]["action"] == "disk-write":
            end += 1
        if use.resent is None:
            use.resent = {}
        _add_seconds(use.resent, startstops[:end])

    def task_forgotten(self, ts: TaskState) -> None:
        # the group's final states and its retirement are written at the next flush
        use = self.current.get(ts.group)
        if use is None and ts.group in self.to_adopt:
            use = self._adopt_now(ts.group)  # dropped once written, like any other
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
            if use is not None:
                if use.computation is not track:
                    self._hand_over(use, track)
            elif tg in self.to_adopt or not (tg.start or tg.nbytes_total or tg.duration):
                # nothing of it ran yet (had a task of one that waits ended, a hook would
                # have adopted it), so its baseline is nothing: this computation takes it
                self.to_adopt[tg] = track
            else:
                self._adopt(tg, track)  # its figures so far are its baseline: read now
        track.pending.update(tg for tg in seen if not tg.done)

    def adopt_waiting(self, most: int) -> None:
        """Adopt up to ``most`` of the groups new graphs brought (:attr:`to_adopt`)."""
        to_adopt, current = self.to_adopt, self.current
        for _ in range(min(most, len(to_adopt))):
            tg, track = to_adopt.popitem()
            if tg not in current:
                self._adopt(tg, track, blank=True)

    def _adopt_now(self, tg: TaskGroup) -> GroupUse:
        """A group without a use whose task ended or was forgotten: adopted for the
        computation whose graph brought it, if one did and it waits to be adopted."""
        track = self.to_adopt.pop(tg, None)
        return self._adopt(tg, track, blank=track is not None)

    def _adopt(
        self, tg: TaskGroup, computation: ComputationTrack | None, *, blank: bool = False
    ) -> GroupUse:
        """``blank``: the group had no figures when its graph came (it waited in
        :attr:`to_adopt`), so its baseline is nothing, whatever it holds now (Dask
        counts a task's figures before the hook that adopts it sees the task end)."""
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
            base_nbytes=0 if blank else tg.nbytes_total,
            base_durations={} if blank else snapshot.plain(tg.all_durations),
            lifetime=lifetime,
        )
        self.current[tg] = use
        if computation is not None:
            computation.uses.add(use)
        return use

    def _use_id(self, name: str, lifetime: int, computation: ComputationTrack | None) -> str:
        """The row key of a group use: its owner (the computation's record id, itself
        unique to its cluster, else the cluster's id), its lifetime and the group's
        name, joined. No hash a group on the event loop (uuid5 cost 3.4 µs a group,
        issue 28); a name so long that the key would not fit where other records refer
        to it (an error's ``group_id``) is hashed as before."""
        owner = computation.record_id if computation is not None else self.cluster_id
        key = f"{owner}/{lifetime}/{name}"
        if len(key) > MAX_PLAIN_ID or not key.isascii():
            return stable_id(self.cluster_id, "task-group", name, lifetime, owner)
        return key

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
            base_durations=snapshot.plain(tg.all_durations),
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
        resent = use.resent or {}
        for activity, seconds in tg.all_durations.items():
            grown = seconds - use.base_durations.get(activity, 0.0) - resent.get(activity, 0.0)
            if grown > 1e-9:
                durations[activity] = grown
        for activity, seconds in (use.retried or {}).items():
            durations[activity] = durations.get(activity, 0.0) + seconds
        if len(tg.dependencies) != use.dependency_count:
            use.dependencies = tuple(sorted(dep.name for dep in tg.dependencies))
            use.dependency_count = len(tg.dependencies)
        started = use.first_start
        stopped = _use_stop(use)
        return TaskGroupRecord(
            id=use.record_id,
            cluster_id=self.cluster_id,
            name=tg.name,
            prefix=tg.prefix.name,
            computation_id=use.computation.record_id if use.computation else None,
            span_id=tg.span_id,
            dependencies=list(use.dependencies),
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

    def take_changed(self, *, paced: bool = True, now: float | None = None) -> list[GroupUse]:
        """The uses a flush takes: those marked changed, those put off that are due at
        ``now`` (``time.monotonic()`` by default), and, when ``paced`` is False (an
        explicit flush, the close), every use put off and the done groups whose states
        alone moved on."""
        changed = self.dirty
        if paced:
            if now is None:
                now = monotonic()
            changed.update([use for use, due in self.put_off.items() if due <= now])
        else:
            changed.update(self.put_off)
            changed |= self.states_pending
        self.dirty = set()
        return list(changed)

    def snapshot_groups(
        self,
        uses: Iterable[GroupUse],
        scheduler: Scheduler,
        records: list[Record],
        *,
        paced: bool = True,
        now: float | None = None,
    ) -> tuple[set[str], list[GroupUse], list[GroupUse]]:
        """Records of the given (changed) uses; returns the spans they touch, the uses
        that are finished for good (their group forgotten, or handed over), to drop once
        their records are stored, and the uses read (whose spans take in their group).
        ``paced`` (a timed flush): a done group none of whose tasks ended since its last
        record has only its states changed, and is neither read nor written; a running
        group is put off to the next flush until ``progress_seconds`` have passed
        since a flush first saw it running, or since its last record (``now``:
        ``time.monotonic()`` by default)."""
        spans: set[str] = set()
        finished: list[GroupUse] = []
        read: list[GroupUse] = []
        live_groups = scheduler.task_groups
        if now is None:
            now = monotonic()
        for use in uses:
            tg = use.group
            gone = use.final is not None or (live_groups.get(tg.name) is not tg and tg.done)
            if use.final is None and use.settled and tg.done and (gone or paced):
                # done, none of its tasks ended since its last record: its states alone
                # moved on. Forgotten by Dask, it keeps the states of that record whatever
                # the flush (one row a group; an explicit flush still has its span take
                # them in, as Dask's span does); alive, an explicit flush writes them
                self.states_only += 1
                self._not_awaited(use)  # e.g. its last tasks cancelled, not run
                if not gone:
                    self.states_pending.add(use)
                    continue
                if not paced:
                    read.append(use)
                finished.append(use)
                continue
            if paced and use.final is None and use.ran and not tg.done:
                if not use.put_off and use.written is None:
                    use.written_at = now  # seen running first: its clock starts
                if now - use.written_at < self.progress_seconds:
                    # written (or seen running) a moment ago: most groups of a large
                    # graph are done before it is their turn again (one row a group)
                    use.put_off = True
                    if use not in self.put_off and use.computation is not None:
                        use.computation.awaiting += 1
                    self.put_off[use] = use.written_at + self.progress_seconds
                    continue
            read.append(use)
            self._not_awaited(use)
            record = self._group_record(use)
            self._count(use, record)
            if use.ran:
                signature = _signature(record)
                if signature == use.written:
                    # e.g. a handed-over group's frozen record, marked again as its tasks
                    # are forgotten: costs the store nothing
                    self.unchanged += 1
                else:
                    records.append(record)
                    use.written = signature
                    if record.span_id:
                        spans.add(record.span_id)
                use.written_at = now  # the store holds its figures as of now
                use.settled = True
                self.states_pending.discard(use)
            if gone:
                finished.append(use)
        return spans, finished, read

    def _not_awaited(self, use: GroupUse) -> None:
        """A use put off is taken now (or let go): its computation no longer waits."""
        if self.put_off.pop(use, None) is not None and use.computation is not None:
            use.computation.awaiting -= 1

    def _count(self, use: GroupUse, record: TaskGroupRecord) -> None:
        executed, erred = record.tasks_executed, record.tasks_erred
        if (executed, erred, record.nbytes_total, record.durations) == (
            use.counted_executed,
            use.counted_erred,
            use.counted_nbytes,
            use.counted_durations,
        ):
            return
        track = use.computation
        if track is not None:
            track.executed += executed - use.counted_executed
            track.erred += erred - use.counted_erred
            if not (use.counted_executed or use.counted_erred):
                track.groups += 1  # its first task ran or failed
            track.stop = max(track.stop, record.stopped_at or 0.0)
            self.dirty_computations.add(track)
        prefix = self.prefix_totals.setdefault(record.prefix, Totals())
        self.totals.take(record, use)
        prefix.take(record, use)
        use.counted_executed, use.counted_erred = executed, erred
        use.counted_nbytes = record.nbytes_total
        use.counted_durations = dict(record.durations)
        self.dirty_prefixes.add(record.prefix)

    def not_written(self, uses: Iterable[GroupUse]) -> None:
        """A write of these uses' records failed (or the store was lost): mark them
        changed, to be written at the next flush whatever they hold."""
        for use in uses:
            use.written = None
            use.settled = False
            if use.put_off:  # a running group written before: not left to its pace
                use.written_at = 0.0
            self.dirty.add(use)

    def drop(self, finished: Iterable[GroupUse]) -> None:
        """Forget uses whose last state is stored: memory stays bounded by what is alive."""
        for use in finished:
            self.states_pending.discard(use)
            self._not_awaited(use)
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
        self.adopt_waiting(len(self.to_adopt))  # counted among their prefixes' groups
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
        # a group put off is not counted yet: the computation's figures are not final
        done = (track is not self.newest or self._all_done(track)) and not track.awaiting
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
