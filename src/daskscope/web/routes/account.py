"""The account page (``/``) and its JSON: statistics, weekly usage per member, cluster
listing, as :mod:`daskscope.views.account` builds them for the viewer's scope."""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, Response

from daskscope.catalogue import figure
from daskscope.views import (
    AccountView,
    ClusterListing,
    MemberUsage,
    Scope,
    StatisticsView,
    TimeRange,
    account_view,
    statistics_view,
    time_range,
    usage_view,
)
from daskscope.views.account import PAGE_CLUSTERS, USAGE_METRICS
from daskscope.views.listing import ListingQuery, cluster_listing
from daskscope.web.auth import viewer_of
from daskscope.web.errors import HTTPError
from daskscope.web.render import page
from daskscope.web.routes.common import (
    Limit,
    Offset,
    described,
    label,
    store_of,
    view_response,
)
from daskscope.web.usage_heat import heat_map

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
Q = Query(None, max_length=200, description="Only clusters whose name or user holds this text.")
LISTED_SINCE = Query(None, **EPOCH, description="Only clusters started at or after this time.")
LISTED_UNTIL = Query(None, **EPOCH, description="Only clusters started before this time.")
ERRORS = Query(False, description="Only clusters with errored tasks.")
RUNNING = Query(False, description="Only running clusters (no stop, written recently).")
Sort = Literal["started", "name", "user", "duration", "workers", "tasks", "errors", "cost", "bytes"]
Order = Literal["asc", "desc"]
SORT = Query("started", description="Sort by this column.")
ORDER = Query("desc", description="Sort order.")
Metric = Literal["cluster_hours", "compute_hours", "cost"]
METRIC = Query("cluster_hours", description="The figure of the usage heat map.")
# The page's URL spells days as ISO dates ("2026-11-16"), readable in a shared link
DAY = r"^\d{4}-\d{2}-\d{2}$"


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
        raise HTTPError(400, str(exc)) from None


def _account(
    request: Request,
    days: int,
    since: float | None,
    until: float | None,
    weeks: int,
    listing: ListingQuery | None = None,
    metric: str = "cluster_hours",
) -> AccountView:
    chosen = _range(days, since, until)
    return account_view(store_of(request), chosen, weeks, scope_of(request), listing, metric)


def _day(text: str | None, name: str) -> float | None:
    """Midnight UTC of an ISO date, epoch seconds."""
    if not text:
        return None
    try:
        day = dt.date.fromisoformat(text)
    except ValueError:
        raise HTTPError(400, f"{name} must be a date like 2026-11-16, got {text!r}") from None
    return dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC).timestamp()


@pages.get("/", response_class=HTMLResponse)
def account_page(
    request: Request,
    days: int = DAYS,
    since: float | None = SINCE,
    until: float | None = UNTIL,
    weeks: int = WEEKS,
    metric: Metric = METRIC,
    q: str | None = Q,
    user: str | None = USER,
    week: str | None = Query(None, pattern=DAY, description="Only the week from this Monday."),
    start: str | None = Query(None, pattern=DAY, description="Listed from this day (UTC)."),
    end: str | None = Query(None, pattern=DAY, description="Listed up to this day, inclusive."),
    errors: bool = ERRORS,
    running: bool = RUNNING,
    sort: Sort = SORT,
    order: Order = ORDER,
    offset: Offset = 0,
) -> HTMLResponse:
    last = _day(end, "end")
    listing = ListingQuery(
        q=q or None,
        user=user or None,
        week_start=_day(week, "week"),
        since=_day(start, "start"),
        until=None if last is None else last + 86400.0,
        errors=errors,
        running=running,
        sort=sort,
        order=order,
        offset=offset,
        limit=PAGE_CLUSTERS,
    )
    view = _account(request, days, since, until, weeks, listing, metric)
    figures = {m: figure(f"member.{m}").label for m in USAGE_METRICS}
    currency = view.statistics.currency or "USD"
    # What the page's scripts read (the rest is drawn as HTML): the range, the
    # listing's total, and the heat map's rows and weeks for selecting a cell
    script_data = {
        "range": {"days": view.range.days},
        "listing": {"total": view.listing.total},
        "usage": {
            "metric": view.usage.metric,
            "rows": [{"user": r.user, "grouped": r.grouped} for r in view.usage.members],
        },
    }
    return page(
        request,
        "account.html",
        title="Account",
        data=view,
        script_data=script_data,
        heat=heat_map(view.usage, figure(f"member.{metric}"), currency),
        figures=figures,
        label=label,
        page_size=PAGE_CLUSTERS,
    )


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
    metric: Metric = METRIC,
) -> Response:
    return view_response(_account(request, days, since, until, weeks, metric=metric))


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
    summary="The cluster listing: searched, filtered, sorted and paged",
    response_class=Response,
    responses=described(ClusterListing),
)
def clusters_json(
    request: Request,
    q: str | None = Q,
    user: str | None = USER,
    week_start: float | None = WEEK_START,
    since: float | None = LISTED_SINCE,
    until: float | None = LISTED_UNTIL,
    errors: bool = ERRORS,
    running: bool = RUNNING,
    sort: Sort = SORT,
    order: Order = ORDER,
    offset: Offset = 0,
    limit: Limit = 100,
) -> Response:
    """The same JSON as ``daskscope clusters --json`` (with ``limit=50``)."""
    query = ListingQuery(
        q=q or None,
        user=user or None,
        week_start=week_start,
        since=since,
        until=until,
        errors=errors,
        running=running,
        sort=sort,
        order=order,
        offset=offset,
        limit=limit,
    )
    return view_response(
        cluster_listing(store_of(request), query, account=scope_of(request).account)
    )
