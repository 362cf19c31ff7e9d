"""What the computation page and its JSON send of a critical-path view: bounded at any
size of computation.

:func:`daskscope.views.critical_path.critical_path_view` works out the path through
every group of a computation; at 10,000 groups its groups and edges are megabytes. The
page and ``/api/v1/clusters/{id}/computations/{c}/critical-path`` send one page of its
groups (searched by name, sorted, ``offset``/``limit``), the edges between the groups
sent, at most :data:`MAX_PATH_LISTED` of the path's names, and the computation's group
totals as the database sums them (not the page's). The view itself is kept while what it
read is unchanged (:mod:`daskscope.views.memo`), so paging and searching do not work it
out again. ``daskscope critical-path --json`` prints the whole view.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from daskscope.store import Store
from daskscope.store.groups import ComputationState
from daskscope.views.critical_path import CriticalPathView, PathGroup, critical_path_view
from daskscope.views.memo import memoized

__all__ = [
    "GROUP_SORTS",
    "MAX_PATH_LISTED",
    "PAGE_GROUPS",
    "CriticalPathPage",
    "GroupTotals",
    "cached_critical_path_view",
    "critical_path_page",
    "group_totals",
]

#: Groups a page lists unless asked for more (the JSON's ``limit``, up to MAX_PAGE_GROUPS)
PAGE_GROUPS = 100
MAX_PAGE_GROUPS = 1000
#: Names of the critical path's groups sent
MAX_PATH_LISTED = 1000

GroupSort = Literal["start", "longest", "total", "tasks", "name"]
#: How the groups can be listed: by when they start with infinite workers (the view's
#: order), longest task, compute of all tasks or tasks (most first), or name
GROUP_SORTS: dict[str, Callable[[PathGroup], Any]] = {
    "start": lambda g: (g.earliest_start_s, g.name),
    "longest": lambda g: (-g.longest_s, g.name),
    "total": lambda g: (-g.total_s, g.name),
    "tasks": lambda g: (-g.tasks, g.name),
    "name": lambda g: g.name,
}


@dataclass(frozen=True)
class GroupTotals:
    """A computation's task groups counted and summed by the database."""

    count: int
    tasks_total: int
    tasks_executed: int
    tasks_erred: int
    nbytes_total: int
    duration_s: float


@dataclass(frozen=True)
class CriticalPathPage(CriticalPathView):
    """The critical-path view with one page of its groups: ``groups`` are those from
    ``groups_offset`` (at most ``groups_limit``) of the ``groups_matched`` whose name
    holds ``groups_query`` (any case; None: all ``groups_total``), in ``groups_sort``
    order; ``groups_next_offset`` the next page's (None: the last). ``edges`` are those
    between the groups listed (of ``edges_total``); ``path`` its first
    :data:`MAX_PATH_LISTED` groups (of ``path_total``). ``group_totals``: the
    computation's groups as the database sums them."""

    groups_total: int
    groups_matched: int
    groups_offset: int
    groups_limit: int
    groups_query: str | None
    groups_sort: str
    groups_next_offset: int | None
    edges_total: int
    path_total: int
    group_totals: GroupTotals


def cached_critical_path_view(
    store: Store,
    cluster_id: str,
    computation_id: str,
    *,
    threads: int | None = None,
    fingerprint: Any = None,
) -> CriticalPathView | None:
    """:func:`critical_path_view`, kept while the computation's rows, groups and the
    cluster's task log are unchanged (``fingerprint``: of
    :func:`computation_fingerprint`, read here when not given; an id's start, not a
    whole id: worked out each time)."""
    if fingerprint is None:
        fingerprint = store.computation_fingerprint(cluster_id, computation_id)
    return memoized(
        store,
        ("critical-path", cluster_id, computation_id, threads),
        fingerprint,
        lambda: critical_path_view(store, cluster_id, computation_id, threads=threads),
        lambda view: len(view.groups) + len(view.task_path) if view else 1,
    )


def group_totals(
    store: Store, cluster_id: str, computation_id: str, fingerprint: ComputationState | None = None
) -> GroupTotals:
    """The computation's groups counted and summed by the database (by the query of
    ``fingerprint`` when given: it sums them too)."""
    if fingerprint is not None:
        found = fingerprint.group_totals()
    else:
        found = store.computation_group_totals(cluster_id, computation_id)
    return GroupTotals(**{f.name: found[f.name] for f in dataclasses.fields(GroupTotals)})


def critical_path_page(
    view: CriticalPathView,
    totals: GroupTotals,
    *,
    query: str | None = None,
    sort: str = "start",
    offset: int = 0,
    limit: int = PAGE_GROUPS,
) -> CriticalPathPage:
    """The view with the page of groups asked for. Raises ``ValueError`` for an unknown
    ``sort``, a negative ``offset`` or a ``limit`` outside 1 to ``MAX_PAGE_GROUPS``."""
    if sort not in GROUP_SORTS:
        raise ValueError(f"sort must be one of {', '.join(GROUP_SORTS)}, not {sort!r}")
    if offset < 0 or not 1 <= limit <= MAX_PAGE_GROUPS:
        raise ValueError(
            f"offset must be >= 0 and limit between 1 and {MAX_PAGE_GROUPS}, "
            f"not {offset} and {limit}"
        )
    query = query.strip() if query else None
    matched = view.groups
    if query:
        needle = query.casefold()
        matched = [g for g in matched if needle in g.name.casefold()]
    if sort != "start":  # the view lists them by start already
        matched = sorted(matched, key=GROUP_SORTS[sort])
    listed = matched[offset : offset + limit]
    names = {g.name for g in listed}
    end = offset + len(listed)
    base = {f.name: getattr(view, f.name) for f in dataclasses.fields(CriticalPathView)}
    base.update(
        groups=listed,
        edges=[e for e in view.edges if e.source in names and e.target in names],
        path=view.path[:MAX_PATH_LISTED],
    )
    return CriticalPathPage(
        **base,
        groups_total=len(view.groups),
        groups_matched=len(matched),
        groups_offset=offset,
        groups_limit=limit,
        groups_query=query,
        groups_sort=sort,
        groups_next_offset=end if end < len(matched) else None,
        edges_total=len(view.edges),
        path_total=len(view.path),
        group_totals=totals,
    )
