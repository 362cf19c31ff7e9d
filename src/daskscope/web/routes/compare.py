"""Compare two things (``/compare?a=…&b=…``), the history of a recurring thing
(``/history?kind=…&name=…``) and the regressions (``/regressions``); their JSON under
``/api/v1/`` is each view's one encoding, as the CLI's ``--json`` prints it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, Response

from daskscope.store.compare import UnknownPart
from daskscope.store.runs import AmbiguousRun, UnknownRun
from daskscope.views.compare import REFERENCE_SYNTAX, BadReference, CompareView, compare_view
from daskscope.views.encode import to_data
from daskscope.views.history import (
    KINDS,
    HistoryView,
    RegressionsView,
    history_view,
    regressions_view,
)
from daskscope.web.errors import HTTPError
from daskscope.web.render import page
from daskscope.web.routes.common import (
    Offset,
    account_scope,
    described,
    store_of,
    view_response,
)

__all__ = ["api", "pages"]

pages = APIRouter(include_in_schema=False)
api = APIRouter(tags=["compare"])

_A = Query(..., description=f"One side: {REFERENCE_SYNTAX}.")
_B = Query(..., description="The other side, of the same kind.")
_KIND = Query(..., description=f"What recurs: {', '.join(KINDS)}.")
_NAME = Query(..., description="The span tag, workflow run name or cluster name.")


@contextmanager
def _answered() -> Iterator[None]:
    """The views' errors as HTTP errors that say what to do (store errors: errors.py)."""
    try:
        yield
    except BadReference as exc:
        raise HTTPError(400, str(exc), hint=f"Write each side as {REFERENCE_SYNTAX}.") from None
    except (UnknownPart, UnknownRun) as exc:
        raise HTTPError(
            404, str(exc), hint="The cluster and runs pages list what was recorded."
        ) from None
    except AmbiguousRun as exc:
        raise HTTPError(400, str(exc), data=exc.data(), hint="Give more of the run's id.") from None
    except ValueError as exc:
        raise HTTPError(400, str(exc)) from None


def _compare(request: Request, a: str, b: str) -> CompareView:
    with _answered():
        return compare_view(store_of(request), a, b, account=account_scope(request))


def _history(request: Request, kind: str, name: str, offset: int) -> HistoryView:
    """The newest runs after the ``offset`` newest (``offset=200``: the page before)."""
    with _answered():
        return history_view(
            store_of(request), kind, name, account=account_scope(request), offset=offset
        )


@pages.get("/compare", response_class=HTMLResponse)
def compare_page(request: Request, a: str = _A, b: str = _B) -> HTMLResponse:
    view = _compare(request, a, b)
    return page(request, "compare.html", title="Compare", view=view)


@pages.get("/history", response_class=HTMLResponse)
def history_page(
    request: Request, kind: str = _KIND, name: str = _NAME, offset: Offset = 0
) -> HTMLResponse:
    view = _history(request, kind, name, offset)
    return page(request, "history.html", title=f"History of {name}", view=view, data=to_data(view))


_ONLY = Query(None, description="Only the span tag, run name or cluster name of this name.")


def _regressions(request: Request, name: str | None) -> RegressionsView:
    return regressions_view(store_of(request), account=account_scope(request), name=name or None)


@pages.get("/regressions", response_class=HTMLResponse)
def regressions_page(request: Request, name: str | None = _ONLY) -> HTMLResponse:
    view = _regressions(request, name)
    return page(request, "regressions.html", title="Regressions", view=view)


@api.get("/compare", summary="Two clusters, computations, span tags or runs side by side",
         responses=described(CompareView))  # fmt: skip
def compare_json(request: Request, a: str = _A, b: str = _B) -> Response:
    return view_response(_compare(request, a, b))


@api.get("/history", summary="Each figure of a recurring thing over its runs, with checks",
         responses=described(HistoryView))  # fmt: skip
def history_json(
    request: Request, kind: str = _KIND, name: str = _NAME, offset: Offset = 0
) -> Response:
    return view_response(_history(request, kind, name, offset))


@api.get("/regressions", summary="Figures of recurring things that regressed",
         responses=described(RegressionsView))  # fmt: skip
def regressions_json(request: Request, name: str | None = _ONLY) -> Response:
    return view_response(_regressions(request, name))
