"""Helpers shared by the route modules."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Query, Request
from fastapi.responses import JSONResponse, Response

from daskscope.catalogue import figure
from daskscope.store import Store
from daskscope.store.queries import MAX_OFFSET, MAX_PAGE
from daskscope.views import to_json
from daskscope.web.auth import viewer_of

__all__ = [
    "Limit",
    "Offset",
    "account_scope",
    "described",
    "json_response",
    "label",
    "store_of",
    "view_response",
    "visible_cluster_id",
]


#: The paging parameters of every listing route, one type each: a value out of range
#: (negative, past :data:`MAX_OFFSET` or :data:`MAX_PAGE`, or no integer) is answered
#: 400 naming the parameter, on every route alike, before any query runs. Give the
#: default in the signature: ``offset: Offset = 0``, ``limit: Limit = 100``.
Offset = Annotated[
    int,
    Query(ge=0, le=MAX_OFFSET, description="Rows skipped (paging; the order is stable)."),
]
Limit = Annotated[
    int, Query(ge=1, le=MAX_PAGE, description=f"Rows in this page (at most {MAX_PAGE:,}).")
]


def store_of(request: Request) -> Store:
    store: Store = request.app.state.store
    return store


def account_scope(request: Request) -> str | None:
    """The only account whose data this request may see; None: every account."""
    viewer = viewer_of(request)
    return viewer.account if viewer is not None else None


def visible_cluster_id(request: Request, id_or_prefix: str) -> str:
    """The full id of a cluster the viewer may see. A cluster of another account is
    answered exactly like one that does not exist (404), so ids leak nothing."""
    return store_of(request).resolve_cluster_id(id_or_prefix, account=account_scope(request))


def json_response(data: Any) -> JSONResponse:
    """Plain data straight to JSON: skips FastAPI's recursive ``jsonable_encoder``,
    which costs more than the query for the larger payloads (weekly usage, details)."""
    return JSONResponse(data)


def view_response(view: Any) -> Response:
    """A view as JSON, encoded as everywhere else (:func:`daskscope.views.to_json`)."""
    return Response(to_json(view), media_type="application/json")


def described(view_type: type) -> dict[int | str, dict[str, Any]]:
    """``responses=`` of a route answering ``view_type``: OpenAPI describes the view's
    fields, while the route encodes the view itself (no validation pass over it)."""
    return {200: {"model": view_type, "description": view_type.__doc__ or "The view."}}


def label(figure_id: str) -> str:
    """A figure's label from the catalogue, as a page heading writes it ("Core time")."""
    text = figure(figure_id).label
    return text[:1].upper() + text[1:]
