"""The records daskscope keeps: one dataclass per kind, the contract between layers.

The collector produces these, sinks carry them, the store keeps them and the analysis
reads them back. Every record has a stable ``id`` (see :func:`stable_id`) so that writing
the same record twice stores it once. Times are UTC epoch seconds (floats); sizes are
bytes; durations are seconds.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

__all__ = [
    "RECORD_TYPES",
    "ClusterRecord",
    "ComputationRecord",
    "ErrorRecord",
    "EventRecord",
    "ProfileRecord",
    "Record",
    "SpanMetricRecord",
    "SpanRecord",
    "TaskGroupRecord",
    "TaskPrefixRecord",
    "WorkerSampleRecord",
    "WorkflowChunkRecord",
    "WorkflowRunRecord",
    "record_from_dict",
    "record_to_dict",
    "stable_id",
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


@dataclass(slots=True, kw_only=True)
class ClusterRecord:
    """One Dask cluster (one scheduler lifetime), with running totals."""

    KIND: ClassVar[str] = "cluster"
    id: str
    name: str
    account: str
    user: str
    scheduler_address: str
    dask_version: str
    distributed_version: str
    python_version: str
    started_at: float
    stopped_at: float | None = None
    last_seen_at: float
    workers_peak: int = 0
    threads_peak: int = 0
    memory_limit_peak: int = 0
    #: ∫ total threads dt over the cluster's life: thread-seconds available
    core_seconds: float = 0.0
    #: ∫ total worker memory limit dt: byte-seconds reserved
    memory_limit_byte_seconds: float = 0.0
    #: processing→memory transitions
    tasks_executed: int = 0
    #: processing→erred transitions
    tasks_erred: int = 0
    #: Σ compute durations of tasks (thread-seconds busy)
    compute_seconds: float = 0.0
    #: Σ output sizes (nbytes) of tasks
    bytes_processed: int = 0


@dataclass(slots=True, kw_only=True)
class ComputationRecord:
    """One compute/persist/submit batch as Dask's scheduler groups them."""

    KIND: ClassVar[str] = "computation"
    id: str
    cluster_id: str
    started_at: float
    stopped_at: float | None = None
    code: list[str] = field(default_factory=list)
    annotations: dict[str, Any] = field(default_factory=dict)
    tasks_executed: int = 0
    tasks_erred: int = 0
    group_count: int = 0


@dataclass(slots=True, kw_only=True)
class TaskGroupRecord:
    """One Dask TaskGroup (one name, one lifetime) with its final numbers."""

    KIND: ClassVar[str] = "task_group"
    id: str
    cluster_id: str
    name: str
    prefix: str
    computation_id: str | None = None
    span_id: str | None = None
    #: names of the groups this one depends on (edges dependency -> this group)
    dependencies: list[str] = field(default_factory=list)
    #: task counts by current scheduler state when last seen
    states: dict[str, int] = field(default_factory=dict)
    tasks_total: int = 0
    tasks_executed: int = 0
    tasks_erred: int = 0
    nbytes_total: int = 0
    duration_s: float = 0.0
    #: seconds by activity: compute, transfer, disk-read, disk-write, deserialize, ...
    durations: dict[str, float] = field(default_factory=dict)
    types: list[str] = field(default_factory=list)
    started_at: float | None = None
    stopped_at: float | None = None


@dataclass(slots=True, kw_only=True)
class TaskPrefixRecord:
    """Totals for one task prefix across the whole cluster."""

    KIND: ClassVar[str] = "task_prefix"
    id: str
    cluster_id: str
    name: str
    group_count: int = 0
    tasks_executed: int = 0
    tasks_erred: int = 0
    nbytes_total: int = 0
    duration_s: float = 0.0
    durations: dict[str, float] = field(default_factory=dict)


@dataclass(slots=True, kw_only=True)
class SpanRecord:
    """One ``distributed.span``; state, bytes and durations cover the span's subtree."""

    KIND: ClassVar[str] = "span"
    id: str
    cluster_id: str
    span_id: str
    parent_span_id: str | None = None
    name: list[str]
    enqueued_at: float
    started_at: float | None = None
    stopped_at: float | None = None
    done: bool = False
    states: dict[str, int] = field(default_factory=dict)
    nbytes_total: int = 0
    duration_s: float = 0.0
    durations: dict[str, float] = field(default_factory=dict)
    active_cpu_seconds: float = 0.0
    code: list[str] = field(default_factory=list)
    group_count: int = 0


@dataclass(slots=True, kw_only=True)
class SpanMetricRecord:
    """One fine performance metric of one span, *exclusive* of its child spans.

    Dask's key ``(context, prefix, activity, unit)`` is kept as four columns; keys of
    another shape keep their first and last two parts and join the middle into prefix.
    """

    KIND: ClassVar[str] = "span_metric"
    id: str
    cluster_id: str
    span_id: str
    context: str
    prefix: str
    activity: str
    unit: str
    value: float


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
    id: str
    cluster_id: str
    worker: str
    sampled_at: float
    nthreads: int
    memory_limit: int | None = None
    memory: int | None = None
    managed_bytes: int | None = None
    unmanaged_bytes: int | None = None
    unmanaged_old_bytes: int | None = None
    unmanaged_recent_bytes: int | None = None
    spilled_bytes: int | None = None
    cpu_percent: float | None = None
    executing: int = 0
    processing: int = 0
    transfer_incoming_bytes: int | None = None
    transfer_outgoing_bytes: int | None = None
    net_read_bps: float | None = None
    net_write_bps: float | None = None
    disk_read_bps: float | None = None
    disk_write_bps: float | None = None
    #: every numeric leaf of ``WorkerState.metrics``, e.g. ``{"gpu.utilization": 37.0}``
    metrics: dict[str, float] = field(default_factory=dict)


@dataclass(slots=True, kw_only=True)
class EventRecord:
    """A lifecycle event: cluster started/restarted/closed, worker added/removed."""

    KIND: ClassVar[str] = "event"
    id: str
    cluster_id: str
    at: float
    kind: str
    worker: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True, kw_only=True)
class ErrorRecord:
    """A task that failed (processing→erred)."""

    KIND: ClassVar[str] = "error"
    id: str
    cluster_id: str
    key: str
    at: float
    group: str
    prefix: str
    group_id: str | None = None
    worker: str | None = None
    exception: str = ""
    traceback: str = ""


@dataclass(slots=True, kw_only=True)
class ProfileRecord:
    """The merged statistical profile of all workers over one time window."""

    KIND: ClassVar[str] = "profile"
    id: str
    cluster_id: str
    started_at: float
    stopped_at: float
    samples: int
    tree: dict[str, Any]


@dataclass(slots=True, kw_only=True)
class WorkflowRunRecord:
    """One ``MetricsCollector`` run: its workflow metrics and where it ran.

    ``cluster_id`` is the recorded cluster's (None when no recorder was attached);
    ``computation_ids`` are ids of computation records of that cluster.
    """

    KIND: ClassVar[str] = "workflow_run"
    id: str
    cluster_id: str | None = None
    name: str
    backend: str
    started_at: float
    stopped_at: float
    wall_time_s: float
    span_id: str | None = None
    computation_ids: list[str] = field(default_factory=list)
    chunk_count: int = 0
    metrics: dict[str, Any] = field(default_factory=dict)
    sections: dict[str, Any] = field(default_factory=dict)
    coffea_report: dict[str, Any] | None = None
    info: dict[str, Any] = field(default_factory=dict)
    #: who ran it (config's account and user; a server replaces them with the token's)
    account: str | None = None
    user: str | None = None


@dataclass(slots=True, kw_only=True)
class WorkflowChunkRecord:
    """One chunk of a workflow run, as ``@track_metrics`` measured it."""

    KIND: ClassVar[str] = "workflow_chunk"
    id: str
    run_id: str
    cluster_id: str | None = None
    chunk_index: int
    started_at: float | None = None
    stopped_at: float | None = None
    dataset: str | None = None
    filename: str | None = None
    entry_start: int | None = None
    entry_stop: int | None = None
    events: int | None = None
    bytes_read: int | None = None
    wall_s: float | None = None
    cpu_s: float | None = None
    memory_before_bytes: int | None = None
    memory_after_bytes: int | None = None
    memory_peak_bytes: int | None = None
    worker: str | None = None
    task_key: str | None = None
    #: sections, custom fields and anything else the chunk carried
    detail: dict[str, Any] = field(default_factory=dict)


Record = (
    ClusterRecord
    | ComputationRecord
    | TaskGroupRecord
    | TaskPrefixRecord
    | SpanRecord
    | SpanMetricRecord
    | WorkerSampleRecord
    | EventRecord
    | ErrorRecord
    | ProfileRecord
    | WorkflowRunRecord
    | WorkflowChunkRecord
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
        WorkerSampleRecord,
        EventRecord,
        ErrorRecord,
        ProfileRecord,
        WorkflowRunRecord,
        WorkflowChunkRecord,
    )
}

_FIELDS: dict[type, tuple[str, ...]] = {
    cls: tuple(f.name for f in dataclasses.fields(cls)) for cls in RECORD_TYPES.values()
}


def record_to_dict(record: Record) -> dict[str, Any]:
    """The record's fields as a plain dict (shallow: values are shared, not copied)."""
    return {name: getattr(record, name) for name in _FIELDS[type(record)]}


def record_from_dict(kind: str, data: dict[str, Any]) -> Record:
    """Rebuild a record of ``kind`` from :func:`record_to_dict` output."""
    try:
        cls = RECORD_TYPES[kind]
    except KeyError:
        raise ValueError(f"unknown record kind {kind!r}; known: {sorted(RECORD_TYPES)}") from None
    return cls(**data)


def group_by_kind(records: Iterable[Record]) -> Iterator[tuple[type, list[Record]]]:
    """Records grouped by their type, in first-seen order."""
    groups: dict[type, list[Record]] = {}
    for record in records:
        groups.setdefault(type(record), []).append(record)
    yield from groups.items()
