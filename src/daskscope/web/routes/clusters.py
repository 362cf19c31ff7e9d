"""One cluster's page (``/clusters/{id}``) and its JSON: statistics, prefixes,
computations with their task-group graphs, spans and fine metrics, workers, errors,
and the profile as a flame graph."""

from __future__ import annotations

import hashlib
from typing import Any, Literal
from urllib.parse import quote

import dask.config
from dask.utils import parse_timedelta
from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

from daskscope.analysis.flamegraph import INNERMOST_COUNTED, icicle, merge_trees
from daskscope.store.queries import MAX_PAGE
from daskscope.views import (
    ClusterView,
    ComputationGraph,
    cluster_view,
    computation_view,
    to_data,
    to_json,
)
from daskscope.views.computation import FOLD_ABOVE, MAX_GRAPH_GROUPS
from daskscope.views.computation_page import cached_critical_path_view
from daskscope.views.critical_path import AmbiguousComputation, TooLarge
from daskscope.views.fine_metrics import (
    FineMetricIntervalsView,
    FineMetricsView,
    fine_metric_intervals_view,
    fine_metrics_view,
)
from daskscope.views.groups import GroupPage, SpanScope, group_page_view, span_scope_view
from daskscope.views.workers import WorkersView, workers_view
from daskscope.web.errors import HTTPError
from daskscope.web.prefix_chart import prefix_chart_data
from daskscope.web.render import page
from daskscope.web.routes.common import (
    Limit,
    Offset,
    described,
    json_response,
    label,
    store_of,
    visible_cluster_id,
)

__all__ = ["MAX_GRAPH_GROUPS", "api", "pages"]

pages = APIRouter(include_in_schema=False)
api = APIRouter(tags=["clusters"])

DEFAULT_GROUP_PAGE = 1000
MAX_GROUP_PAGE = MAX_PAGE


def _tagged_response(request: Request, view: Any) -> Response:
    """A view as JSON with an ETag of its bytes: a live page polling with
    If-None-Match gets an empty 304 while nothing changed."""
    body = to_json(view)
    etag = f'"{hashlib.blake2b(body, digest_size=16).hexdigest()}"'
    headers = {"ETag": etag, "Cache-Control": "no-cache"}
    sent = request.headers.get("if-none-match", "")
    if any(tag.strip().removeprefix("W/") == etag for tag in sent.split(",")):
        return Response(status_code=304, headers=headers)
    return Response(body, media_type="application/json", headers=headers)


def _view_of(request: Request, cluster_id: str, groups: int, groups_by: str) -> ClusterView:
    store = store_of(request)
    by: Literal["duration", "start"] = "start" if groups_by == "start" else "duration"
    return cluster_view(store, visible_cluster_id(request, cluster_id), groups=groups, groups_by=by)


def _page_data(view: ClusterView) -> dict[str, Any]:
    """What the page's scripts get: the view, and the task-prefix chart (drawn by the
    server at first paint, by plotly after: ``web/prefix_chart.py``)."""
    return {**to_data(view), "prefix_chart": prefix_chart_data(view.task_prefixes)}


@pages.get("/clusters/{cluster_id}", response_class=HTMLResponse)
def cluster_page(request: Request, cluster_id: str) -> HTMLResponse:
    view = _view_of(request, cluster_id, 0, "duration")
    data = _page_data(view)
    return page(request, "cluster.html", title=view.cluster.name, data=data, label=label)


@pages.get("/clusters/{cluster_id}/data")
def cluster_page_data(request: Request, cluster_id: str) -> Response:
    """The page's data afresh, with an ETag: what a live page polls."""
    return _tagged_response(request, _page_data(_view_of(request, cluster_id, 0, "duration")))


@pages.get("/clusters/{cluster_id}/prefix-chart")
def prefix_chart_json(
    request: Request,
    cluster_id: str,
    span: str | None = Query(None, max_length=2000),
    tag: str | None = Query(None, max_length=2000),
) -> Response:
    """The page's task-prefix chart of a span filter (with neither, of every group's
    prefixes) with the scope it was drawn from: the span filter's ``/prefixes`` and
    ``chart`` (``web/prefix_chart.py``)."""
    store = store_of(request)
    cluster_id = visible_cluster_id(request, cluster_id)
    view = span_scope_view(store, cluster_id, span=span, tag=tag)
    if view is None:
        raise HTTPError(404, f"cluster {cluster_id} has no span {span!r}; its page lists its spans")
    chart = prefix_chart_data(view.task_prefixes)
    return json_response({**to_data(view), "chart": chart})


@api.get(
    "/clusters/{cluster_id}",
    summary="Everything on one cluster's page",
    response_class=Response,
    responses=described(ClusterView),
)
def cluster_json(
    request: Request,
    cluster_id: str,
    groups: int = Query(
        0,
        ge=0,
        le=MAX_GROUP_PAGE,
        description="Task groups listed in full in task_groups (all of them: the paged "
        "task-groups route).",
    ),
    groups_by: Literal["duration", "start"] = Query(
        "duration", description="Which groups: the longest or the earliest."
    ),
) -> Response:
    """The cluster's view: the same JSON as ``daskscope show ID --json`` (which asks
    for ``groups=1000``)."""
    return _tagged_response(request, _view_of(request, cluster_id, groups, groups_by))


@api.get(
    "/clusters/{cluster_id}/workers",
    summary="Worker samples over time, and departures",
    response_class=Response,
    responses=described(WorkersView),
)
def workers_json(request: Request, cluster_id: str) -> Response:
    """Per worker: memory split, CPU, tasks, network and disk I/O and GPU figures over
    time; for the cluster: the memory split summed over workers, against the summed
    memory limit; departures with their reason (only ``lost`` is a loss)."""
    store = store_of(request)
    return _tagged_response(request, workers_view(store, visible_cluster_id(request, cluster_id)))


@api.get(
    "/clusters/{cluster_id}/computations/{computation_id}/graph",
    summary="A computation's task-group graph, laid out in layers",
    response_class=Response,
    responses=described(ComputationGraph),
)
def graph_json(
    request: Request,
    cluster_id: str,
    computation_id: str,
    fold: Literal["auto", "prefix", "span", "none"] = Query(
        "auto",
        description="One node per task prefix or span (opened ones as their groups), "
        f"none (the {MAX_GRAPH_GROUPS} longest groups), or auto (by prefix past "
        f"{FOLD_ABOVE} groups).",
    ),
    open: str | None = Query(
        None,
        max_length=2000,
        description='Folds drawn as their groups, comma-separated: "prefix:NAME", '
        '"span:ID" (the last 3 count).',
    ),
    path: bool = Query(
        False,
        description="Highlight the critical path (nodes count its groups, edges its "
        "steps) and size nodes by their longest task.",
    ),
) -> Response:
    """Past a hundred groups, folded: each node says how many groups it holds, and
    ``groups_folded`` how many are in folds; nothing is left uncounted."""
    store = store_of(request)
    cluster_id = visible_cluster_id(request, cluster_id)
    url = f"{_groups_url(cluster_id)}?computation={quote(computation_id)}"
    critical: dict[str, Any] = {}
    # one fingerprint of what the graph and the path read (views/memo.py)
    fingerprint = store.computation_fingerprint(cluster_id, computation_id)
    if path:
        try:
            view = cached_critical_path_view(
                store, cluster_id, computation_id, fingerprint=fingerprint
            )
        except (TooLarge, AmbiguousComputation) as exc:
            raise HTTPError(400, str(exc)) from None
        if view is not None:
            critical = {"path": view.path, "sizes": {g.name: g.longest_s for g in view.groups}}
    opened = [f for f in (open or "").split(",") if f]
    graph = computation_view(
        store, cluster_id, computation_id, all_groups_url=url, fold=fold, opened=opened,
        fingerprint=fingerprint, **critical,
    )  # fmt: skip
    if graph is None:
        raise HTTPError(404, f"cluster {cluster_id} has no computation {computation_id!r}")
    return _tagged_response(request, graph)


def _groups_url(cluster_id: str) -> str:
    return f"/api/v1/clusters/{quote(cluster_id)}/task-groups"


@api.get(
    "/clusters/{cluster_id}/task-groups",
    summary="All task groups of a cluster (or of one computation), a page at a time",
    response_class=Response,
    responses=described(GroupPage),
)
def task_groups_json(
    request: Request,
    cluster_id: str,
    offset: Offset = 0,
    limit: Limit = DEFAULT_GROUP_PAGE,
    computation: str | None = Query(None, description="Only this computation's groups."),
    span: str | None = Query(
        None, description="Only the groups that ran in this span or the spans below it."
    ),
    tag: str | None = Query(None, description="Only the groups that ran in spans with this tag."),
) -> Response:
    """Groups in one stable order (start, name, id), so that following ``next`` from
    offset 0 yields every group exactly once; ``total`` is how many there are."""
    store = store_of(request)
    cluster_id = visible_cluster_id(request, cluster_id)
    url = _groups_url(cluster_id)
    found = group_page_view(
        store,
        cluster_id,
        offset=offset,
        limit=limit,
        computation=computation,
        url=url,
        span=span,
        tag=tag,
    )
    if found is None:
        what = f"computation {computation!r}" if span is None else f"computation or span {span!r}"
        raise HTTPError(
            404,
            f"cluster {cluster_id} has no {what}; the cluster's page lists its spans "
            "and computations",
        )
    return _tagged_response(request, found)


@api.get(
    "/clusters/{cluster_id}/prefixes",
    summary="Task prefixes and computations of a span's subtree or of spans with a tag",
    response_class=Response,
    responses=described(SpanScope),
)
def prefixes_json(
    request: Request,
    cluster_id: str,
    span: str | None = Query(None, description="Only this span and the spans below it."),
    tag: str | None = Query(None, description='Only spans with this tag, e.g. "data load".'),
) -> Response:
    """Per task prefix, the groups that ran in the spans asked for, counted and summed
    by the database; with neither filter, every group of the cluster."""
    store = store_of(request)
    cluster_id = visible_cluster_id(request, cluster_id)
    view = span_scope_view(store, cluster_id, span=span, tag=tag)
    if view is None:
        raise HTTPError(404, f"cluster {cluster_id} has no span {span!r}; its page lists its spans")
    return _tagged_response(request, view)


def _profile_interval() -> float:
    seconds: float = parse_timedelta(dask.config.get("distributed.worker.profile.interval", "10ms"))
    return seconds


@api.get("/clusters/{cluster_id}/profile", summary="The profile as flame-graph arrays")
def profile_json(
    request: Request,
    cluster_id: str,
    computation: str | None = Query(None, description="Only the windows of this computation."),
) -> JSONResponse:
    store = store_of(request)
    cluster_id = visible_cluster_id(request, cluster_id)
    start = stop = None
    if computation is not None:
        comp = store.computation_row(cluster_id, computation)
        if comp is None:
            raise HTTPError(404, f"cluster {cluster_id} has no computation {computation!r}")
        start = comp["started_at"]
        stop = comp["stopped_at"]
    windows = store.profile_trees(cluster_id, start=start, stop=stop)
    tree = merge_trees(w["tree"] for w in windows)
    return json_response(
        {
            "cluster_id": cluster_id,
            "computation": computation,
            "windows": len(windows),
            # frames whose samples were split over their callees by estimate
            "estimated_splits": tree[INNERMOST_COUNTED],
            **icicle(tree, _profile_interval()),
        }
    )


@api.get(
    "/clusters/{cluster_id}/metrics",
    summary="Fine performance metrics, of a span's subtree or of spans with a tag",
    response_class=Response,
    responses=described(FineMetricsView),
)
def metrics_json(
    request: Request,
    cluster_id: str,
    tag: str | None = Query(None, description='Only spans with this tag, e.g. "data load".'),
    span: str | None = Query(None, description="Only this span and the spans below it."),
) -> Response:
    """Summed by (activity, prefix, unit); each span's metrics are its own (exclusive),
    so a subtree's are the sums over its spans."""
    store = store_of(request)
    cluster_id = visible_cluster_id(request, cluster_id)
    view = fine_metrics_view(store, cluster_id, tag=tag, span_id=span)
    if view is None:
        raise HTTPError(404, f"cluster {cluster_id} has no span {span!r}")
    return _tagged_response(request, view)


@api.get(
    "/clusters/{cluster_id}/metrics/intervals",
    summary="Fine performance metrics flush interval by flush interval",
    response_class=Response,
    responses=described(FineMetricIntervalsView),
)
def metric_intervals_json(
    request: Request,
    cluster_id: str,
    unit: Literal["seconds", "bytes", "count"] = Query(
        "seconds", description="The unit of the metrics: seconds, bytes or count."
    ),
) -> Response:
    """What each activity gained between two of the recorder's flushes, over the whole
    cluster: where the time went, interval by interval."""
    store = store_of(request)
    cluster_id = visible_cluster_id(request, cluster_id)
    return _tagged_response(request, fine_metric_intervals_view(store, cluster_id, unit=unit))
