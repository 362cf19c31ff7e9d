"""The task timeline of a cluster (``/clusters/{id}/timeline``), its JSON
(``/api/v1/clusters/{id}/timeline``) and the executions of one key
(``/api/v1/clusters/{id}/tasks/{key}``): all render :mod:`daskscope.views.timeline`."""

from __future__ import annotations

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, Response

from daskscope.views import to_data
from daskscope.views.timeline import (
    DEFAULT_BINS,
    MAX_BINS,
    MAX_RAW_TASKS,
    TaskDetailView,
    TimelineView,
    task_detail_view,
    timeline_view,
)
from daskscope.web.errors import HTTPError
from daskscope.web.render import page
from daskscope.web.routes.common import described, store_of, view_response, visible_cluster_id

__all__ = ["api", "pages"]

pages = APIRouter(include_in_schema=False)
api = APIRouter(tags=["timeline"])

#: Bins a thread on the page's first drawing: one every two pixels of a wide screen (its
#: script asks for its own width's worth after that)
PAGE_BINS = 700

_START = Query(None, description="Window start, UTC epoch seconds (default: the first task).")
_STOP = Query(None, description="Window stop, UTC epoch seconds (default: the last task's end).")
_COMPUTATION = Query(None, description="Only this computation's tasks.")
_SPAN = Query(None, description="Only the tasks of this span (its id).")
_GROUP = Query(None, description="Only this task group's tasks.")
_MAX_TASKS = Query(
    MAX_RAW_TASKS,
    ge=0,
    le=4 * MAX_RAW_TASKS,
    description="Send every task when the window holds at most this many, else bins.",
)
_BINS = Query(
    DEFAULT_BINS,
    ge=1,
    le=MAX_BINS,
    description="Bins per thread when the window holds too many tasks to send each.",
)


def _view(
    request: Request,
    cluster_id: str,
    start: float | None,
    stop: float | None,
    computation: str | None,
    span: str | None,
    group: str | None,
    bins: int,
    max_tasks: int,
) -> TimelineView:
    store = store_of(request)
    cluster_id = visible_cluster_id(request, cluster_id)
    try:
        return timeline_view(
            store,
            cluster_id,
            start,
            stop,
            computation_id=computation or None,
            span_id=span or None,
            group=group or None,
            width_bins=bins,
            max_tasks=max_tasks,
        )
    except ValueError as exc:
        raise HTTPError(400, str(exc), hint="start and stop are UTC epoch seconds.") from None


@pages.get("/clusters/{cluster_id}/timeline", response_class=HTMLResponse)
def timeline_page(
    request: Request,
    cluster_id: str,
    start: float | None = _START,
    stop: float | None = _STOP,
    computation: str | None = _COMPUTATION,
    span: str | None = _SPAN,
    group: str | None = _GROUP,
    max_tasks: int = _MAX_TASKS,
) -> HTMLResponse:
    view = _view(request, cluster_id, start, stop, computation, span, group, PAGE_BINS, max_tasks)
    store = store_of(request)
    name = store.cluster_name(view.cluster_id)
    pruned = None if view.recorded else store.pruned_task_log(view.cluster_id)
    return page(
        request,
        "timeline.html",
        title=f"Timeline · {name}",
        name=name,
        data=to_data(view),
        pruned=pruned,
    )


@api.get(
    "/clusters/{cluster_id}/timeline",
    summary="The task timeline of a window: every task, or bins per worker thread",
    response_class=Response,
    responses=described(TimelineView),
)
def timeline_json(
    request: Request,
    cluster_id: str,
    start: float | None = _START,
    stop: float | None = _STOP,
    computation: str | None = _COMPUTATION,
    span: str | None = _SPAN,
    group: str | None = _GROUP,
    bins: int = _BINS,
    max_tasks: int = _MAX_TASKS,
) -> Response:
    """The same JSON as ``daskscope timeline ID --json``. A window holding few tasks
    lists each (``raw``); a larger one bins each thread's time (``lanes[].bins``)."""
    view = _view(request, cluster_id, start, stop, computation, span, group, bins, max_tasks)
    return view_response(view)


@api.get(
    "/clusters/{cluster_id}/tasks/{key:path}",
    summary="Every execution of one task key",
    response_class=Response,
    responses=described(TaskDetailView),
)
def task_json(request: Request, cluster_id: str, key: str) -> Response:
    """The key as ``str()`` of Dask's key, e.g. ``('sum-aggregate-3f2a', 3)``; a task
    recomputed after a worker loss has more than one execution."""
    cluster_id = visible_cluster_id(request, cluster_id)
    view = task_detail_view(store_of(request), cluster_id, key)
    if view is None:
        raise HTTPError(404, f"cluster {cluster_id} recorded no task {key!r}")
    return view_response(view)
