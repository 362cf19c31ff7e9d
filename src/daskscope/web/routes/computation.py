"""The computation page (``/clusters/{id}/computations/{cid}``): its code, figures,
task-group graph with the critical path, and what-if estimates; and its JSON
(``/api/v1/clusters/{id}/computations/{cid}/critical-path``). Both render
:mod:`daskscope.views.critical_path`."""

from __future__ import annotations

import sqlalchemy as sa
from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, Response

from daskscope.store import schema as s
from daskscope.views import to_data
from daskscope.views.critical_path import (
    MAX_THREADS,
    CriticalPathView,
    TooLarge,
    critical_path_view,
)
from daskscope.web.errors import BadRequest, NotFound
from daskscope.web.render import page
from daskscope.web.routes.common import (
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
) -> CriticalPathView:
    cluster_id = visible_cluster_id(request, cluster_id)
    try:
        view = critical_path_view(store_of(request), cluster_id, computation_id, threads=threads)
    except TooLarge as exc:
        raise BadRequest(
            str(exc), hint="Its task groups are listed on the cluster's page."
        ) from None
    if view is None:
        raise NotFound(
            f"cluster {cluster_id} has no computation {computation_id!r}",
            hint="The cluster's page lists its computations.",
        )
    return view


@pages.get("/clusters/{cluster_id}/computations/{computation_id}", response_class=HTMLResponse)
def computation_page(
    request: Request, cluster_id: str, computation_id: str, threads: int | None = _THREADS
) -> HTMLResponse:
    view = _view(request, cluster_id, computation_id, threads)
    with store_of(request).engine.connect() as conn:
        name = conn.execute(
            sa.select(s.clusters.c.name).where(s.clusters.c.id == view.cluster_id)
        ).scalar_one()
    return page(
        request,
        "computation.html",
        title=f"Computation · {name}",
        name=name,
        label=label,
        data=to_data(view),
    )


@api.get(
    "/clusters/{cluster_id}/computations/{computation_id}/critical-path",
    summary="A computation's critical path and its wall time on more or fewer threads",
    response_class=Response,
    responses=described(CriticalPathView),
)
def critical_path_json(
    request: Request, cluster_id: str, computation_id: str, threads: int | None = _THREADS
) -> Response:
    """The same JSON as ``daskscope critical-path ID COMPUTATION --json``. Task groups
    are stages that wait for the groups they depend on; estimates come from the recorded
    task durations (see docs/metrics.md, "Critical path and what-if")."""
    return view_response(_view(request, cluster_id, computation_id, threads))
