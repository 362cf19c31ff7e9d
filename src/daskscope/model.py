"""The records daskscope keeps: one dataclass per kind, the contract between layers.

(Over 400 lines: every record kind with its fields' shapes, the one contract between the
layers and the wire, kept in one place so that it is read, and changed, together.)

The collector produces these, sinks carry them, the store keeps them and the analysis
reads them back. Every record has a stable ``id`` (see :func:`stable_id`) so that writing
the same record twice stores it once, and a ``revision`` (see :func:`stamp_revisions`)
so that a stored row only ever moves forward: an older copy delivered later changes
nothing. Times are UTC epoch seconds (floats); sizes are bytes; durations are seconds.

Each field declares its shape with :func:`daskscope.shape.col`: the column that stores it
and what the wire accepts. Nothing here imports SQLAlchemy: the recorder imports this
module in the scheduler.
"""

# col() returns a dataclasses.field(), which ruff cannot see through
# ruff: noqa: RUF009

from __future__ import annotations

import dataclasses
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

from daskscope.shape import Column, col

__all__ = [
    "RECORD_TYPES",
    "ClusterRecord",
    "ComputationRecord",
    "ErrorRecord",
    "EventRecord",
    "FineMetricIntervalRecord",
    "ProfileRecord",
    "Record",
    "SpanMetricRecord",
    "SpanRecord",
    "TaskGroupRecord",
    "TaskPrefixRecord",
    "TaskSegmentRecord",
    "WorkerSampleRecord",
    "WorkflowChunkRecord",
    "WorkflowRunRecord",
    "next_revision",
    "record_from_dict",
    "record_to_dict",
    "stable_id",
    "stamp_revisions",
]

_NAMESPACE = uuid.UUID("6f1c2a8e-5d0b-4c39-9a51-2f7d3b9e8c41")


def stable_id(*parts: object) -> str:
    """A deterministic id from the natural key of a record (uuid5 of its parts)."""
    name = "\x1f".join(str(p) for p in parts)
    if not name.isascii():
        # a lone surrogate (Dask allows them in keys) has no UTF-8 form: spell it
        # \udXXX; any other text keeps the id it always had
        name = name.encode("utf-8", "backslashreplace").decode("utf-8")
    return str(uuid.uuid5(_NAMESPACE, name))


def _id() -> Any:
    # stable_id() strings: uuid5, so a batch written twice is stored once
    return col(Column.STRING, primary_key=True)


def _ref() -> Any:
    # the id of another record; a cluster's records may arrive before the cluster
    return col(Column.STRING, short=True)


def _ref_or_none() -> Any:
    return col(Column.STRING, short=True, default=None)


def _revision() -> Any:
    # when the record was handed to delivery (stamp_revisions); a stored row only moves
    # to a higher one. 0: not numbered (a writer of old), which replaces as before.
    # NULL in rows stored before revisions were kept (migration 0012)
    return col(Column.BIGINT, nonnegative=True, nullable=True, default=0)


@dataclass(slots=True, kw_only=True)
class ClusterRecord:
    """One Dask cluster (one scheduler lifetime), with running totals."""

    KIND: ClassVar[str] = "cluster"
    id: str = _id()
    name: str = col(Column.STRING)
    account: str = col(Column.STRING, short=True)
    user: str = col(Column.STRING, short=True)
    scheduler_address: str = col(Column.STRING)
    dask_version: str = col(Column.STRING)
    distributed_version: str = col(Column.STRING)
    python_version: str = col(Column.STRING)
    started_at: float = col(Column.TIME)
    stopped_at: float | None = col(Column.TIME, default=None)
    last_seen_at: float = col(Column.TIME)
    workers_peak: int = col(Column.INTEGER, nonnegative=True, default=0)
    threads_peak: int = col(Column.INTEGER, nonnegative=True, default=0)
    memory_limit_peak: int = col(Column.BIGINT, nonnegative=True, default=0)
    #: ∫ total threads dt over the cluster's life: thread-seconds available
    core_seconds: float = col(Column.DOUBLE, nonnegative=True, default=0.0)
    #: ∫ total worker memory limit dt: byte-seconds reserved
    memory_limit_byte_seconds: float = col(Column.DOUBLE, nonnegative=True, default=0.0)
    #: processing→memory transitions
    tasks_executed: int = col(Column.BIGINT, nonnegative=True, default=0)
    #: processing→erred transitions
    tasks_erred: int = col(Column.BIGINT, nonnegative=True, default=0)
    #: Σ compute durations of tasks (thread-seconds busy)
    compute_seconds: float = col(Column.DOUBLE, nonnegative=True, default=0.0)
    #: Σ output sizes (nbytes) of tasks
    bytes_processed: int = col(Column.BIGINT, default=0)
    #: None for a recorded cluster; for one made from a file by ``daskscope import``:
    #: ``{"file", "format", "imported_at", "missing": [what the file could not hold]}``
    imported: dict[str, Any] | None = col(Column.JSON, default=None)
    revision: int = _revision()


@dataclass(slots=True, kw_only=True)
class ComputationRecord:
    """One compute/persist/submit batch as Dask's scheduler groups them."""

    KIND: ClassVar[str] = "computation"
    id: str = _id()
    cluster_id: str = _ref()
    started_at: float = col(Column.TIME)
    stopped_at: float | None = col(Column.TIME, default=None)
    code: list[str] = col(Column.JSON, default_factory=list)
    annotations: dict[str, Any] = col(Column.JSON, default_factory=dict)
    tasks_executed: int = col(Column.BIGINT, nonnegative=True, default=0)
    tasks_erred: int = col(Column.BIGINT, nonnegative=True, default=0)
    group_count: int = col(Column.INTEGER, nonnegative=True, default=0)
    revision: int = _revision()


@dataclass(slots=True, kw_only=True)
class TaskGroupRecord:
    """One Dask TaskGroup (one name, one lifetime) with its final numbers."""

    KIND: ClassVar[str] = "task_group"
    id: str = _id()
    cluster_id: str = _ref()
    name: str = col(Column.STRING)
    prefix: str = col(Column.STRING)
    computation_id: str | None = _ref_or_none()
    span_id: str | None = _ref_or_none()
    #: names of the groups this one depends on (edges dependency -> this group)
    dependencies: list[str] = col(Column.JSON, default_factory=list)
    #: task counts by scheduler state at its last record: when it finished (or at a
    #: progress write, an explicit flush or the close while Dask held it); a group Dask
    #: forgot keeps those (written once finished, not again as its tasks move on)
    states: dict[str, int] = col(Column.JSON, default_factory=dict)
    tasks_total: int = col(Column.BIGINT, nonnegative=True, default=0)
    tasks_executed: int = col(Column.BIGINT, nonnegative=True, default=0)
    tasks_erred: int = col(Column.BIGINT, nonnegative=True, default=0)
    nbytes_total: int = col(Column.BIGINT, nonnegative=True, default=0)
    duration_s: float = col(Column.DOUBLE, nonnegative=True, default=0.0)
    #: seconds by activity: compute, transfer, disk-read, disk-write, deserialize, ...
    durations: dict[str, float] = col(Column.JSON, default_factory=dict)
    types: list[str] = col(Column.JSON, default_factory=list)
    started_at: float | None = col(Column.TIME, default=None)
    stopped_at: float | None = col(Column.TIME, default=None)
    revision: int = _revision()


@dataclass(slots=True, kw_only=True)
class TaskPrefixRecord:
    """Totals for one task prefix across the whole cluster."""

    KIND: ClassVar[str] = "task_prefix"
    id: str = _id()
    cluster_id: str = _ref()
    name: str = col(Column.STRING)
    group_count: int = col(Column.INTEGER, nonnegative=True, default=0)
    tasks_executed: int = col(Column.BIGINT, nonnegative=True, default=0)
    tasks_erred: int = col(Column.BIGINT, nonnegative=True, default=0)
    nbytes_total: int = col(Column.BIGINT, nonnegative=True, default=0)
    duration_s: float = col(Column.DOUBLE, nonnegative=True, default=0.0)
    durations: dict[str, float] = col(Column.JSON, default_factory=dict)
    revision: int = _revision()


@dataclass(slots=True, kw_only=True)
class SpanRecord:
    """One ``distributed.span``; state, bytes and durations cover the span's subtree."""

    KIND: ClassVar[str] = "span"
    id: str = _id()
    cluster_id: str = _ref()
    span_id: str = _ref()
    parent_span_id: str | None = _ref_or_none()
    name: list[str] = col(Column.JSON)
    enqueued_at: float = col(Column.TIME)
    started_at: float | None = col(Column.TIME, default=None)
    stopped_at: float | None = col(Column.TIME, default=None)
    done: bool = col(Column.BOOLEAN, default=False)
    states: dict[str, int] = col(Column.JSON, default_factory=dict)
    nbytes_total: int = col(Column.BIGINT, nonnegative=True, default=0)
    duration_s: float = col(Column.DOUBLE, nonnegative=True, default=0.0)
    durations: dict[str, float] = col(Column.JSON, default_factory=dict)
    active_cpu_seconds: float = col(Column.DOUBLE, nonnegative=True, default=0.0)
    code: list[str] = col(Column.JSON, default_factory=list)
    group_count: int = col(Column.INTEGER, nonnegative=True, default=0)
    revision: int = _revision()


@dataclass(slots=True, kw_only=True)
class SpanMetricRecord:
    """One fine performance metric of one span, *exclusive* of its child spans.

    Dask's key ``(context, prefix, activity, unit)`` is kept as four columns; keys of
    another shape keep their first and last two parts and join the middle into prefix.
    """

    KIND: ClassVar[str] = "span_metric"
    id: str = _id()
    cluster_id: str = _ref()
    span_id: str = _ref()
    context: str = col(Column.STRING)
    prefix: str = col(Column.STRING)
    activity: str = col(Column.STRING)
    unit: str = col(Column.STRING)
    value: float = col(Column.DOUBLE)
    revision: int = _revision()


@dataclass(slots=True, kw_only=True)
class FineMetricIntervalRecord:
    """How much of one fine metric the cluster's spans gained between two flushes.

    Summed over the spans and task prefixes: one row per ``(context, activity, unit)``
    that moved in the interval ``[started_at, stopped_at)``. A cluster's intervals are
    contiguous (each starts where the previous one with rows stopped), values are never
    negative, and their sum over every interval is the sum of its span metrics.
    """

    KIND: ClassVar[str] = "fine_metric_interval"
    id: str = _id()
    cluster_id: str = _ref()
    started_at: float = col(Column.TIME)
    stopped_at: float = col(Column.TIME)
    context: str = col(Column.STRING)
    activity: str = col(Column.STRING)
    unit: str = col(Column.STRING)
    value: float = col(Column.DOUBLE, nonnegative=True)
    revision: int = _revision()


@dataclass(slots=True, kw_only=True)
class WorkerSampleRecord:
    """One worker's resources at one moment.

    Memory is Dask's own split (``WorkerState.memory``): ``memory`` (the process RSS)
    = ``managed_bytes`` + ``unmanaged_bytes``, and ``unmanaged_bytes`` =
    ``unmanaged_old_bytes`` + ``unmanaged_recent_bytes``; ``spilled_bytes`` is on disk,
    outside the process. ``metrics`` holds every numeric leaf of the worker's heartbeat
    metrics (GPU, custom worker metrics, ...) flattened to dotted names.
    """

    KIND: ClassVar[str] = "worker_sample"
    id: str = _id()
    cluster_id: str = _ref()
    worker: str = col(Column.STRING)
    sampled_at: float = col(Column.TIME)
    nthreads: int = col(Column.INTEGER, nonnegative=True)
    memory_limit: int | None = col(Column.BIGINT, nonnegative=True, default=None)
    memory: int | None = col(Column.BIGINT, nonnegative=True, default=None)
    managed_bytes: int | None = col(Column.BIGINT, nonnegative=True, default=None)
    unmanaged_bytes: int | None = col(Column.BIGINT, nonnegative=True, default=None)
    unmanaged_old_bytes: int | None = col(Column.BIGINT, nonnegative=True, default=None)
    unmanaged_recent_bytes: int | None = col(Column.BIGINT, nonnegative=True, default=None)
    spilled_bytes: int | None = col(Column.BIGINT, nonnegative=True, default=None)
    cpu_percent: float | None = col(Column.DOUBLE, default=None)
    executing: int = col(Column.INTEGER, nonnegative=True, default=0)
    processing: int = col(Column.INTEGER, nonnegative=True, default=0)
    transfer_incoming_bytes: int | None = col(Column.BIGINT, nonnegative=True, default=None)
    transfer_outgoing_bytes: int | None = col(Column.BIGINT, nonnegative=True, default=None)
    net_read_bps: float | None = col(Column.DOUBLE, default=None)
    net_write_bps: float | None = col(Column.DOUBLE, default=None)
    disk_read_bps: float | None = col(Column.DOUBLE, default=None)
    disk_write_bps: float | None = col(Column.DOUBLE, default=None)
    #: every numeric leaf of ``WorkerState.metrics``, e.g. ``{"gpu.utilization": 37.0}``;
    #: NULL in samples stored before revision 0004 (their other metrics were not kept)
    metrics: dict[str, float] = col(Column.JSON, nullable=True, default_factory=dict)
    revision: int = _revision()


@dataclass(slots=True, kw_only=True)
class EventRecord:
    """A lifecycle event: cluster started/restarted/closed, worker added/removed."""

    KIND: ClassVar[str] = "event"
    id: str = _id()
    cluster_id: str = _ref()
    at: float = col(Column.TIME)
    kind: str = col(Column.STRING)
    worker: str | None = col(Column.STRING, default=None)
    detail: dict[str, Any] = col(Column.JSON, default_factory=dict)
    revision: int = _revision()


@dataclass(slots=True, kw_only=True)
class ErrorRecord:
    """A task that failed (processing→erred)."""

    KIND: ClassVar[str] = "error"
    id: str = _id()
    cluster_id: str = _ref()
    key: str = col(Column.TEXT)
    at: float = col(Column.TIME)
    group: str = col(Column.STRING)
    prefix: str = col(Column.STRING)
    group_id: str | None = _ref_or_none()
    worker: str | None = col(Column.STRING, default=None)
    exception: str = col(Column.TEXT, default="")
    traceback: str = col(Column.TEXT, default="")
    revision: int = _revision()


@dataclass(slots=True, kw_only=True)
class ProfileRecord:
    """The merged statistical profile of all workers over one time window."""

    KIND: ClassVar[str] = "profile"
    id: str = _id()
    cluster_id: str = _ref()
    started_at: float = col(Column.TIME)
    stopped_at: float = col(Column.TIME)
    samples: int = col(Column.BIGINT, nonnegative=True)
    tree: dict[str, Any] = col(Column.JSON)
    revision: int = _revision()


@dataclass(slots=True, kw_only=True)
class WorkflowRunRecord:
    """One ``MetricsCollector`` run: its workflow metrics and where it ran.

    ``cluster_id`` is the recorded cluster's (None when no recorder was attached);
    ``computation_ids`` are ids of computation records of that cluster.
    """

    KIND: ClassVar[str] = "workflow_run"
    id: str = _id()
    cluster_id: str | None = _ref_or_none()
    name: str = col(Column.STRING)
    backend: str = col(Column.STRING)
    started_at: float = col(Column.TIME)
    stopped_at: float = col(Column.TIME)
    wall_time_s: float = col(Column.DOUBLE, nonnegative=True)
    span_id: str | None = _ref_or_none()
    computation_ids: list[str] = col(Column.JSON, default_factory=list)
    chunk_count: int = col(Column.INTEGER, nonnegative=True, default=0)
    metrics: dict[str, Any] = col(Column.JSON, default_factory=dict)
    sections: dict[str, Any] = col(Column.JSON, default_factory=dict)
    coffea_report: dict[str, Any] | None = col(Column.JSON, default=None)
    info: dict[str, Any] = col(Column.JSON, default_factory=dict)
    #: who ran it (config's account and user; a server replaces them with the token's);
    #: None only for runs stored before owners were kept
    account: str | None = col(Column.STRING, short=True, default=None)
    user: str | None = col(Column.STRING, short=True, default=None)
    revision: int = _revision()


@dataclass(slots=True, kw_only=True)
class WorkflowChunkRecord:
    """One chunk of a workflow run, as ``@track_metrics`` measured it."""

    KIND: ClassVar[str] = "workflow_chunk"
    id: str = _id()
    run_id: str = _ref()
    cluster_id: str | None = _ref_or_none()
    chunk_index: int = col(Column.INTEGER, nonnegative=True)
    started_at: float | None = col(Column.TIME, default=None)
    stopped_at: float | None = col(Column.TIME, default=None)
    dataset: str | None = col(Column.STRING, default=None)
    filename: str | None = col(Column.TEXT, default=None)
    entry_start: int | None = col(Column.BIGINT, default=None)
    entry_stop: int | None = col(Column.BIGINT, default=None)
    events: int | None = col(Column.BIGINT, nonnegative=True, default=None)
    bytes_read: int | None = col(Column.BIGINT, nonnegative=True, default=None)
    wall_s: float | None = col(Column.DOUBLE, nonnegative=True, default=None)
    cpu_s: float | None = col(Column.DOUBLE, nonnegative=True, default=None)
    memory_before_bytes: int | None = col(Column.BIGINT, nonnegative=True, default=None)
    memory_after_bytes: int | None = col(Column.BIGINT, nonnegative=True, default=None)
    memory_peak_bytes: int | None = col(Column.BIGINT, nonnegative=True, default=None)
    worker: str | None = col(Column.STRING, default=None)
    task_key: str | None = col(Column.TEXT, default=None)
    #: sections, custom fields and anything else the chunk carried
    detail: dict[str, Any] = col(Column.JSON, default_factory=dict)
    revision: int = _revision()


@dataclass(slots=True, kw_only=True)
class TaskSegmentRecord:
    """A run of task executions of one cluster, encoded column-wise in ``payload``
    (``format`` names the encoding: ``daskscope.store.segments`` reads it).

    Segments are numbered from 0 in the order the recorder sealed them; the id is the
    cluster and the number, so a segment sent twice is stored once. ``first_start`` and
    ``last_stop`` bound its executions in time, ``groups`` names the task groups in it,
    ``summary`` holds its busy time per worker thread in coarse bins and ``key_filter``
    a filter of its keys: what lets a query skip segments without decoding them.
    """

    KIND: ClassVar[str] = "task_segment"
    id: str = _id()
    cluster_id: str = _ref()
    segment: int = col(Column.INTEGER, nonnegative=True)
    first_start: float = col(Column.TIME)
    last_stop: float = col(Column.TIME)
    executions: int = col(Column.BIGINT, nonnegative=True)
    format: str = col(Column.STRING)
    payload: bytes = col(Column.BYTES)
    groups: list[str] = col(Column.JSON, default_factory=list)
    summary: bytes = col(Column.BYTES, default=b"")
    key_filter: bytes = col(Column.BYTES, default=b"")
    revision: int = _revision()


Record = (
    ClusterRecord
    | ComputationRecord
    | TaskGroupRecord
    | TaskPrefixRecord
    | SpanRecord
    | SpanMetricRecord
    | FineMetricIntervalRecord
    | WorkerSampleRecord
    | EventRecord
    | ErrorRecord
    | ProfileRecord
    | WorkflowRunRecord
    | WorkflowChunkRecord
    | TaskSegmentRecord
)

RECORD_TYPES: dict[str, type] = {
    cls.KIND: cls
    for cls in (
        ClusterRecord,
        ComputationRecord,
        TaskGroupRecord,
        TaskPrefixRecord,
        SpanRecord,
        SpanMetricRecord,
        FineMetricIntervalRecord,
        WorkerSampleRecord,
        EventRecord,
        ErrorRecord,
        ProfileRecord,
        WorkflowRunRecord,
        WorkflowChunkRecord,
        TaskSegmentRecord,
    )
}

_FIELDS: dict[type, tuple[str, ...]] = {
    cls: tuple(f.name for f in dataclasses.fields(cls)) for cls in RECORD_TYPES.values()
}


_revision_lock = threading.Lock()
_last_revision = 0


def next_revision() -> int:
    """A number larger than any this process gave before: the clock in nanoseconds,
    or one more than the last when the clock stood still or went back. Across processes
    it follows the clock, which orders the writers of one record well enough: a record
    has one writer (a cluster's recorder, a run's collector)."""
    global _last_revision
    with _revision_lock:
        _last_revision = max(time.time_ns(), _last_revision + 1)
        return _last_revision


def stamp_revisions(records: Iterable[Record]) -> int:
    """Number ``records`` as the newest state of their rows, as a sink takes them: a
    store or server keeps a row's highest revision and ignores what is older (an old
    batch delivered late, a replay). Returns the revision."""
    revision = next_revision()
    for record in records:
        record.revision = revision
    return revision


def record_to_dict(record: Record) -> dict[str, Any]:
    """The record's fields as a plain dict (shallow: values are shared, not copied)."""
    return {name: getattr(record, name) for name in _FIELDS[type(record)]}


def record_from_dict(kind: str, data: dict[str, Any]) -> Record:
    """Rebuild a record of ``kind`` from :func:`record_to_dict` output."""
    try:
        cls = RECORD_TYPES[kind]
    except KeyError:
        raise ValueError(f"unknown record kind {kind!r}; known: {sorted(RECORD_TYPES)}") from None
    record: Record = cls(**data)
    return record


def group_by_kind(records: Iterable[Record]) -> Iterator[tuple[type, list[Record]]]:
    """Records grouped by their type, in first-seen order."""
    groups: dict[type, list[Record]] = {}
    for record in records:
        groups.setdefault(type(record), []).append(record)
    yield from groups.items()
