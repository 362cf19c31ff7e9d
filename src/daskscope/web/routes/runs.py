"""Workflow runs (``/runs``, ``/runs/{id}``) and their JSON: both render the run's view
(:mod:`daskscope.views.run`), the JSON being the view's one encoding. The listing's
filters, order and page are query parameters, the same on the page and the API."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Annotated, Any, Literal
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, Response

from daskscope import catalogue
from daskscope.store.runs import AmbiguousRun, UnknownRun
from daskscope.views.encode import to_data
from daskscope.views.run import (
    RunList,
    RunQuery,
    RunView,
    run_list,
    section_figures,
    stored_run_view,
)
from daskscope.web.errors import HTTPError
from daskscope.web.render import page
from daskscope.web.routes.common import Limit, Offset, account_scope, store_of, view_response

__all__ = ["api", "pages"]

pages = APIRouter(include_in_schema=False)
api = APIRouter(tags=["runs"])


def _query(
    q: str | None = Query(None, description="A part of the name or user, or the id's start."),
    user: str | None = Query(None, description="Only this user's runs."),
    status: Literal["ok", "failed"] | None = Query(None),
    since: str | None = Query(None, description="Started on or after this UTC day or time."),
    until: str | None = Query(None, description="Started on or before this UTC day or time."),
    sort: Literal["started", "name", "user", "backend", "status", "wall", "chunks"] = Query(
        "started"
    ),
    order: Literal["asc", "desc"] = Query("desc"),
    offset: Offset = 0,
    limit: Limit = 100,
) -> RunQuery:
    return RunQuery(
        q=q or None, user=user or None, status=status, since=since or None,
        until=until or None, sort=sort, order=order, offset=offset, limit=limit,
    )  # fmt: skip


Asked = Annotated[RunQuery, Depends(_query)]


def _runs(request: Request, query: RunQuery) -> RunList:
    try:
        return run_list(store_of(request), query, account=account_scope(request))
    except ValueError as exc:
        raise HTTPError(400, str(exc), hint="Dates read 2026-01-31 (UTC).") from None


def _run(request: Request, run_id: str) -> RunView:
    try:
        return stored_run_view(store_of(request), run_id, account=account_scope(request))
    except UnknownRun as exc:
        raise HTTPError(404, str(exc), data=exc.data(), hint="The runs page lists them.") from None
    except AmbiguousRun as exc:
        hint = "Give more of the id: the runs page lists them."
        raise HTTPError(400, str(exc), data=exc.data(), hint=hint) from None


_DEFAULT = RunQuery()
# the listing's sortable columns: (sort key, header, numeric); a first click on a text
# column sorts it A to Z, on a number or time largest first
_COLUMNS = (
    ("name", "Name", False), ("user", "User", False), ("backend", "Backend", False),
    ("status", "Status", False), ("started", "Start (UTC)", False),
    ("wall", "Wall time", True), ("chunks", "Chunks", True),
)  # fmt: skip


def _linker(query: RunQuery) -> Callable[..., str]:
    """``link(**changes)``: the listing's URL with ``changes`` to ``query`` (defaults left
    out, so the plain listing is ``/runs``)."""

    def link(**changes: Any) -> str:
        chosen = dataclasses.asdict(dataclasses.replace(query, **changes))
        params = {k: v for k, v in chosen.items() if v and v != getattr(_DEFAULT, k)}
        return "/runs" + (f"?{urlencode(params)}" if params else "")

    return link


def _headers(query: RunQuery, link: Callable[..., str]) -> list[dict[str, Any]]:
    headers = []
    for key, label, numeric in _COLUMNS:
        current = query.sort == key
        first = "desc" if numeric or key == "started" else "asc"
        order = ("asc" if query.order == "desc" else "desc") if current else first
        headers.append({
            "key": key, "label": label, "numeric": numeric,
            "sort": ("ascending" if query.order == "asc" else "descending") if current else None,
            "href": link(sort=key, order=order, offset=0),
        })  # fmt: skip
    return headers


@pages.get("/runs", response_class=HTMLResponse)
def runs_page(request: Request, query: Asked) -> HTMLResponse:
    listing = _runs(request, query)
    link = _linker(query)
    return page(
        request, "runs.html", title="Workflow runs", listing=listing, link=link,
        headers=_headers(query, link),
    )  # fmt: skip


@pages.get("/runs/{run_id}", response_class=HTMLResponse)
def run_page(request: Request, run_id: str) -> HTMLResponse:
    view = _run(request, run_id)
    shown = section_figures(view.sections)
    columns = [(catalogue.figure("section", key), field) for key, field in shown]
    return page(
        request, "run.html", title=view.run.name, view=view, data=to_data(view),
        section_columns=columns,
        chunk_figures={f.key: f for f in catalogue.figures("chunk")},
    )  # fmt: skip


@api.get("/runs", summary="Workflow runs, filtered, ordered and paged (newest first)",
         response_model=RunList)  # fmt: skip
def runs_json(request: Request, query: Asked) -> Response:
    return view_response(_runs(request, query))


@api.get("/runs/{run_id}", summary="One workflow run: figures, sections, chunks, workers",
         response_model=RunView)  # fmt: skip
def run_json(request: Request, run_id: str) -> Response:
    return view_response(_run(request, run_id))
