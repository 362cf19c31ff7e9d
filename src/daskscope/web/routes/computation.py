"""The computation page (``/clusters/{id}/computations/{cid}``): its code, figures,
task-group graph with the critical path, and what-if estimates; and its JSON
(``/api/v1/clusters/{id}/computations/{cid}/critical-path``). Both render
:mod:`daskscope.views.critical_path`, one page of its groups at a time
(:mod:`daskscope.views.computation_page`): bounded at 10,000 groups."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, Response

from daskscope.store.groups import ComputationState
from daskscope.views import to_data
from daskscope.views.computation_page import (
    GROUP_SORTS,
    MAX_PAGE_GROUPS,
    PAGE_GROUPS,
    CriticalPathPage,
    cached_critical_path_view,
    critical_path_page,
    group_totals,
)
from daskscope.views.critical_path import (
    MAX_THREADS,
    AmbiguousComputation,
    CriticalPathView,
    TooLarge,
)
from daskscope.web.errors import HTTPError
from daskscope.web.render import page
from daskscope.web.routes.common import (
    Limit,
    Offset,
    described,
    label,
    store_of,
    view_response,
    visible_cluster_id,
)

__all__ = ["api", "pages"]

pages = APIRouter(include_in_schema=False)
api = APIRouter(tags=["computations"])

_THREADS = Query(
    None,
    ge=1,
    le=MAX_THREADS,
    description="Also estimate the wall time on this many worker threads.",
)


def _view(
    request: Request, cluster_id: str, computation_id: str, threads: int | None
) -> tuple[CriticalPathView, ComputationState | None]:
    """The view, and the fingerprint it is kept under (None: not kept)."""
    cluster_id = visible_cluster_id(request, cluster_id)
    store = store_of(request)
    fingerprint = store.computation_fingerprint(cluster_id, computation_id)
    try:
        view = cached_critical_path_view(
            store, cluster_id, computation_id, threads=threads, fingerprint=fingerprint
        )
    except TooLarge as exc:
        raise HTTPError(
            400, str(exc), hint="Its task groups are listed on the cluster's page."
        ) from None
    except AmbiguousComputation as exc:
        raise HTTPError(400, str(exc), hint="The cluster's page lists its computations.") from None
    if view is None:
        raise HTTPError(
            404,
            f"cluster {cluster_id} has no computation {computation_id!r}",
            hint="The cluster's page lists its computations.",
        )
    return view, fingerprint


_QUERY = Query(
    None, max_length=200, description="Only the groups whose name holds this (any case)."
)
Sort = Annotated[str, Query(description="Groups by " + ", ".join(GROUP_SORTS) + ".")]


def _paged(
    request: Request,
    view: CriticalPathView,
    fingerprint: ComputationState | None,
    *,
    q: str | None,
    sort: str,
    offset: int,
    limit: int = PAGE_GROUPS,
) -> CriticalPathPage:
    if sort not in GROUP_SORTS:
        raise HTTPError(400, f"sort must be one of {', '.join(GROUP_SORTS)}, not {sort!r}")
    totals = group_totals(store_of(request), view.cluster_id, view.computation_id, fingerprint)
    return critical_path_page(view, totals, query=q, sort=sort, offset=offset, limit=limit)


def _link(request: Request) -> Any:
    """The page's address with some of its parameters changed (None removes one)."""

    def link(**changes: Any) -> str:
        params = dict(request.query_params)
        for key, value in changes.items():
            if value is None or value == "":
                params.pop(key, None)
            else:
                params[key] = str(value)
        query = "&".join(f"{quote(k)}={quote(v)}" for k, v in params.items())
        return f"{request.url.path}{'?' + query if query else ''}"

    return link


@pages.get("/clusters/{cluster_id}/computations/{computation_id}", response_class=HTMLResponse)
def computation_page(
    request: Request,
    cluster_id: str,
    computation_id: str,
    threads: int | None = _THREADS,
    q: str | None = _QUERY,
    sort: Sort = "start",
    offset: Offset = 0,
) -> HTMLResponse:
    view, fingerprint = _view(request, cluster_id, computation_id, threads)
    paged = _paged(request, view, fingerprint, q=q, sort=sort, offset=offset)
    name = store_of(request).cluster_name(view.cluster_id)
    base = f"/api/v1/clusters/{quote(view.cluster_id)}/computations/{quote(view.computation_id)}"
    # what the page's script draws: the what-if chart, and the graph from its route
    script = {
        "cluster_id": view.cluster_id,
        "computation_id": view.computation_id,
        "graph_url": f"{base}/graph?path=1",
        **{
            k: getattr(view, k)
            for k in (
                "estimates", "requested", "measured_wall_s", "measured_threads",
                "critical_path_s", "model",
            )
        },
    }  # fmt: skip
    return page(
        request,
        "computation.html",
        title=f"Computation · {name}",
        name=name,
        label=label,
        data=to_data(paged),
        script_data=to_data(script),
        link=_link(request),
        sorts=list(GROUP_SORTS),
    )


@api.get(
    "/clusters/{cluster_id}/computations/{computation_id}/critical-path",
    summary="A computation's critical path and its wall time on more or fewer threads",
    response_class=Response,
    responses=described(CriticalPathPage),
)
def critical_path_json(
    request: Request,
    cluster_id: str,
    computation_id: str,
    threads: int | None = _THREADS,
    q: str | None = _QUERY,
    sort: Sort = "start",
    offset: Offset = 0,
    limit: Limit = PAGE_GROUPS,
) -> Response:
    """``daskscope critical-path ID COMPUTATION --json`` with one page of its groups
    (``q``, ``sort``, ``offset``, ``limit``; ``groups_matched`` of ``groups_total``), the
    edges between those, at most 1,000 of the path's groups (``path_total``) and the
    groups' totals summed by the database (``group_totals``). Estimates come from the
    recorded task durations (see docs/metrics.md, "Critical path and what-if")."""
    view, fingerprint = _view(request, cluster_id, computation_id, threads)
    # the one paging type of every route; a page lists at most MAX_PAGE_GROUPS groups
    limit = min(limit, MAX_PAGE_GROUPS)
    paged = _paged(request, view, fingerprint, q=q, sort=sort, offset=offset, limit=limit)
    return view_response(paged)
