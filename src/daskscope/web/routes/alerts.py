"""The alerts' history (``/alerts``) and its JSON (``/api/v1/alerts``): each time a
rule's condition held, when it cleared, and its notification's delivery (attempts, last
error). A member sees their account's alerts; with authentication off, every alert.

An account's admins set its rules beside the configuration's: ``PUT`` and ``DELETE``
``/api/v1/alerts/rules/NAME`` (the rule as the configuration spells it, as JSON)."""

from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import APIRouter, Body, Request
from fastapi.responses import HTMLResponse, Response

from daskscope.store.alerts import delete_rule, put_rule
from daskscope.web.alerts import rule_from
from daskscope.web.auth import viewer_of
from daskscope.web.errors import HTTPError
from daskscope.web.render import page
from daskscope.web.routes.common import json_response, store_of

__all__ = ["api", "pages"]

pages = APIRouter(include_in_schema=False)
api = APIRouter(tags=["alerts"])

HISTORY_ROWS = 200
#: a rule as the configuration spells it (docs/alerts.md)
_RULE_BODY = Annotated[dict[str, Any], Body(description="kind, webhook, format, idle-minutes, ...")]
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
    rows = store_of(request).alert_history(accounts=accounts, limit=HISTORY_ROWS)
    loop = getattr(request.app.state, "alerts", None)
    return {
        "account": None if viewer is None else viewer.account,
        "rules": [] if loop is None else [
            {"name": r.name, "account": r.account, "kind": r.kind, "format": r.body_format,
             "set_by": "configuration" if r in loop.settings.rules else "an admin"}
            for r in loop.rules()
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


def _admin_account(request: Request, asked: object) -> tuple[str | None, str | None]:
    """(the account whose rules the request may change, who asks); None: any (auth off)."""
    viewer = viewer_of(request)
    if viewer is None:
        return (str(asked) if asked else None), None
    if not viewer.is_admin:
        raise HTTPError(
            403,
            "only an account's admins set its alert rules",
            hint="Ask an admin of your account (daskscope user list shows them).",
        )
    return viewer.account, viewer.user


@api.put(
    "/alerts/rules/{name}",
    summary="Create or replace an alert rule of the admin's account",
    response_class=Response,
)
def put_alert_rule(request: Request, name: str, rule: _RULE_BODY) -> Response:
    account, by = _admin_account(request, rule.get("account"))
    account = account or "default"
    loop = getattr(request.app.state, "alerts", None)
    if loop is not None and any(r.name == name for r in loop.settings.rules):
        raise HTTPError(
            409, f"rule {name!r} is set in the server's configuration", hint="Choose another name."
        )
    fields = {k: v for k, v in rule.items() if k not in ("name", "account")}
    try:
        rule_from({**fields, "name": name, "account": account}, f"rule {name!r}")
    except ValueError as exc:
        raise HTTPError(422, str(exc), hint="See docs/alerts.md for the rule's fields.") from None
    if not put_rule(
        store_of(request), name=name, account=account, rule=fields, by=by, now=time.time()
    ):
        raise HTTPError(
            409, f"rule {name!r} belongs to another account", hint="Choose another name."
        )
    return json_response({"name": name, "account": account, "rule": fields})


@api.delete(
    "/alerts/rules/{name}",
    summary="Delete an alert rule of the admin's account",
    response_class=Response,
)
def delete_alert_rule(request: Request, name: str) -> Response:
    account, _ = _admin_account(request, None)
    if not delete_rule(store_of(request), name=name, account=account):
        raise HTTPError(
            404,
            f"no alert rule {name!r} set through the server for this account",
            hint="GET /api/v1/alerts lists the rules.",
        )
    return json_response({"deleted": name})


@api.get(
    "/alerts/rules",
    summary="The alert rules admins set through the server (of the member's account)",
    response_class=Response,
)
def alert_rules_json(request: Request) -> Response:
    viewer = viewer_of(request)
    rows = store_of(request).stored_rules()
    return json_response(
        [{**row} for row in rows if viewer is None or row["account"] == viewer.account]
    )
