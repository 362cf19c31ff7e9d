"""Workflow runs (``/runs``, ``/runs/{id}``).

The workflow-run records (issue 3) are not in the store yet: these pages say so
honestly, and every run id is unknown (404), until that store module lands.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from daskscope.web.errors import NotFound
from daskscope.web.render import page

__all__ = ["api", "pages"]

pages = APIRouter(include_in_schema=False)
api = APIRouter(tags=["runs"])

EMPTY = "no workflow runs recorded yet"


def _runs() -> list[dict[str, Any]]:
    return []


@pages.get("/runs", response_class=HTMLResponse)
def runs_page(request: Request) -> HTMLResponse:
    return page(request, "runs.html", title="Workflow runs", runs=_runs(), empty=EMPTY)


@pages.get("/runs/{run_id}", response_class=HTMLResponse)
def run_page(request: Request, run_id: str) -> HTMLResponse:
    raise NotFound(f"no workflow run with id {run_id!r}; {EMPTY}")


@api.get("/runs", summary="Workflow runs, newest first")
def runs_json() -> dict[str, Any]:
    runs = _runs()
    return {"runs": runs, "message": None if runs else EMPTY}


@api.get("/runs/{run_id}", summary="One workflow run")
def run_json(run_id: str) -> dict[str, Any]:
    raise NotFound(f"no workflow run with id {run_id!r}; {EMPTY}")
