"""All of a cluster's task groups (or one computation's, or one span filter's), a page
at a time; and what a span filter leaves of the cluster page: its prefixes and
computations, summed by the database."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlencode

from daskscope.store import Store
from daskscope.views.cluster import TaskGroup
from daskscope.views.rows import pick

__all__ = ["GroupPage", "ScopedPrefix", "SpanScope", "group_page_view", "span_scope_view"]


@dataclass(frozen=True)
class GroupPage:
    """Groups ``offset`` to ``offset + limit`` in one stable order (start, name, id);
    following ``next`` from offset 0 yields every group exactly once. ``span`` and
    ``tag``: the span filter the groups were chosen by (None: all of them)."""

    cluster_id: str
    computation: str | None
    span: str | None
    tag: str | None
    total: int
    offset: int
    limit: int
    groups: list[TaskGroup]
    #: the next page's address (None: this is the last)
    next: str | None


def group_page_view(
    store: Store,
    cluster_id: str,
    *,
    offset: int,
    limit: int,
    computation: str | None,
    url: str,
    span: str | None = None,
    tag: str | None = None,
) -> GroupPage | None:
    """One page (None when ``computation`` or ``span`` names nothing of the cluster's);
    ``url`` is the address the pages are served at, for ``next``."""
    page = store.task_group_page(
        cluster_id,
        offset=offset,
        limit=limit,
        computation_id=computation,
        span_id=span,
        tag=tag,
    )
    if page is None:
        return None
    end = offset + len(page["groups"])
    asked = {"computation": computation, "span": span, "tag": tag}
    query = urlencode(
        {"offset": end, "limit": limit, **{k: v for k, v in asked.items() if v is not None}}
    )
    return GroupPage(
        cluster_id=cluster_id,
        computation=computation,
        span=span,
        tag=tag,
        total=page["total"],
        offset=offset,
        limit=limit,
        groups=[pick(TaskGroup, g) for g in page["groups"]],
        next=f"{url}?{query}" if end < page["total"] else None,
    )


@dataclass(frozen=True)
class ScopedPrefix:
    """A task prefix summed over the groups of a span filter."""

    name: str
    group_count: int
    tasks_total: int
    tasks_executed: int
    tasks_erred: int
    nbytes_total: int
    duration_s: float


@dataclass(frozen=True)
class SpanScope:
    """What ran in a span's subtree (``span``), in the spans tagged ``tag``, or both:
    its task prefixes and the computations its groups belong to."""

    cluster_id: str
    span: str | None
    tag: str | None
    #: how many task groups ran there
    group_count: int
    #: by tasks executed, then seconds
    task_prefixes: list[ScopedPrefix]
    computations: list[str]


def span_scope_view(
    store: Store, cluster_id: str, *, span: str | None, tag: str | None
) -> SpanScope | None:
    """The view (of every group when neither is given); None when ``span`` names no
    span of the cluster."""
    found = store.span_scope(cluster_id, span=span, tag=tag)
    if found is None:
        return None
    prefixes = sorted(
        found["prefixes"], key=lambda p: (-p["tasks_executed"], -p["duration_s"], p["name"])
    )
    return SpanScope(
        cluster_id=cluster_id,
        span=span,
        tag=tag,
        group_count=sum(p["group_count"] for p in prefixes),
        task_prefixes=[pick(ScopedPrefix, p) for p in prefixes],
        computations=found["computations"],
    )
