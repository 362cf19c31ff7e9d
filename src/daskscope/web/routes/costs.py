"""What spans cost: ``/costs?tag=&since=&until=`` (per member and per tag, a table and a
bar chart each), its JSON ``/api/v1/costs`` (as ``daskscope costs --json`` prints it),
and one cluster's cost split over its root spans and computations
(``/api/v1/clusters/{id}/costs``)."""

from __future__ import annotations

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, Response

from daskscope.views.costs import ClusterCostsView, CostsView, cluster_costs_view, costs_view
from daskscope.views.encode import to_data
from daskscope.web.errors import HTTPError
from daskscope.web.render import page
from daskscope.web.routes.common import (
    account_scope,
    described,
    store_of,
    view_response,
    visible_cluster_id,
)

__all__ = ["api", "pages"]

pages = APIRouter(include_in_schema=False)
api = APIRouter(tags=["costs"])

_TAG = Query(None, description="Only the spans of this tag (none: every tag, each on its own).")
_SINCE = Query(None, description="Spans enqueued on or after this UTC day (2026-11-01) or time.")
_UNTIL = Query(None, description="Spans enqueued up to this UTC day (inclusive) or time.")


def _costs(request: Request, tag: str | None, since: str | None, until: str | None) -> CostsView:
    try:
        return costs_view(
            store_of(request), tag=tag or None, since=since or None, until=until or None,
            account=account_scope(request),
        )  # fmt: skip
    except ValueError as exc:
        raise HTTPError(400, str(exc), hint="Give days as 2026-11-01 (UTC).") from None


@pages.get("/costs", response_class=HTMLResponse)
def costs_page(
    request: Request, tag: str | None = _TAG, since: str | None = _SINCE, until: str | None = _UNTIL
) -> HTMLResponse:
    view = _costs(request, tag, since, until)
    form = {"tag": tag or "", "since": since or "", "until": until or ""}
    title = f"Cost of {tag}" if tag else "Costs"
    return page(request, "costs.html", title=title, view=view, form=form, data=to_data(view))


@api.get("/costs", summary="What the spans of a tag cost, per member and per tag",
         responses=described(CostsView))  # fmt: skip
def costs_json(
    request: Request, tag: str | None = _TAG, since: str | None = _SINCE, until: str | None = _UNTIL
) -> Response:
    return view_response(_costs(request, tag, since, until))


@api.get("/clusters/{cluster_id}/costs",
         summary="A cluster's cost split over its root spans and its computations",
         responses=described(ClusterCostsView))  # fmt: skip
def cluster_costs_json(request: Request, cluster_id: str) -> Response:
    full = visible_cluster_id(request, cluster_id)
    return view_response(cluster_costs_view(store_of(request), full))
