"""Turn the scheduler's live objects into records.

Pure conversions: each function reads attributes of a Dask object and returns a record.
They run on the scheduler's event loop (the objects are not thread-safe), so they stay
cheap: no I/O, no copying beyond what the record keeps.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from daskscope.model import (
    FineMetricIntervalRecord,
    SpanMetricRecord,
    SpanRecord,
    TaskGroupRecord,
    stable_id,
)

if TYPE_CHECKING:
    from distributed.scheduler import TaskGroup
    from distributed.spans import Span


#: Lines kept around the calling line when Dask sends a whole module as the "code"
_LINES_BEFORE_CALL = 15
_LINES_AFTER_CALL = 5


def frame_text(frame: Any) -> str:
    """One frame of Dask's ``SourceCode``: a header naming file and line, then the code.

    For a call at module level Dask sends the whole file; keep a window around the
    calling line (``lineno_relative`` is its 1-based position within ``code``).
    """
    lines = frame.code.splitlines()
    first = 1
    if len(lines) > _LINES_BEFORE_CALL + _LINES_AFTER_CALL + 1:
        call = max(1, min(frame.lineno_relative, len(lines)))
        first = max(1, call - _LINES_BEFORE_CALL)
        lines = lines[first - 1 : call + _LINES_AFTER_CALL]
    start_line = frame.lineno_frame - frame.lineno_relative + first
    return f"# {frame.filename}:{frame.lineno_frame} (from line {start_line})\n" + "\n".join(lines)


def code_snippets(code: Iterable[tuple[Any, ...]], max_chars: int) -> list[str]:
    """Dask's code (tuples of ``SourceCode`` frames) as text, within ``max_chars`` in all."""
    out: list[str] = []
    budget = max_chars
    for frames in code:
        for frame in frames:
            text = frame_text(frame)
            if len(text) > budget:
                out.append(text[: max(budget, 0)] + "\n# … (cut at daskscope.max-code-chars)")
                return out
            budget -= len(text)
            out.append(text)
    return out


def plain(durations: Mapping[str, float]) -> dict[str, float]:
    """A copy built item by item. Python's garbage collector does not track a dict of
    numbers made so, where ``dict()`` of Dask's ``all_durations`` (a defaultdict) would
    be tracked, as a copy keeps its source's tracking: the copies a recorder keeps live as
    long as their groups, and long-lived tracked objects bring on full passes over the
    scheduler's whole heap (issue 16)."""
    return {activity: seconds for activity, seconds in durations.items()}


def nonzero(counts: Mapping[Any, int]) -> dict[str, int]:
    """The states with at least one task (Dask keys them by literal state names)."""
    return {state: n for state, n in counts.items() if n}


def task_group_record(
    tg: TaskGroup,
    *,
    record_id: str,
    cluster_id: str,
    computation_id: str | None,
    executed: int,
    erred: int,
) -> TaskGroupRecord:
    return TaskGroupRecord(
        id=record_id,
        cluster_id=cluster_id,
        name=tg.name,
        prefix=tg.prefix.name,
        computation_id=computation_id,
        span_id=tg.span_id,
        dependencies=sorted(dep.name for dep in tg.dependencies),
        states=nonzero(tg.states),
        tasks_total=len(tg),
        tasks_executed=executed,
        tasks_erred=erred,
        nbytes_total=tg.nbytes_total,
        duration_s=tg.duration,
        durations=plain(tg.all_durations),
        types=sorted(tg.types),
        started_at=tg.start or None,
        stopped_at=tg.stop or None,
    )


@dataclass(frozen=True, slots=True)
class SpanSums:
    """A span's figures over its subtree's task groups (kept by deltas in
    :mod:`daskscope.collector.spans`, as Dask's ``Span`` would compute them)."""

    states: Mapping[str, int]
    nbytes_total: int
    durations: Mapping[str, float]
    duration_s: float
    started_at: float
    stopped_at: float
    done: bool
    active_cpu_seconds: float


def span_record(
    span: Span, *, cluster_id: str, max_code_chars: int, figures: SpanSums
) -> SpanRecord:
    """A span's record: its place in the tree and code from Dask's ``Span``, its
    states, bytes and durations (over its whole subtree) from ``figures``."""
    parent = span.parent
    return SpanRecord(
        id=stable_id(cluster_id, "span", span.id),
        cluster_id=cluster_id,
        span_id=span.id,
        parent_span_id=parent.id if parent is not None else None,
        name=list(span.name),
        enqueued_at=span.enqueued,
        started_at=figures.started_at or None,
        # only a finished span has a stop time (Dask's stop is "now" while it runs)
        stopped_at=figures.stopped_at if figures.done else None,
        done=figures.done,
        states=nonzero(figures.states),
        nbytes_total=figures.nbytes_total,
        duration_s=figures.duration_s,
        durations=dict(figures.durations),
        active_cpu_seconds=figures.active_cpu_seconds,
        code=code_snippets(span.code, max_code_chars),
        group_count=len(span.groups),
    )


def metric_parts(key: tuple[Hashable, ...]) -> tuple[str, str, str, str]:
    """Split a fine-metric key into (context, prefix, activity, unit).

    Dask's keys are ``(context, prefix, activity, unit)`` today; the set is open, so a
    key of another length keeps its ends and joins whatever lies between into prefix.
    """
    parts = [str(p) for p in key]
    if len(parts) == 4:
        return parts[0], parts[1], parts[2], parts[3]
    if len(parts) < 3:
        parts = parts + [""] * (3 - len(parts))
        return parts[0], "", parts[1], parts[2]
    return parts[0], "/".join(parts[1:-2]), parts[-2], parts[-1]


def span_metric_records(
    span_id: str, own_metrics: Mapping[tuple[Hashable, ...], float], *, cluster_id: str
) -> list[SpanMetricRecord]:
    """The span's own metrics, exclusive of its children, so that sums over any set of
    spans (e.g. every span tagged "load") never count a second twice."""
    records = []
    for key, value in own_metrics.items():
        context, prefix, activity, unit = metric_parts(key)
        records.append(
            SpanMetricRecord(
                id=stable_id(cluster_id, "span-metric", span_id, context, prefix, activity, unit),
                cluster_id=cluster_id,
                span_id=span_id,
                context=context,
                prefix=prefix,
                activity=activity,
                unit=unit,
                value=float(value),
            )
        )
    return records


MetricName = tuple[str, str, str]


def add_metric_gains(
    gains: dict[MetricName, float],
    now: Mapping[tuple[Hashable, ...], float],
    before: Mapping[tuple[Hashable, ...], float],
) -> None:
    """Add what each of a span's moved metrics gained since ``before`` to ``gains``,
    keyed by ``(context, activity, unit)`` (summed over task prefixes)."""
    for key, value in now.items():
        context, _prefix, activity, unit = metric_parts(key)
        name = (context, activity, unit)
        gains[name] = gains.get(name, 0.0) + (float(value) - float(before.get(key, 0.0)))


def interval_values(
    gains: Mapping[MetricName, float], carry: Mapping[MetricName, float]
) -> tuple[dict[MetricName, float], dict[MetricName, float]]:
    """An interval's values and the carry after it: a metric's gain plus what earlier
    intervals held back; a sum below zero is held back whole (values are never
    negative), so values plus carry always add up to the gains."""
    values: dict[MetricName, float] = {}
    out = dict(carry)
    for name, gain in gains.items():
        total = gain + out.pop(name, 0.0)
        if total > 0.0:
            values[name] = total
        elif total < 0.0:
            out[name] = total
    return values, out


def fine_metric_interval_records(
    values: Mapping[MetricName, float], *, started_at: float, stopped_at: float, cluster_id: str
) -> list[FineMetricIntervalRecord]:
    """One row per metric that gained in the interval (a metric unchanged writes none)."""
    return [
        FineMetricIntervalRecord(
            id=stable_id(cluster_id, "fine-interval", stopped_at, context, activity, unit),
            cluster_id=cluster_id,
            started_at=started_at,
            stopped_at=stopped_at,
            context=context,
            activity=activity,
            unit=unit,
            value=value,
        )
        for (context, activity, unit), value in values.items()
    ]


def prune_profile(tree: dict[str, Any], max_depth: int) -> int:
    """Cut the frames of a profile tree deeper than ``max_depth`` in place (deep
    recursion in user code reaches Python's 1,000-frame limit); returns how many nodes
    were cut. A cut frame's samples stay counted in its ancestors, so the totals and the
    self time of the deepest kept frame still add up."""
    cut = 0
    pending: list[tuple[dict[str, Any], int]] = [(tree, 0)]
    while pending:
        node, depth = pending.pop()
        children = node.get("children") or {}
        if depth >= max_depth and children:
            stack = list(children.values())
            while stack:  # count what goes, without recursion
                child = stack.pop()
                cut += 1
                stack.extend((child.get("children") or {}).values())
            node["children"] = {}
            continue
        pending.extend((child, depth + 1) for child in children.values())
    return cut
