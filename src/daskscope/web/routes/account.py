"""The account page (``/``) and its JSON: statistics, weekly usage per member, cluster
listing, as :mod:`daskscope.views.account` builds them for the viewer's scope."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, Response

from daskscope.views import (
    AccountView,
    ClusterListing,
    MemberUsage,
    Scope,
    StatisticsView,
    TimeRange,
    account_view,
    cluster_listing,
    statistics_view,
    time_range,
    to_data,
    usage_view,
)
from daskscope.web.auth import viewer_of
from daskscope.web.errors import BadRequest
from daskscope.web.render import page
from daskscope.web.routes.common import described, label, store_of, view_response

__all__ = ["api", "pages", "scope_of"]

pages = APIRouter(include_in_schema=False)
api = APIRouter(tags=["account"])

# Times are finite epoch seconds within the wire's range (daskscope.wire): nan, inf or
# 1e308 would reach the database or JSON and fail there
EPOCH: dict[str, Any] = {"ge": 0, "le": 2**33, "allow_inf_nan": False}
DAYS = Query(90, ge=0, le=36_500, description="Statistics over the last N days (0: all time).")
SINCE = Query(None, **EPOCH, description="Start of the range, epoch seconds (overrides days).")
UNTIL = Query(None, **EPOCH, description="End of the range (exclusive), epoch seconds.")
WEEKS = Query(26, ge=1, le=520, description="Weeks of member usage, ending this week.")
USER = Query(None, description="Only this member's clusters.")
WEEK_START = Query(None, **EPOCH, description="Only clusters started in the week from this Monday.")
LIMIT = Query(100, ge=1, le=10_000)


def scope_of(request: Request) -> Scope:
    """What this viewer may see: their account; a member who is not an admin, only their
    own usage (no viewer: a server without accounts, everything)."""
    viewer = viewer_of(request)
    if viewer is None:
        return Scope()
    return Scope(account=viewer.account, usage_of=None if viewer.is_admin else viewer.user)


def _range(days: int, since: float | None, until: float | None) -> TimeRange:
    try:
        return time_range(days, since, until)
    except ValueError as exc:
        raise BadRequest(str(exc)) from None


def _account(
    request: Request, days: int, since: float | None, until: float | None, weeks: int
) -> AccountView:
    chosen = _range(days, since, until)
    return account_view(store_of(request), chosen, weeks, scope_of(request))


@pages.get("/", response_class=HTMLResponse)
def account_page(
    request: Request,
    days: int = DAYS,
    since: float | None = SINCE,
    until: float | None = UNTIL,
    weeks: int = WEEKS,
) -> HTMLResponse:
    view = _account(request, days, since, until, weeks)
    return page(request, "account.html", title="Account", data=to_data(view), label=label)


@api.get(
    "/account",
    summary="Everything on the account page",
    response_class=Response,
    responses=described(AccountView),
)
def account_json(
    request: Request,
    days: int = DAYS,
    since: float | None = SINCE,
    until: float | None = UNTIL,
    weeks: int = WEEKS,
) -> Response:
    return view_response(_account(request, days, since, until, weeks))


@api.get(
    "/statistics",
    summary="Account totals over a time range, with cost",
    response_class=Response,
    responses=described(StatisticsView),
)
def statistics_json(
    request: Request,
    days: int = DAYS,
    since: float | None = SINCE,
    until: float | None = UNTIL,
) -> Response:
    chosen = _range(days, since, until)
    return view_response(statistics_view(store_of(request), chosen, scope_of(request)))


@api.get(
    "/usage",
    summary="Weekly cluster time, compute time and cost per member",
    response_class=Response,
    responses=described(MemberUsage),
)
def usage_json(request: Request, weeks: int = WEEKS) -> Response:
    return view_response(usage_view(store_of(request), weeks, scope_of(request)))


@api.get(
    "/clusters",
    summary="The cluster listing, optionally one member's week",
    response_class=Response,
    responses=described(ClusterListing),
)
def clusters_json(
    request: Request,
    user: str | None = USER,
    week_start: float | None = WEEK_START,
    limit: int = LIMIT,
) -> Response:
    """The same JSON as ``daskscope clusters --json`` (with ``limit=50``)."""
    listing = cluster_listing(
        store_of(request),
        limit=limit,
        account=scope_of(request).account,
        user=user,
        week_start=week_start,
    )
    return view_response(listing)
