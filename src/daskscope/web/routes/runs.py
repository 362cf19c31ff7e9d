"""Workflow runs (``/runs``, ``/runs/{id}``) and their JSON: both render the run's view
(:mod:`daskscope.views.run`), the JSON being the view's one encoding."""

from __future__ import annotations

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, Response

from daskscope.store.runs import AmbiguousRun, UnknownRun
from daskscope.views.encode import to_data, to_json
from daskscope.views.run import RunList, RunView, run_list, stored_run_view
from daskscope.web.errors import BadRequest, NotFound
from daskscope.web.render import page
from daskscope.web.routes.common import account_scope, store_of

__all__ = ["api", "pages"]

pages = APIRouter(include_in_schema=False)
api = APIRouter(tags=["runs"])


def _runs(request: Request, limit: int) -> RunList:
    return run_list(store_of(request), limit=limit, account=account_scope(request))


def _run(request: Request, run_id: str) -> RunView:
    try:
        return stored_run_view(store_of(request), run_id, account=account_scope(request))
    except UnknownRun as exc:
        raise NotFound(str(exc), data=exc.data(), hint="The runs page lists them.") from None
    except AmbiguousRun as exc:
        hint = "Give more of the id: the runs page lists them."
        raise BadRequest(str(exc), data=exc.data(), hint=hint) from None


def _json(view: RunList | RunView) -> Response:
    return Response(to_json(view), media_type="application/json")


@pages.get("/runs", response_class=HTMLResponse)
def runs_page(request: Request) -> HTMLResponse:
    return page(request, "runs.html", title="Workflow runs", listing=_runs(request, 100))


@pages.get("/runs/{run_id}", response_class=HTMLResponse)
def run_page(request: Request, run_id: str) -> HTMLResponse:
    view = _run(request, run_id)
    return page(request, "run.html", title=view.run.name, view=view, data=to_data(view))


@api.get("/runs", summary="Workflow runs, newest first", response_model=RunList)
def runs_json(request: Request, limit: int = Query(100, ge=1, le=10_000)) -> Response:
    return _json(_runs(request, limit))


@api.get("/runs/{run_id}", summary="One workflow run: figures, sections, chunks, workers",
         response_model=RunView)  # fmt: skip
def run_json(request: Request, run_id: str) -> Response:
    return _json(_run(request, run_id))
