"""The account page (``/``): statistics, weekly usage per member, cluster listing."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse

from daskscope.analysis import cluster_statistics, cost_rates
from daskscope.analysis.usage import account_statistics, member_usage
from daskscope.store import Store
from daskscope.store.analytics import (
    MONDAY,
    WEEK,
    account_totals,
    clusters_in_week,
    weekly_usage,
)
from daskscope.web.auth import viewer_of
from daskscope.web.errors import BadRequest
from daskscope.web.render import page
from daskscope.web.routes.common import json_response, store_of

__all__ = ["api", "pages"]

pages = APIRouter(include_in_schema=False)
api = APIRouter(tags=["account"])

# Times are finite epoch seconds within the wire's range (daskscope.wire): nan, inf or
# 1e308 would reach the database or JSON and fail there
EPOCH = {"ge": 0, "le": 2**33, "allow_inf_nan": False}
DAYS = Query(90, ge=0, le=36_500, description="Statistics over the last N days (0: all time).")
SINCE = Query(None, **EPOCH, description="Start of the range, epoch seconds (overrides days).")
UNTIL = Query(None, **EPOCH, description="End of the range (exclusive), epoch seconds.")
WEEKS = Query(26, ge=1, le=520, description="Weeks of member usage, ending this week.")
USER = Query(None, description="Only this member's clusters.")
WEEK_START = Query(None, **EPOCH, description="Only clusters started in the week from this Monday.")
LIMIT = Query(100, ge=1, le=10_000)


def _range(days: int, since: float | None, until: float | None) -> dict[str, Any]:
    if since is None and days:
        since = time.time() - days * 86400.0
    if since is not None and until is not None and until <= since:
        raise BadRequest("until must be after since")
    return {"since": since, "until": until, "days": days}


@dataclass(frozen=True)
class Scope:
    """What one viewer may see: one account (None: all), and whose usage (None: every
    member's; a member who is not an admin sees only their own)."""

    account: str | None = None
    usage_of: str | None = None


def scope_of(request: Request) -> Scope:
    viewer = viewer_of(request)
    if viewer is None:
        return Scope()
    return Scope(account=viewer.account, usage_of=None if viewer.is_admin else viewer.user)


def statistics(
    store: Store, since: float | None, until: float | None, scope: Scope = Scope()
) -> dict[str, Any]:
    totals = account_totals(store, since=since, until=until, account=scope.account)
    return account_statistics(totals)


def usage(store: Store, weeks: int, scope: Scope = Scope()) -> dict[str, Any]:
    this_week = math.floor((time.time() - MONDAY) / WEEK)
    since = MONDAY + (this_week - weeks + 1) * WEEK
    rows = weekly_usage(store, since=since, account=scope.account, user=scope.usage_of)
    return {**member_usage(rows), "since": since, "weeks_shown": weeks}


def listing(
    store: Store,
    *,
    user: str | None,
    week_start: float | None,
    limit: int,
    scope: Scope = Scope(),
) -> list[dict[str, Any]]:
    """The listing's columns for each cluster, newest first, cost priced per account."""
    rates: dict[str, Any] = {}
    rows = []
    found = clusters_in_week(
        store, user=user, week_start=week_start, limit=limit, account=scope.account
    )
    for c in found:
        account = c["account"]
        if account not in rates:
            rates[account] = cost_rates(account)
        stats = cluster_statistics(c, rates[account])
        rows.append(
            {
                "id": c["id"],
                "name": c["name"],
                "user": c["user"],
                "account": account,
                "started_at": c["started_at"],
                "stopped_at": c["stopped_at"],
                "duration_s": c["duration_s"],
                "workers": c["workers_peak"],
                "threads": c["threads_peak"],
                "cost": stats.get("cost", {}).get("total"),
                "currency": stats.get("cost", {}).get("currency"),
                "tasks_executed": c["tasks_executed"],
                "tasks_erred": c["tasks_erred"],
                "bytes_processed": c["bytes_processed"],
            }
        )
    return rows


def account_data(
    request: Request, *, days: int, since: float | None, until: float | None, weeks: int
) -> dict[str, Any]:
    """Everything on the account page, as far as the viewer may see."""
    store, scope = store_of(request), scope_of(request)
    chosen = _range(days, since, until)
    return {
        "range": chosen,
        "statistics": statistics(store, chosen["since"], chosen["until"], scope),
        "usage": usage(store, weeks, scope),
        "clusters": listing(store, user=None, week_start=None, limit=100, scope=scope),
    }


@pages.get("/", response_class=HTMLResponse)
def account_page(
    request: Request,
    days: int = DAYS,
    since: float | None = SINCE,
    until: float | None = UNTIL,
    weeks: int = WEEKS,
) -> HTMLResponse:
    data = account_data(request, days=days, since=since, until=until, weeks=weeks)
    return page(request, "account.html", title="Account", data=data)


@api.get("/account", summary="Everything on the account page")
def account_json(
    request: Request,
    days: int = DAYS,
    since: float | None = SINCE,
    until: float | None = UNTIL,
    weeks: int = WEEKS,
) -> dict[str, Any]:
    return json_response(account_data(request, days=days, since=since, until=until, weeks=weeks))


@api.get("/statistics", summary="Account totals over a time range, with cost")
def statistics_json(
    request: Request,
    days: int = DAYS,
    since: float | None = SINCE,
    until: float | None = UNTIL,
) -> dict[str, Any]:
    chosen = _range(days, since, until)
    return json_response(
        {
            "range": chosen,
            "statistics": statistics(
                store_of(request), chosen["since"], chosen["until"], scope_of(request)
            ),
        }
    )


@api.get("/usage", summary="Weekly cluster time, compute time and cost per member")
def usage_json(request: Request, weeks: int = WEEKS) -> JSONResponse:
    return json_response(usage(store_of(request), weeks, scope_of(request)))


@api.get("/clusters", summary="The cluster listing, optionally one member's week")
def clusters_json(
    request: Request,
    user: str | None = USER,
    week_start: float | None = WEEK_START,
    limit: int = LIMIT,
) -> dict[str, Any]:
    rows = listing(
        store_of(request),
        user=user,
        week_start=week_start,
        limit=limit,
        scope=scope_of(request),
    )
    return json_response({"user": user, "week_start": week_start, "clusters": rows})
