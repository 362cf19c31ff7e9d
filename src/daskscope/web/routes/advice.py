"""The advice rules' findings as JSON: ``/api/v1/clusters/{id}/advice`` (``?computation=``
for one computation) and ``/api/v1/runs/{id}/advice``; the pages show them through the
advice box (templates/advice_box.html), the CLI with ``daskscope advise``."""

from __future__ import annotations

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from daskscope.store.runs import AmbiguousRun, UnknownRun
from daskscope.views.advice import AdviceView, UnknownComputation, cluster_advice, run_advice
from daskscope.web.errors import HTTPError
from daskscope.web.routes.common import (
    account_scope,
    described,
    store_of,
    view_response,
    visible_cluster_id,
)

__all__ = ["api", "pages"]

pages = APIRouter(include_in_schema=False)
api = APIRouter(tags=["advice"])

_COMPUTATION = Query(None, description="Only this computation (an id or a unique start).")


@api.get("/clusters/{cluster_id}/advice", summary="What the advice rules found for a cluster",
         responses=described(AdviceView))  # fmt: skip
def cluster_advice_json(
    request: Request, cluster_id: str, computation: str | None = _COMPUTATION
) -> Response:
    full = visible_cluster_id(request, cluster_id)
    try:
        return view_response(cluster_advice(store_of(request), full, computation))
    except UnknownComputation as exc:
        raise HTTPError(
            404, str(exc), hint="The cluster page's Computations tab lists them."
        ) from None


@api.get("/runs/{run_id}/advice", summary="What the advice rules found for a workflow run",
         responses=described(AdviceView))  # fmt: skip
def run_advice_json(request: Request, run_id: str) -> Response:
    try:
        view = run_advice(store_of(request), run_id, account=account_scope(request))
    except UnknownRun as exc:
        raise HTTPError(404, str(exc), data=exc.data(), hint="The runs page lists them.") from None
    except AmbiguousRun as exc:
        raise HTTPError(400, str(exc), data=exc.data(), hint="Give more of the run's id.") from None
    return view_response(view)
