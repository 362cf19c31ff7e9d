"""All of a cluster's task groups (or one computation's), a page at a time."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from daskscope.store import Store
from daskscope.store.groups import task_group_page
from daskscope.views.cluster import TaskGroup
from daskscope.views.rows import pick

__all__ = ["GroupPage", "group_page_view"]


@dataclass(frozen=True)
class GroupPage:
    """Groups ``offset`` to ``offset + limit`` in one stable order (start, name, id);
    following ``next`` from offset 0 yields every group exactly once."""

    cluster_id: str
    computation: str | None
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
) -> GroupPage | None:
    """One page (None when ``computation`` is not one of the cluster's); ``url`` is the
    address the pages are served at, for ``next``."""
    page = task_group_page(
        store, cluster_id, offset=offset, limit=limit, computation_id=computation
    )
    if page is None:
        return None
    end = offset + len(page["groups"])
    query = f"offset={end}&limit={limit}" + (
        f"&computation={quote(computation)}" if computation is not None else ""
    )
    return GroupPage(
        cluster_id=cluster_id,
        computation=computation,
        total=page["total"],
        offset=offset,
        limit=limit,
        groups=[pick(TaskGroup, g) for g in page["groups"]],
        next=f"{url}?{query}" if end < page["total"] else None,
    )
