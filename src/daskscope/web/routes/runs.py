"""Workflow runs (``/runs``, ``/runs/{id}``), read through ``store.runs``."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse

from daskscope.store.runs import AmbiguousRun, UnknownRun, list_runs, resolve_run_id, run_detail
from daskscope.web.errors import BadRequest, NotFound
from daskscope.web.render import page
from daskscope.web.routes.common import account_scope, json_response, store_of

__all__ = ["api", "pages"]

pages = APIRouter(include_in_schema=False)
api = APIRouter(tags=["runs"])

EMPTY = "no workflow runs recorded yet"
CHUNK_COLUMNS = ("chunk_index", "dataset", "events", "bytes_read", "wall_s", "cpu_s")


def _runs(request: Request, limit: int) -> list[dict[str, Any]]:
    return list_runs(store_of(request), limit=limit, account=account_scope(request))


def _run(request: Request, run_id: str) -> dict[str, Any]:
    store = store_of(request)
    try:
        return run_detail(store, resolve_run_id(store, run_id, account=account_scope(request)))
    except UnknownRun as exc:
        raise NotFound(str(exc)) from None
    except AmbiguousRun as exc:
        raise BadRequest(str(exc)) from None


@pages.get("/runs", response_class=HTMLResponse)
def runs_page(request: Request) -> HTMLResponse:
    runs = _runs(request, 100)
    return page(request, "runs.html", title="Workflow runs", runs=runs, empty=EMPTY)


@pages.get("/runs/{run_id}", response_class=HTMLResponse)
def run_page(request: Request, run_id: str) -> HTMLResponse:
    data = _run(request, run_id)
    return page(request, "run.html", title=data["run"]["name"], data=data, columns=CHUNK_COLUMNS)


@api.get("/runs", summary="Workflow runs, newest first")
def runs_json(request: Request, limit: int = Query(100, ge=1, le=10_000)) -> JSONResponse:
    runs = _runs(request, limit)
    return json_response({"runs": runs, "message": None if runs else EMPTY})


@api.get("/runs/{run_id}", summary="One workflow run with its chunks")
def run_json(request: Request, run_id: str) -> JSONResponse:
    return json_response(_run(request, run_id))
