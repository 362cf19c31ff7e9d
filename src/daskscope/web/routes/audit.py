"""The audit log (``/audit``) and its JSON (``/api/v1/audit``; ``?format=jsonl``: every
matching event as JSON lines, oldest first), for the admins of an account: their
account's events only (store/audit.py). A member who is no admin gets 403; with
authentication off (one user on loopback), the whole log."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Literal
from urllib.parse import urlencode

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, Response, StreamingResponse

from daskscope.store.audit import KINDS, AuditPage, Kind
from daskscope.web.auth import viewer_of
from daskscope.web.errors import HTTPError
from daskscope.web.render import page
from daskscope.web.routes.common import Limit, Offset, json_response, store_of

__all__ = ["api", "pages"]

pages = APIRouter(include_in_schema=False)
api = APIRouter(tags=["audit"])

# Finite epoch seconds within the wire's range (as the account routes take them)
_SINCE = Query(None, ge=0, le=2**33, allow_inf_nan=False, description="Events at or after.")
_UNTIL = Query(None, ge=0, le=2**33, allow_inf_nan=False, description="Events before.")
_KIND = Query(None, description="Only events of this kind.")
PAGE_EVENTS = 100
# What each kind reads as on the page
LABELS = {
    "token_created": "token created",
    "token_used_from_new_address": "token used from a new address",
    "token_revoked": "token revoked",
    "login_failed": "login failed",
}


def audit_scope(request: Request) -> str | None:
    """The account whose log the viewer may read: an admin's own (None: no
    authentication, every event); a member who is no admin is refused."""
    viewer = viewer_of(request)
    if viewer is None:
        return None
    if not viewer.is_admin:
        raise HTTPError(
            403,
            "only an account's admins see its audit log",
            hint="Ask an admin of your account (daskscope user list shows them).",
        )
    return viewer.account


def _page(
    request: Request,
    kind: str | None,
    since: float | None,
    until: float | None,
    offset: int,
    limit: int,
) -> AuditPage:
    return store_of(request).audit_page(
        account=audit_scope(request),
        since=since,
        until=until,
        kinds=(kind,) if kind else (),
        offset=offset,
        limit=limit,
    )


def _link(path: str, **params: Any) -> str:
    kept = {k: v for k, v in params.items() if v is not None}
    return f"{path}?{urlencode(kept)}" if kept else path


def _data(found: AuditPage, account: str | None, kind: str | None) -> dict[str, Any]:
    following = found.offset + found.limit
    more = following < found.total
    return {
        "account": account,
        "kinds": list(KINDS),
        "events": [event.to_data() for event in found.events],
        "total": found.total,
        "offset": found.offset,
        "limit": found.limit,
        "next": _link("/api/v1/audit", kind=kind, offset=following, limit=found.limit)
        if more
        else None,
    }


def _lines(
    request: Request, kind: str | None, since: float | None, until: float | None
) -> Response:
    account = audit_scope(request)
    events = store_of(request).export_events(
        account=account,
        since=since,
        until=until,
        kinds=(kind,) if kind else (),
    )

    def lines() -> Iterator[bytes]:  # iterated on a worker thread (starlette)
        for event in events:
            yield (json.dumps(event.to_data(), separators=(",", ":")) + "\n").encode()

    name = f"daskscope-audit-{account}.jsonl" if account else "daskscope-audit.jsonl"
    headers = {"Content-Disposition": f'attachment; filename="{name}"'}
    return StreamingResponse(lines(), media_type="application/x-ndjson", headers=headers)


@api.get(
    "/audit",
    summary="The account's audit log: tokens created, used from a new address, revoked; "
    "failed logins (admins only)",
    response_class=Response,
)
def audit_json(
    request: Request,
    kind: Kind | None = _KIND,
    since: float | None = _SINCE,
    until: float | None = _UNTIL,
    offset: Offset = 0,
    limit: Limit = PAGE_EVENTS,
    format: Literal["json", "jsonl"] = Query(
        "json",
        description="json: a page, newest first; jsonl: every matching event, oldest "
        "first, one JSON object a line (offset and limit do not apply).",
    ),
) -> Response:
    if format == "jsonl":
        return _lines(request, kind, since, until)
    found = _page(request, kind, since, until, offset, limit)
    return json_response(_data(found, audit_scope(request), kind))


@pages.get("/audit", response_class=HTMLResponse)
def audit_html(
    request: Request,
    kind: Kind | None = _KIND,
    offset: Offset = 0,
) -> HTMLResponse:
    account = audit_scope(request)
    found = _page(request, kind, None, None, offset, PAGE_EVENTS)
    return page(
        request,
        "audit.html",
        title="Audit log",
        data=_data(found, account, kind),
        kind=kind,
        labels=LABELS,
        link=lambda **changed: _link("/audit", **{"kind": kind, "offset": offset, **changed}),
        export=_link("/api/v1/audit", kind=kind, format="jsonl"),
    )
