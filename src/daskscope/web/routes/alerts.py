"""The alerts' history (``/alerts``) and its JSON (``/api/v1/alerts``): each time a
rule's condition held, when it cleared, and its notification's delivery (attempts, last
error). A member sees their account's alerts; with authentication off, every alert."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from daskscope.store.alerts import alert_history
from daskscope.web.auth import viewer_of
from daskscope.web.render import page
from daskscope.web.routes.common import json_response, store_of

__all__ = ["api", "pages"]

pages = APIRouter(include_in_schema=False)
api = APIRouter(tags=["alerts"])

HISTORY_ROWS = 200
_SHOWN = (
    "id",
    "rule",
    "account",
    "kind",
    "condition",
    "summary",
    "detail",
    "fired_at",
    "cleared_at",
    "delivery",
    "attempts",
    "delivered_at",
    "last_error",
    "body_format",
)


def _data(request: Request) -> dict[str, Any]:
    viewer = viewer_of(request)
    accounts = None if viewer is None else [viewer.account]
    rows = alert_history(store_of(request), accounts=accounts, limit=HISTORY_ROWS)
    loop = getattr(request.app.state, "alerts", None)
    return {
        "account": None if viewer is None else viewer.account,
        "rules": [] if loop is None else [
            {"name": r.name, "account": r.account, "kind": r.kind, "format": r.body_format}
            for r in loop.settings.rules
            if accounts is None or r.account in accounts
        ],
        "evaluations": 0 if loop is None else loop.evaluations,
        "alerts": [{k: row[k] for k in _SHOWN} for row in rows],
    }  # fmt: skip


@api.get(
    "/alerts",
    summary="Alerts, newest first: each time a rule's condition held, when it cleared, "
    "and the delivery of its notification",
    response_class=Response,
)
def alerts_json(request: Request) -> Response:
    return json_response(_data(request))


@pages.get("/alerts", response_class=HTMLResponse)
def alerts_page(request: Request) -> HTMLResponse:
    return page(request, "alerts.html", title="Alerts", data=_data(request))
