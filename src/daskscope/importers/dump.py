"""A ``client.dump_cluster_state()`` file as the recorder's records.

What a dump holds (``distributed.cluster_dump``): the scheduler's tasks (state, group,
nbytes, where held, errors), its live task groups (states, durations by activity, bytes,
start and stop), its workers (threads, memory limit and split, heartbeat metrics) and its
transition log (the last transitions, bounded by ``distributed.admin.low-level-log-length``);
each worker's tasks with their start/stop times by action. These become a cluster, task
groups and prefixes, one sample a worker, the failed tasks' errors and the task log of
every execution a worker still remembered, the same records the recorder writes.
"""

from __future__ import annotations

import platform
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from daskscope import config
from daskscope.collector.workers import flatten_metrics
from daskscope.importers.errors import BadImportFile
from daskscope.importers.imported import Imported, mark_imported, prefixes_of
from daskscope.importers.naming import dask_key, group_of, prefix_of, repr_address
from daskscope.model import (
    ClusterRecord,
    ErrorRecord,
    Record,
    TaskGroupRecord,
    WorkerSampleRecord,
    stable_id,
)
from daskscope.tasklog.segments import Execution, encode_segment, execution

__all__ = ["ALWAYS_MISSING", "dump_records"]

#: what no dump holds
ALWAYS_MISSING = (
    "computations (a dump does not say which call submitted which tasks)",
    "spans and fine metrics (Dask's spans extension is not dumped)",
    "profiles",
    "worker samples over time (one sample a worker, at the dump)",
    "capacity over time (core-seconds, memory reserved)",
    "the thread of each execution",
    "executions the workers had forgotten before the dump (their groups keep counts)",
)


def _bad(message: str) -> Exception:
    return BadImportFile(message)


def _mapping(value: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _bad(
            f"not a dump_cluster_state file: {what} is {type(value).__name__}, not a mapping; "
            "expected the file client.dump_cluster_state() writes"
        )
    return value


def _number(value: Any, default: float = 0.0) -> float:
    return (
        float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else default
    )


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


class _Transitions:
    """What the scheduler's transition log says: executions and failures by key."""

    def __init__(self, log: Iterable[Any]) -> None:
        self.entries = 0
        self.executed: Counter[str] = Counter()  # by group
        self.erred: Counter[str] = Counter()
        self.erred_at: dict[Any, float] = {}
        self.first: dict[str, float] = {}
        self.last: dict[str, float] = {}
        self.latest = 0.0
        for entry in log:
            if not isinstance(entry, (list, tuple)) or len(entry) < 6:
                continue
            self.entries += 1
            key, start, finish, at = dask_key(entry[0]), entry[1], entry[2], _number(entry[-1])
            self.latest = max(self.latest, at)
            if start != "processing" or finish not in ("memory", "erred"):
                continue
            group = group_of(key)
            (self.executed if finish == "memory" else self.erred)[group] += 1
            if finish == "erred":
                self.erred_at[key] = at
            self.first[group] = min(self.first.get(group, at), at)
            self.last[group] = max(self.last.get(group, at), at)


def _versions(state: Mapping[str, Any]) -> dict[str, str]:
    versions = state.get("versions")
    scheduler = versions.get("scheduler") if isinstance(versions, Mapping) else None
    packages = scheduler.get("packages") if isinstance(scheduler, Mapping) else None
    return {str(k): str(v) for k, v in packages.items()} if isinstance(packages, Mapping) else {}


def _python(text: str) -> str:
    # Dask writes sys.version_info joined: "3.11.7.final.0"
    return ".".join(text.split(".")[:3]) if text else ""


def _groups(
    cluster_id: str,
    scheduler: Mapping[str, Any],
    tasks: Mapping[Any, Mapping[str, Any]],
    log: _Transitions,
) -> list[TaskGroupRecord]:
    """The live task groups as dumped, and groups only the transition log remembers."""
    records: dict[str, TaskGroupRecord] = {}
    states_by_group: dict[str, Counter[str]] = {}
    for key, ts in tasks.items():
        states_by_group.setdefault(group_of(key), Counter())[str(ts.get("state"))] += 1
    for name, tg in _mapping(scheduler.get("task_groups", {}), "scheduler.task_groups").items():
        tg = _mapping(tg, f"task group {name!r}")
        name = str(name)
        durations = {str(k): _number(v) for k, v in (tg.get("all_durations") or {}).items()}
        states = {str(s): int(n) for s, n in (tg.get("states") or {}).items() if _int(n)}
        records[name] = TaskGroupRecord(
            id=stable_id(cluster_id, "task-group", name, _number(tg.get("start"))),
            cluster_id=cluster_id,
            name=name,
            prefix=prefix_of(name),
            span_id=tg.get("span_id") if isinstance(tg.get("span_id"), str) else None,
            dependencies=sorted(
                str(d).strip("<>").split(":")[0] for d in (tg.get("dependencies") or ())
            ),
            states=states,
            tasks_total=sum(states.values()),
            tasks_executed=log.executed.get(name, 0),
            tasks_erred=log.erred.get(name, 0),
            nbytes_total=max(0, _int(tg.get("nbytes_total")) or 0),
            duration_s=max(0.0, _number(tg.get("duration"))),
            durations=durations,
            types=sorted(str(t) for t in (tg.get("types") or ())),
            started_at=_number(tg.get("start")) or None,
            stopped_at=_number(tg.get("stop")) or None,
        )
    # tasks whose group was not dumped (a dump of another Dask), and groups forgotten
    # before the dump that the transition log still remembers
    for name in sorted(set(states_by_group) | set(log.executed) | set(log.erred)):
        if name in records:
            continue
        states = dict(states_by_group.get(name, {}))
        records[name] = TaskGroupRecord(
            id=stable_id(cluster_id, "task-group", name, log.first.get(name, 0.0)),
            cluster_id=cluster_id,
            name=name,
            prefix=prefix_of(name),
            states=states,
            tasks_total=sum(states.values()),
            tasks_executed=log.executed.get(name, 0),
            tasks_erred=log.erred.get(name, 0),
            started_at=log.first.get(name),
            stopped_at=log.last.get(name),
        )
    return list(records.values())


def _worker_sample(
    cluster_id: str, address: str, ws: Mapping[str, Any], at: float
) -> WorkerSampleRecord:
    def part(source: Mapping[str, Any], name: str) -> Mapping[str, Any]:
        value = source.get(name)
        return value if isinstance(value, Mapping) else {}

    memory, metrics = part(ws, "memory"), part(ws, "metrics")
    transfer, net, disk = (part(metrics, n) for n in ("transfer", "host_net_io", "host_disk_io"))

    def size(value: Any) -> int | None:
        n = _int(value)
        return n if n is not None and n >= 0 else None

    def rate(source: Mapping[str, Any], name: str) -> float | None:
        return _number(source[name]) if _int(source.get(name)) is not None else None

    seen = _number(ws.get("last_seen"), at) or at
    return WorkerSampleRecord(
        id=stable_id(cluster_id, "worker-sample", address, seen),
        cluster_id=cluster_id,
        worker=address,
        sampled_at=seen,
        nthreads=max(0, _int(ws.get("nthreads")) or 0),
        memory_limit=size(ws.get("memory_limit")) or None,
        memory=size(memory.get("process")),
        managed_bytes=size(memory.get("managed")),
        unmanaged_bytes=size(memory.get("unmanaged")),
        unmanaged_old_bytes=size(memory.get("unmanaged_old")),
        unmanaged_recent_bytes=size(memory.get("unmanaged_recent")),
        spilled_bytes=size(memory.get("spilled")),
        cpu_percent=rate(metrics, "cpu"),
        executing=len(ws.get("executing") or ()),
        processing=len(ws.get("processing") or ()),
        transfer_incoming_bytes=size(transfer.get("incoming_bytes")),
        transfer_outgoing_bytes=size(transfer.get("outgoing_bytes")),
        net_read_bps=rate(net, "read_bps"),
        net_write_bps=rate(net, "write_bps"),
        disk_read_bps=rate(disk, "read_bps"),
        disk_write_bps=rate(disk, "write_bps"),
        metrics=flatten_metrics(metrics),
    )


def _executions(workers: Mapping[str, Any]) -> list[Execution]:
    """Every execution a worker still remembered: a task of its own with a compute
    action (a task it only fetched has a transfer alone)."""
    found: list[Execution] = []
    for address, dumped in workers.items():
        if not isinstance(dumped, Mapping):  # a worker that failed to answer: its error text
            continue
        for name, ts in (dumped.get("tasks") or {}).items():
            if not isinstance(ts, Mapping):
                continue
            startstops = [
                dict(s)
                for s in ts.get("startstops") or ()
                if isinstance(s, Mapping) and isinstance(s.get("start"), (int, float))
            ]
            if not any(s.get("action") == "compute" for s in startstops):
                continue
            key = dask_key(ts.get("key", name))
            group = group_of(key)
            found.append(
                execution(
                    key,
                    group,
                    prefix_of(group),
                    str(address),
                    None,
                    startstops,
                    erred=ts.get("state") == "error",
                    nbytes=_int(ts.get("nbytes")),
                    computation=None,
                    span=ts.get("span_id") if isinstance(ts.get("span_id"), str) else None,
                )
            )
    return found


def _errors(
    cluster_id: str, tasks: Mapping[Any, Mapping[str, Any]], log: _Transitions, at: float
) -> list[ErrorRecord]:
    records = []
    for key, ts in tasks.items():
        if ts.get("state") != "erred":
            continue
        if key not in log.erred_at and str(key) not in str(ts.get("exception_blame") or key):
            # erred because a dependency did: Dask blames that one, which has its own
            # record (the recorder keeps only tasks that failed themselves)
            continue
        group = group_of(key)
        erred_on = ts.get("erred_on") or ()
        records.append(
            ErrorRecord(
                id=stable_id(cluster_id, "error", key),
                cluster_id=cluster_id,
                key=str(key),
                at=log.erred_at.get(key, at),
                group=group,
                prefix=prefix_of(group),
                group_id=None,
                worker=repr_address(next(iter(erred_on), None)),
                exception=str(ts.get("exception_text") or ""),
                traceback=str(ts.get("traceback_text") or ""),
            )
        )
    return records


def dump_records(state: Any, *, file: str, format: str, imported_at: float) -> Imported:
    """The records of a decoded ``dump_cluster_state`` file. Raises BadImportFile."""
    state = _mapping(state, "the file")
    if "scheduler" not in state or "workers" not in state:
        raise _bad(
            f"{file}: not a dump_cluster_state file (it has no 'scheduler' and 'workers'); "
            "expected the file client.dump_cluster_state() writes"
        )
    scheduler = _mapping(state["scheduler"], "scheduler")
    workers = _mapping(state["workers"], "workers")
    tasks = {
        dask_key(ts.get("key", name)): ts
        for name, ts in _mapping(scheduler.get("tasks", {}), "scheduler.tasks").items()
        if isinstance(ts, Mapping)
    }
    log = _Transitions(scheduler.get("transition_log") or ())
    versions = _versions(state)
    started = _number(scheduler.get("started"))
    scheduler_id = str(scheduler.get("id") or file)
    cluster_id = stable_id("imported", scheduler_id, started)

    scheduler_workers = _mapping(scheduler.get("workers", {}), "scheduler.workers")
    last_seen = max(
        [log.latest, started]
        + [
            _number(w.get("last_seen"))
            for w in scheduler_workers.values()
            if isinstance(w, Mapping)
        ]
    )
    samples = [
        _worker_sample(cluster_id, str(address), _mapping(ws, f"worker {address}"), last_seen)
        for address, ws in scheduler_workers.items()
    ]
    known = {s.worker for s in samples}
    for address, dumped in workers.items():  # a worker the scheduler no longer listed
        if str(address) not in known and isinstance(dumped, Mapping):
            samples.append(_worker_sample(cluster_id, str(address), dumped, last_seen))
    executions = _executions(workers)
    last_seen = max([last_seen] + [_number(s.get("stop")) for e in executions for s in (e[7] or ())]
                    + [_number(e[6]) for e in executions])  # fmt: skip
    groups = _groups(cluster_id, scheduler, tasks, log)
    cluster = ClusterRecord(
        id=cluster_id,
        name=scheduler_id,
        account=str(config.get("account") or "default"),
        user=str(config.get("user") or config.os_user()),
        scheduler_address=str(scheduler.get("address") or ""),
        dask_version=versions.get("dask", ""),
        distributed_version=versions.get("distributed", ""),
        python_version=_python(versions.get("python", "")) or platform.python_version(),
        started_at=started or last_seen,
        # the dump is the last the store knows of the cluster: it is not left "running"
        stopped_at=last_seen,
        last_seen_at=last_seen,
        workers_peak=len(samples),
        threads_peak=sum(s.nthreads for s in samples),
        memory_limit_peak=sum(s.memory_limit or 0 for s in samples),
        tasks_executed=sum(g.tasks_executed for g in groups),
        tasks_erred=sum(g.tasks_erred for g in groups),
        compute_seconds=sum(g.durations.get("compute", 0.0) for g in groups),
        bytes_processed=sum(g.nbytes_total for g in groups),
    )
    missing = list(ALWAYS_MISSING)
    counter = _int(scheduler.get("transition_counter")) or 0
    if counter > log.entries:
        missing.append(
            f"transitions before the last {log.entries:,} of {counter:,} (the scheduler's "
            "log is bounded): task counts cover those it kept"
        )
    records: list[Record] = [*groups, *prefixes_of(cluster_id, groups), *samples]
    records += _errors(cluster_id, tasks, log, last_seen)
    if executions:
        records += encode_segment(cluster_id, 0, executions)
    mark_imported(
        cluster,
        file=file,
        format=f"dump_cluster_state ({format})",
        imported_at=imported_at,
        missing=missing,
        held={
            "scheduler_tasks": len(tasks),
            "executions": len(executions),
            "workers": len(samples),
        },
    )
    return Imported(cluster, records)
