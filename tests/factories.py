"""Valid records of every kind for tests: sensible defaults, any field overridden.

>>> cluster = make_cluster("analysis", account="cms")
>>> group = make_group(cluster, name="inc-1", tasks_executed=3)
>>> run = make_workflow_run(cluster)
>>> chunk = make_workflow_chunk(run, 0, events=1000)

A record that belongs to a cluster takes the cluster (or just its id); its times start
at the cluster's start (``T0`` for a bare id). Ids are :func:`stable_id` of what tells
records of a kind apart, so building the same record twice gives the same id.
:func:`recorded_cluster` is one whole cluster as a recorder writes it: a record of every
kind but the workflow's, several of some, with the numbers the store's tests check.
"""

from __future__ import annotations

from typing import Any

from daskscope import model
from daskscope.model import (
    ClusterRecord,
    ComputationRecord,
    ErrorRecord,
    EventRecord,
    FineMetricIntervalRecord,
    ProfileRecord,
    SpanMetricRecord,
    SpanRecord,
    TaskGroupRecord,
    TaskPrefixRecord,
    TaskSegmentRecord,
    WorkerSampleRecord,
    WorkflowChunkRecord,
    WorkflowRunRecord,
    stable_id,
)

__all__ = [
    "GIB",
    "T0",
    "make_cluster",
    "make_computation",
    "make_error",
    "make_event",
    "make_group",
    "make_prefix",
    "make_profile",
    "make_span",
    "make_span_metric",
    "make_task_segment",
    "make_worker_sample",
    "make_workflow_chunk",
    "make_workflow_run",
    "one_of_each_kind",
    "recorded_cluster",
]

T0 = 1_767_225_600.123456  # 2026-01-01T00:00:00.123456Z: sub-second detail must survive
GIB = 2**30

Cluster = ClusterRecord | str


def _cid(cluster: Cluster) -> str:
    return cluster if isinstance(cluster, str) else cluster.id


def _start(cluster: Cluster) -> float:
    return T0 if isinstance(cluster, str) else cluster.started_at


def _with_id(values: dict[str, Any], over: dict[str, Any], *key: object) -> dict[str, Any]:
    """``values`` with ``over`` applied and, unless given, an id made of ``key``."""
    values.update(over)
    values.setdefault("id", stable_id(*key))
    return values


def make_cluster(name: str = "analysis", *, start: float = T0, **over: Any) -> ClusterRecord:
    """A cluster of 4 workers of 4 threads that ran an hour from ``start``."""
    address = over.get("scheduler_address", "tcp://10.0.0.5:8786")
    values: dict[str, Any] = dict(
        name=name,
        account="atlas",
        user="alice",
        scheduler_address=address,
        dask_version="2026.8.0",
        distributed_version="2026.8.0",
        python_version="3.11.9",
        started_at=start,
        stopped_at=start + 3600.5,
        last_seen_at=start + 3600.5,
        workers_peak=4,
        threads_peak=16,
        memory_limit_peak=4 * 16 * GIB,
        core_seconds=16 * 3600.5,
        memory_limit_byte_seconds=4 * 16 * GIB * 3600.5,
        tasks_executed=123_456,
        tasks_erred=2,
        compute_seconds=40_000.25,
        bytes_processed=5 * 2**40,  # 5 TiB: far beyond 32-bit integers
    )
    return ClusterRecord(**_with_id(values, over, "cluster", address, start))


def make_computation(
    cluster: Cluster = "cluster-1", index: int = 0, **over: Any
) -> ComputationRecord:
    cid, t = _cid(cluster), _start(cluster)
    values: dict[str, Any] = dict(cluster_id=cid, started_at=t + 1.5)
    return ComputationRecord(**_with_id(values, over, cid, "computation", index))


def make_group(cluster: Cluster = "cluster-1", name: str = "inc-1", **over: Any) -> TaskGroupRecord:
    """A task group; its prefix is its name up to the last ``-``."""
    cid = _cid(cluster)
    values: dict[str, Any] = dict(cluster_id=cid, name=name, prefix=name.rsplit("-", 1)[0])
    return TaskGroupRecord(**_with_id(values, over, cid, "group", name))


def make_prefix(cluster: Cluster = "cluster-1", name: str = "inc", **over: Any) -> TaskPrefixRecord:
    cid = _cid(cluster)
    values: dict[str, Any] = dict(cluster_id=cid, name=name)
    return TaskPrefixRecord(**_with_id(values, over, cid, "prefix", name))


def make_span(cluster: Cluster = "cluster-1", span_id: str = "span-1", **over: Any) -> SpanRecord:
    cid = _cid(cluster)
    values: dict[str, Any] = dict(
        cluster_id=cid, span_id=span_id, name=["default"], enqueued_at=_start(cluster) + 1.0
    )
    return SpanRecord(**_with_id(values, over, cid, "span", span_id))


def make_span_metric(
    cluster: Cluster = "cluster-1",
    span_id: str = "span-1",
    prefix: str = "inc",
    activity: str = "thread-cpu",
    unit: str = "seconds",
    value: float = 0.25,
    **over: Any,
) -> SpanMetricRecord:
    """One fine metric ``(execute, prefix, activity, unit)`` of a span."""
    cid = _cid(cluster)
    context = over.pop("context", "execute")
    values: dict[str, Any] = dict(
        cluster_id=cid,
        span_id=span_id,
        context=context,
        prefix=prefix,
        activity=activity,
        unit=unit,
        value=value,
    )
    return SpanMetricRecord(
        **_with_id(values, over, cid, "metric", span_id, context, prefix, activity, unit)
    )


def make_fine_metric_interval(
    cluster: Cluster = "cluster-1",
    start: float | None = None,
    seconds: float = 60.0,
    activity: str = "thread-cpu",
    value: float = 1.5,
    **over: Any,
) -> FineMetricIntervalRecord:
    """What ``(execute, activity, seconds)`` gained in one flush interval, from the
    cluster's start unless ``start`` is given."""
    cid = _cid(cluster)
    start = _start(cluster) if start is None else start
    context, unit = over.pop("context", "execute"), over.pop("unit", "seconds")
    values: dict[str, Any] = dict(
        cluster_id=cid,
        started_at=start,
        stopped_at=start + seconds,
        context=context,
        activity=activity,
        unit=unit,
        value=value,
    )
    return FineMetricIntervalRecord(
        **_with_id(values, over, cid, "fine-interval", start + seconds, context, activity, unit)
    )


def make_worker_sample(
    cluster: Cluster = "cluster-1",
    worker: str = "tcp://10.0.0.6:40001",
    at: float | None = None,
    **over: Any,
) -> WorkerSampleRecord:
    """A sample of a 4-thread worker, at the cluster's start unless ``at`` is given."""
    cid = _cid(cluster)
    at = _start(cluster) if at is None else at
    values: dict[str, Any] = dict(cluster_id=cid, worker=worker, sampled_at=at, nthreads=4)
    return WorkerSampleRecord(**_with_id(values, over, cid, "sample", worker, at))


def make_event(
    cluster: Cluster = "cluster-1",
    kind: str = "worker-added",
    at: float | None = None,
    worker: str | None = None,
    **over: Any,
) -> EventRecord:
    cid = _cid(cluster)
    at = _start(cluster) if at is None else at
    values: dict[str, Any] = dict(cluster_id=cid, at=at, kind=kind, worker=worker)
    return EventRecord(**_with_id(values, over, cid, "event", kind, worker, at))


def make_error(
    cluster: Cluster = "cluster-1", key: str = "('inc-1', 0)", **over: Any
) -> ErrorRecord:
    """A failed task of group ``inc-1`` (its group and prefix follow ``group``)."""
    cid = _cid(cluster)
    group = over.pop("group", "inc-1")
    values: dict[str, Any] = dict(
        cluster_id=cid,
        key=key,
        at=_start(cluster) + 30.0,
        group=group,
        prefix=group.rsplit("-", 1)[0],
        exception="ZeroDivisionError('division by zero')",
    )
    return ErrorRecord(**_with_id(values, over, cid, "error", key))


def make_profile(
    cluster: Cluster = "cluster-1", start: float | None = None, **over: Any
) -> ProfileRecord:
    """A minute of profile from ``start`` (the cluster's start): one frame under the root."""
    cid = _cid(cluster)
    start = _start(cluster) if start is None else start
    values: dict[str, Any] = dict(
        cluster_id=cid,
        started_at=start,
        stopped_at=start + 60.0,
        samples=500,
        tree=_profile_tree(),
    )
    return ProfileRecord(**_with_id(values, over, cid, "profile", start))


def _profile_tree() -> dict[str, Any]:
    return {
        "identifier": "root",
        "count": 500,
        "description": {"filename": "", "name": "", "line_number": 0, "line": ""},
        "children": {
            "kernel;analysis.py;12": {
                "identifier": "kernel;analysis.py;12",
                "count": 480,
                "description": {
                    "filename": "analysis.py",
                    "name": "kernel",
                    "line_number": 12,
                    "line": "return a / b",
                },
                "children": {},
            }
        },
    }


def make_workflow_run(cluster: Cluster | None = "cluster-1", **over: Any) -> WorkflowRunRecord:
    """A ten-second run named ``analysis`` on ``cluster`` (None: no recorded cluster)."""
    cid = None if cluster is None else _cid(cluster)
    start = T0 if cluster is None else _start(cluster)
    values: dict[str, Any] = dict(
        cluster_id=cid,
        name="analysis",
        backend="dask",
        started_at=start,
        stopped_at=start + 10,
        wall_time_s=10.0,
        chunk_count=1,
    )
    return WorkflowRunRecord(**_with_id(values, over, "run", cid))


def make_workflow_chunk(
    run: WorkflowRunRecord | str = "run-1", index: int = 0, **over: Any
) -> WorkflowChunkRecord:
    """Chunk ``index`` of ``run``, on the run's cluster unless ``cluster_id`` is given."""
    run_id = run if isinstance(run, str) else run.id
    cluster_id = over.pop("cluster_id", None if isinstance(run, str) else run.cluster_id)
    values: dict[str, Any] = dict(run_id=run_id, cluster_id=cluster_id, chunk_index=index)
    return WorkflowChunkRecord(**_with_id(values, over, run_id, "chunk", index, cluster_id))


def recorded_cluster(cluster: ClusterRecord) -> list[model.Record]:
    """``cluster`` and what a recorder writes for it (every kind but the workflow's):
    a computation of two groups (one with failed tasks) in one span, their prefixes, fine
    metrics, two workers sampled three times, events, errors and three profiles."""
    t = cluster.started_at
    comp = make_computation(
        cluster,
        stopped_at=t + 61.25,
        code=["import dask.array as da\nx = da.random.random((10_000, 10_000))\nx.sum().compute()"],
        annotations={"retries": 2, "span": {"name": [["load"], ["reduce"]]}},
        tasks_executed=1_100,
        tasks_erred=2,
        group_count=2,
    )
    span_id = "b6c9e2f0-0c4a-4cf5-9f7e-7f0e2c1d9a11"
    groups = [
        make_group(
            cluster,
            name,
            prefix=prefix,
            computation_id=comp.id,
            span_id=span_id,
            dependencies=deps,
            states={"memory": n, "erred": erred, "released": 0},
            tasks_total=n,
            tasks_executed=n - erred,
            tasks_erred=erred,
            nbytes_total=n * 80 * 2**20,
            duration_s=n * 0.05,
            durations={"compute": n * 0.045, "transfer": n * 0.005, "deserialize": 0.0},
            types=["numpy.ndarray"],
            started_at=t + 2.0 + i,
            stopped_at=t + 60.0,
        )
        for i, (name, prefix, deps, n, erred) in enumerate(
            [
                ("random_sample-5d7e", "random_sample", [], 1_000, 0),
                ("sum-aggregate-9f1a", "sum-aggregate", ["random_sample-5d7e"], 100, 2),
            ]
        )
    ]
    prefixes = [
        make_prefix(
            cluster,
            g.prefix,
            group_count=1,
            tasks_executed=g.tasks_executed,
            tasks_erred=g.tasks_erred,
            nbytes_total=g.nbytes_total,
            duration_s=g.duration_s,
            durations=dict(g.durations),
        )
        for g in groups
    ]
    span = make_span(
        cluster,
        span_id,
        started_at=t + 2.0,
        stopped_at=t + 60.0,
        done=True,
        states={"memory": 1_098, "erred": 2},
        nbytes_total=sum(g.nbytes_total for g in groups),
        duration_s=55.0,
        durations={"compute": 49.5, "transfer": 5.5},
        active_cpu_seconds=49.75,
        code=["x.sum().compute()"],
        group_count=2,
    )
    metrics = [
        make_span_metric(cluster, span_id, prefix, activity, unit, value)
        for prefix, activity, unit, value in [
            ("random_sample", "thread-cpu", "seconds", 44.125),
            ("random_sample", "thread-noncpu", "seconds", 0.875),
            ("random_sample", "memory-read", "bytes", 3.0 * 2**33),
            ("N/A", "idle or other spans", "seconds", 12.5),
        ]
    ]
    samples = [
        make_worker_sample(
            cluster,
            worker,
            t + k * 5.0,
            memory_limit=16 * GIB,
            memory=(k + w) * GIB + 12_345,
            managed_bytes=k * GIB,
            spilled_bytes=None if k == 0 else 0,
            cpu_percent=[0.0, 395.5, 12.25][k],
            executing=[0, 4, 1][k],
            processing=[0, 12, 3][k],
            transfer_incoming_bytes=0,
            transfer_outgoing_bytes=k * 2**20,
            net_read_bps=1.5e6 * k,
            net_write_bps=None,
            disk_read_bps=0.0,
            disk_write_bps=2.5e7,
        )
        for w, worker in enumerate(["tcp://10.0.0.6:40001", "tcp://10.0.0.7:40001"])
        for k in range(3)
    ]
    events = [
        make_event(cluster, kind, at, worker, detail=detail)
        for at, kind, worker, detail in [
            (t, "cluster-started", None, {"address": "tcp://10.0.0.5:8786"}),
            (t + 0.5, "worker-added", "tcp://10.0.0.6:40001", {"nthreads": 4, "limit": 16 * GIB}),
            (t + 3600.5, "cluster-closed", None, {}),
        ]
    ]  # fmt: skip
    errors = [
        make_error(
            cluster,
            key,
            at=t + 30.0 + i,
            group="sum-aggregate-9f1a",
            group_id=groups[1].id,
            worker="tcp://10.0.0.7:40001",
            traceback='  File "analysis.py", line 12, in kernel\n    return a / b\n' * 20,
        )
        for i, key in enumerate(["('sum-aggregate-9f1a', 3)", "('sum-aggregate-9f1a', 7)"])
    ]
    profiles = [make_profile(cluster, t + start, samples=500 + start) for start in (0, 60, 120)]
    return [
        cluster, comp, *groups, *prefixes, span, *metrics, *samples, *events, *errors, *profiles,
    ]  # fmt: skip


def make_task_segment(
    cluster: Cluster = "cluster-1", segment: int = 0, **over: Any
) -> TaskSegmentRecord:
    """Segment ``segment`` of the cluster's task log; its payload is opaque bytes here
    (tests of the task log build real ones with ``daskscope.store.segments``)."""
    cid = _cid(cluster)
    start = _start(cluster) + segment
    values: dict[str, Any] = dict(
        cluster_id=cid,
        segment=segment,
        first_start=start,
        last_stop=start + 1.0,
        executions=3,
        format="opaque",
        payload=bytes(range(256)) + b"\x00 not text",
        groups=["inc-1"],
        summary=b"\x01\x02",
        key_filter=b"",
    )
    return TaskSegmentRecord(**_with_id(values, over, cid, "task_segment", segment))


def one_of_each_kind() -> list[model.Record]:
    """A record of every kind, once each, all of one cluster."""
    cluster = make_cluster()
    run = make_workflow_run(cluster)
    first: dict[type, model.Record] = {}
    records = [
        *recorded_cluster(cluster),
        run,
        make_workflow_chunk(run),
        make_task_segment(cluster),
        make_fine_metric_interval(cluster),
    ]
    for record in records:
        first.setdefault(type(record), record)
    return list(first.values())
