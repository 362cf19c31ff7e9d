"""One cluster's page (``/clusters/{id}``) and its JSON: statistics, prefixes,
computations with their task-group graphs, spans and fine metrics, workers, errors,
and the profile as a flame graph."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import dask.config
from dask.utils import parse_timedelta
from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse

from daskscope.analysis import cluster_statistics, cost_rates, fine_metrics_table, span_tree
from daskscope.analysis.code import code_note
from daskscope.analysis.flamegraph import icicle, merge_trees
from daskscope.analysis.graph import ACTIVITY_COLOURS, task_group_graph
from daskscope.analysis.workers import extra_metrics, memory_over_time
from daskscope.store import Store, cluster_detail, profile_trees
from daskscope.store import worker_samples as load_worker_samples
from daskscope.store.analytics import span_rows, worker_events
from daskscope.store.groups import computation_graph_groups, find_computation, task_group_page
from daskscope.web.errors import NotFound
from daskscope.web.render import page
from daskscope.web.routes.common import json_response, store_of, visible_cluster_id

__all__ = ["api", "pages"]

pages = APIRouter(include_in_schema=False)
api = APIRouter(tags=["clusters"])

TOP_PREFIXES = 25
MAX_POINTS_PER_WORKER = 2000
MAX_GRAPH_GROUPS = 300  # task groups drawn in a computation's graph (the longest)
DEFAULT_GROUP_PAGE = 1000
MAX_GROUP_PAGE = 10_000


def _flatten_spans(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    # In page order without recursion: a chain of spans may be thousands deep
    pending = [(node, 0) for node in reversed(nodes)]
    while pending:
        node, depth = pending.pop()
        states = node.get("states") or {}
        out.append(
            {
                "span_id": node["span_id"],
                "name": node.get("name") or [],
                "depth": depth,
                "started_at": node.get("started_at"),
                "stopped_at": node.get("stopped_at"),
                "duration_s": node.get("duration_s"),
                "nbytes_total": node.get("nbytes_total"),
                "tasks": sum(int(v) for v in states.values()),
                "group_count": node.get("group_count"),
                "active_cpu_seconds": node.get("active_cpu_seconds"),
            }
        )
        pending.extend((child, depth + 1) for child in reversed(node["children"]))
    return out


def cluster_data(store: Store, cluster_id: str) -> dict[str, Any]:
    """Everything on a cluster's page; ``cluster_id`` is resolved (and access-checked)."""
    detail = cluster_detail(store, cluster_id, compact=True)
    cluster = detail["cluster"]
    comps = detail["computations"]
    for comp in comps:
        end = comp["stopped_at"]
        comp["duration_s"] = None if end is None else max(0.0, end - comp["started_at"])
        comp["code_note"] = code_note(comp["code"])
    for worker in detail["workers"]:
        worker["extra_metrics"] = extra_metrics(worker["metrics"])
    tags = sorted({t for sp in detail["spans"] for t in (sp.get("name") or [])})
    prefixes = sorted(
        detail["task_prefixes"], key=lambda p: (-p["tasks_executed"], -p["duration_s"], p["name"])
    )[:TOP_PREFIXES]
    return {
        "cluster": cluster,
        "statistics": cluster_statistics(cluster, cost_rates(cluster.get("account"))),
        "task_prefixes": prefixes,
        "computations": comps,
        "task_group_summary": detail["task_group_summary"],
        "spans": _flatten_spans(span_tree(detail["spans"], ())),
        "span_tags": tags,
        "fine_metrics": detail["fine_metrics"],
        "workers": detail["workers"],
        "events": detail["events"],
        "errors": detail["errors"],
        "profiles": detail["profiles"],
        "activity_colours": ACTIVITY_COLOURS,
    }


@pages.get("/clusters/{cluster_id}", response_class=HTMLResponse)
def cluster_page(request: Request, cluster_id: str) -> HTMLResponse:
    data = cluster_data(store_of(request), visible_cluster_id(request, cluster_id))
    return page(request, "cluster.html", title=data["cluster"]["name"], data=data)


@api.get("/clusters/{cluster_id}", summary="Everything on one cluster's page")
def cluster_json(request: Request, cluster_id: str) -> JSONResponse:
    return json_response(cluster_data(store_of(request), visible_cluster_id(request, cluster_id)))


#: Per-worker series of the workers JSON: sample column -> series name
_WORKER_SERIES = {
    "memory": "memory",
    "managed_bytes": "managed",
    "unmanaged_bytes": "unmanaged",
    "spilled_bytes": "spilled",
    "memory_limit": "memory_limit",
    "cpu_percent": "cpu_percent",
    "nthreads": "nthreads",
}


def _thin(series: dict[str, list[Any]]) -> dict[str, list[Any]]:
    # Keep long recordings drawable: every n-th sample past the cap.
    step = -(-len(series["t"]) // MAX_POINTS_PER_WORKER)
    return {key: values[::step] for key, values in series.items()} if step > 1 else series


@api.get("/clusters/{cluster_id}/workers", summary="Worker samples over time, and losses")
def workers_json(request: Request, cluster_id: str) -> JSONResponse:
    """Per worker: memory split, CPU, tasks and threads over time; for the cluster: the
    memory split summed over workers, against the summed memory limit."""
    store = store_of(request)
    cluster_id = visible_cluster_id(request, cluster_id)
    samples = load_worker_samples(store, cluster_id)
    series: dict[str, dict[str, list[Any]]] = {}
    for row in samples:
        s = series.setdefault(
            row["worker"], {"t": [], "tasks": [], **{v: [] for v in _WORKER_SERIES.values()}}
        )
        s["t"].append(row["sampled_at"])
        s["tasks"].append(int(row["executing"]) + int(row["processing"]))
        for column, name in _WORKER_SERIES.items():
            s[name].append(row[column])
    events = worker_events(store, cluster_id)
    return json_response(
        {
            "cluster_id": cluster_id,
            "workers": {w: _thin(s) for w, s in series.items()},
            "memory": _thin(memory_over_time(samples)),
            "events": events,
        }
    )


@api.get(
    "/clusters/{cluster_id}/computations/{computation_id}/graph",
    summary="A computation's task-group graph, laid out in layers",
)
def graph_json(request: Request, cluster_id: str, computation_id: str) -> JSONResponse:
    store = store_of(request)
    cluster_id = visible_cluster_id(request, cluster_id)
    found = computation_graph_groups(store, cluster_id, computation_id, limit=MAX_GRAPH_GROUPS)
    if found is None:
        raise NotFound(f"cluster {cluster_id} has no computation {computation_id!r}")
    comp, groups, total = found
    return json_response(
        {
            "computation_id": comp["id"],
            "code": comp["code"],
            **task_group_graph(groups),
            # A graph of thousands of groups is neither drawable nor readable: the
            # longest are drawn, the rest are counted (and listed by the paged route).
            "groups_total": total,
            "groups_drawn": len(groups),
            "groups_not_drawn": total - len(groups),
            "all_groups_url": f"{_groups_url(cluster_id)}?computation={quote(comp['id'])}",
            "activity_colours": ACTIVITY_COLOURS,
        }
    )


def _groups_url(cluster_id: str) -> str:
    return f"/api/v1/clusters/{quote(cluster_id)}/task-groups"


@api.get(
    "/clusters/{cluster_id}/task-groups",
    summary="All task groups of a cluster (or of one computation), a page at a time",
)
def task_groups_json(
    request: Request,
    cluster_id: str,
    offset: int = Query(0, ge=0, description="Groups to skip (the order is stable)."),
    limit: int = Query(
        DEFAULT_GROUP_PAGE, ge=1, le=MAX_GROUP_PAGE, description="Groups in this page."
    ),
    computation: str | None = Query(None, description="Only this computation's groups."),
) -> JSONResponse:
    """Groups in one stable order (start, name, id), so that following ``next`` from
    offset 0 yields every group exactly once; ``total`` is how many there are."""
    store = store_of(request)
    cluster_id = visible_cluster_id(request, cluster_id)
    page = task_group_page(
        store, cluster_id, offset=offset, limit=limit, computation_id=computation
    )
    if page is None:
        raise NotFound(f"cluster {cluster_id} has no computation {computation!r}")
    end = offset + len(page["groups"])
    query = f"offset={end}&limit={limit}" + (
        f"&computation={quote(computation)}" if computation is not None else ""
    )
    page["next"] = f"{_groups_url(cluster_id)}?{query}" if end < page["total"] else None
    return json_response({"cluster_id": cluster_id, "computation": computation, **page})


def _profile_interval() -> float:
    return parse_timedelta(dask.config.get("distributed.worker.profile.interval", "10ms"))


@api.get("/clusters/{cluster_id}/profile", summary="The profile as flame-graph arrays")
def profile_json(
    request: Request,
    cluster_id: str,
    computation: str | None = Query(None, description="Only the windows of this computation."),
) -> dict[str, Any]:
    store = store_of(request)
    cluster_id = visible_cluster_id(request, cluster_id)
    start = stop = None
    if computation is not None:
        with store.engine.connect() as conn:
            comp = find_computation(conn, cluster_id, computation)
        if comp is None:
            raise NotFound(f"cluster {cluster_id} has no computation {computation!r}")
        start = comp["started_at"]
        stop = comp["stopped_at"]
    windows = profile_trees(store, cluster_id, start=start, stop=stop)
    tree = merge_trees(w["tree"] for w in windows)
    return json_response(
        {
            "cluster_id": cluster_id,
            "computation": computation,
            "windows": len(windows),
            **icicle(tree, _profile_interval()),
        }
    )


@api.get("/clusters/{cluster_id}/metrics", summary="Fine performance metrics, by span tag")
def metrics_json(
    request: Request,
    cluster_id: str,
    tag: str | None = Query(None, description='Only spans with this tag, e.g. "data load".'),
) -> dict[str, Any]:
    store = store_of(request)
    cluster_id = visible_cluster_id(request, cluster_id)
    spans, metrics = span_rows(store, cluster_id)
    return json_response(
        {
            "cluster_id": cluster_id,
            "tag": tag,
            "metrics": fine_metrics_table(metrics, spans=spans, tag=tag),
        }
    )
