"""One cluster as shown everywhere: ``daskscope show``, its ``--json``, the cluster
page and ``/api/v1/clusters/{id}``.

The view stays small however long the cluster lived: of its task groups a summary,
the longest few and the groups asked for; of its fine metrics their sums.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from daskscope.analysis import elapsed, span_tree
from daskscope.analysis.code import code_frames, code_note
from daskscope.analysis.workers import extra_metrics
from daskscope.catalogue import task_action_colours
from daskscope.format import MISSING, money_text
from daskscope.store import Store
from daskscope.store.analytics import RUNNING_WITHIN
from daskscope.views.costs import computation_costs
from daskscope.views.listing import ClusterStatistics, statistics_of
from daskscope.views.rows import pick

__all__ = [
    "ClusterInfo",
    "ClusterView",
    "CodeFrame",
    "ComputationSummary",
    "Event",
    "FineMetric",
    "GroupBrief",
    "GroupSummary",
    "ProfileWindow",
    "SpanLine",
    "TaskError",
    "TaskGroup",
    "TaskPrefix",
    "WorkerSummary",
    "cluster_view",
    "is_running",
]


@dataclass(frozen=True)
class ClusterInfo:
    """The cluster's record as stored, with ``duration_s`` (start to stop, else to the
    last sign of life)."""

    id: str
    name: str
    account: str
    user: str
    scheduler_address: str
    dask_version: str
    distributed_version: str
    python_version: str
    started_at: float
    stopped_at: float | None
    last_seen_at: float
    duration_s: float | None
    workers_peak: int
    threads_peak: int
    memory_limit_peak: int
    core_seconds: float
    memory_limit_byte_seconds: float
    tasks_executed: int
    tasks_erred: int
    compute_seconds: float
    bytes_processed: int
    #: None: recorded; else made by ``daskscope import`` (file, format, what is missing)
    imported: dict[str, Any] | None


@dataclass(frozen=True)
class TaskPrefix:
    name: str
    group_count: int
    tasks_executed: int
    tasks_erred: int
    nbytes_total: int
    duration_s: float
    durations: dict[str, float]


@dataclass(frozen=True)
class CodeFrame:
    """One frame of a computation's code: ``code[snippet]``, the file and line of the
    call, and that call's line within the snippet (1-based, its header included; None
    when the recorder cut it off)."""

    snippet: int
    filename: str | None
    line: int | None
    call_line: int | None
    call_text: str | None


@dataclass(frozen=True)
class ComputationSummary:
    """A computation, with the names of its first groups (the rest: the paged route)."""

    id: str
    started_at: float
    stopped_at: float | None
    duration_s: float | None
    code: list[str]
    #: the frames of ``code``, innermost (the one that called compute) first
    code_frames: list[CodeFrame]
    #: what to say when there is no code
    code_note: str | None
    annotations: dict[str, Any]
    tasks_executed: int
    tasks_erred: int
    group_count: int
    task_groups: list[str]
    task_groups_total: int
    task_groups_omitted: int
    #: its task groups' summed task time, and its share of the cluster's cost by it
    #: (views.costs.computation_costs; None: the cluster has no price)
    task_seconds: float | None = None
    cost: float | None = None
    cost_text: str = MISSING


@dataclass(frozen=True)
class GroupBrief:
    id: str
    name: str
    prefix: str
    computation_id: str | None
    tasks_total: int
    tasks_executed: int
    tasks_erred: int
    nbytes_total: int
    duration_s: float
    started_at: float | None
    stopped_at: float | None


@dataclass(frozen=True)
class TaskGroup:
    """A task group as stored (the rows of ``task_groups``)."""

    id: str
    name: str
    prefix: str
    computation_id: str | None
    span_id: str | None
    dependencies: list[str]
    states: dict[str, int]
    tasks_total: int
    tasks_executed: int
    tasks_erred: int
    nbytes_total: int
    duration_s: float
    durations: dict[str, float]
    types: list[str]
    started_at: float | None
    stopped_at: float | None


@dataclass(frozen=True)
class GroupSummary:
    """All of the cluster's groups counted and summed; ``top``: the longest few.

    ``shown`` groups are named in ``top`` or in the view's ``task_groups``, ``omitted``
    are not; ``selection`` says how ``task_groups`` were chosen when they are not all."""

    count: int
    tasks_total: int
    tasks_executed: int
    tasks_erred: int
    nbytes_total: int
    duration_s: float
    top: list[GroupBrief]
    top_by: Literal["duration_s"]
    shown: int
    omitted: int
    selection: Literal["longest", "earliest"] | None


@dataclass(frozen=True)
class SpanLine:
    """A span in page order (parents before children, ``depth`` from the root), with its
    subtree's seconds by activity, largest first."""

    span_id: str
    parent_span_id: str | None
    name: list[str]
    depth: int
    enqueued_at: float
    started_at: float | None
    stopped_at: float | None
    duration_s: float | None
    nbytes_total: int
    tasks: int
    group_count: int
    active_cpu_seconds: float
    seconds_by_activity: dict[str, float]


@dataclass(frozen=True)
class FineMetric:
    """A fine metric summed over the cluster's spans."""

    activity: str
    prefix: str
    unit: str
    value: float


@dataclass(frozen=True)
class WorkerSummary:
    """A worker's first and last sample, peak memory, and its last sample's figures;
    ``extra_metrics``: the metrics without a column (None: not recorded)."""

    worker: str
    first_sample_at: float
    last_sample_at: float
    samples: int
    peak_memory: int | None
    nthreads: int
    memory_limit: int | None
    memory: int | None
    managed_bytes: int | None
    unmanaged_bytes: int | None
    spilled_bytes: int | None
    extra_metrics: dict[str, float] | None


@dataclass(frozen=True)
class Event:
    id: str
    at: float
    kind: str
    worker: str | None
    detail: dict[str, Any]


@dataclass(frozen=True)
class TaskError:
    id: str
    key: str
    at: float
    group: str
    prefix: str
    worker: str | None
    exception: str
    traceback: str


@dataclass(frozen=True)
class ProfileWindow:
    id: str
    started_at: float
    stopped_at: float
    samples: int


@dataclass(frozen=True)
class ClusterView:
    """Everything shown about one cluster; ``running``: no stop recorded and seen
    within ``store.analytics.RUNNING_WITHIN`` of when the view was made (as the listing says)."""

    cluster: ClusterInfo
    running: bool
    statistics: ClusterStatistics
    #: by tasks executed, then seconds
    task_prefixes: list[TaskPrefix]
    computations: list[ComputationSummary]
    task_group_summary: GroupSummary
    task_groups: list[TaskGroup]
    spans: list[SpanLine]
    span_tags: list[str]
    #: per unit, largest first
    fine_metrics: list[FineMetric]
    workers: list[WorkerSummary]
    events: list[Event]
    errors: list[TaskError]
    profiles: list[ProfileWindow]
    activity_colours: dict[str, str]


def cluster_view(
    store: Store,
    cluster_id: str,
    *,
    groups: int | None = 0,
    groups_by: Literal["duration", "start"] = "duration",
) -> ClusterView:
    """The view of the cluster with this full id (:class:`~daskscope.store.UnknownCluster`
    if none); ``task_groups`` holds all groups (``groups`` None) or the ``groups``
    longest (``groups_by="duration"``) or earliest (``"start"``)."""
    detail = store.cluster_detail(cluster_id, max_groups=groups, groups_by=groups_by)
    cluster = detail["cluster"]
    summary = detail["task_group_summary"]
    costs = computation_costs(store, cluster)
    prefixes = sorted(
        detail["task_prefixes"], key=lambda p: (-p["tasks_executed"], -p["duration_s"], p["name"])
    )
    return ClusterView(
        cluster=pick(ClusterInfo, cluster),
        running=is_running(cluster["stopped_at"], cluster["last_seen_at"], time.time()),
        statistics=statistics_of(cluster),
        task_prefixes=[pick(TaskPrefix, p) for p in prefixes],
        computations=[_computation(c, costs.get(c["id"])) for c in detail["computations"]],
        task_group_summary=pick(
            GroupSummary, summary, top=[pick(GroupBrief, g) for g in summary["top"]]
        ),
        task_groups=[pick(TaskGroup, g) for g in detail["task_groups"]],
        spans=_span_lines(detail["spans"], detail["span_seconds"]),
        span_tags=sorted({t for sp in detail["spans"] for t in (sp["name"] or [])}),
        fine_metrics=[pick(FineMetric, m) for m in detail["fine_metrics"]],
        workers=[
            pick(WorkerSummary, w, extra_metrics=extra_metrics(w["metrics"]))
            for w in detail["workers"]
        ],
        events=[pick(Event, e) for e in detail["events"]],
        errors=[pick(TaskError, e) for e in detail["errors"]],
        profiles=[pick(ProfileWindow, p) for p in detail["profiles"]],
        activity_colours=task_action_colours(),
    )


def is_running(stopped_at: float | None, last_seen_at: float | None, now: float) -> bool:
    """No stop recorded and seen within ``RUNNING_WITHIN`` of ``now``."""
    seen = last_seen_at is not None and last_seen_at >= now - RUNNING_WITHIN
    return stopped_at is None and seen


def _computation(row: Mapping[str, Any], cost: Mapping[str, Any] | None) -> ComputationSummary:
    duration = elapsed(row["started_at"], row["stopped_at"])  # unfinished: None
    return pick(
        ComputationSummary,
        row,
        duration_s=duration,
        task_seconds=None if cost is None else cost["task_seconds"],
        cost=None if cost is None or cost["cost"] is None else cost["cost"]["total"],
        cost_text=MISSING
        if cost is None or cost["cost"] is None
        else money_text(cost["cost"]["total"], cost["cost"]["currency"]),
        code_frames=[pick(CodeFrame, f) for f in code_frames(row["code"])],
        code_note=code_note(row["code"]),
    )


def _span_lines(
    spans: Sequence[Mapping[str, Any]], seconds: Sequence[Mapping[str, Any]]
) -> list[SpanLine]:
    """The span tree flattened in page order, each span with its subtree's seconds."""
    rows = [{**r, "prefix": "", "unit": "seconds"} for r in seconds]
    out = []
    # Without recursion: a chain of spans may be thousands deep
    pending = [(node, 0) for node in reversed(span_tree(spans, rows))]
    while pending:
        node, depth = pending.pop()
        totals = sorted(node["totals"], key=lambda m: (-m["value"], m["activity"]))
        out.append(
            pick(
                SpanLine,
                node,
                depth=depth,
                tasks=sum(int(v) for v in (node["states"] or {}).values()),
                seconds_by_activity={m["activity"]: m["value"] for m in totals},
            )
        )
        pending.extend((child, depth + 1) for child in reversed(node["children"]))
    return out
