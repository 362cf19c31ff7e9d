"""The account as shown on its page (``/``) and by the account routes: totals over a
time range with cost, weekly usage per member, and the cluster listing."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from daskscope.analysis.usage import account_statistics, member_usage
from daskscope.pricing import cost_rates
from daskscope.store import Store
from daskscope.store.analytics import MONDAY, WEEK
from daskscope.views.listing import ClusterListing, ListingQuery, cluster_listing

__all__ = [
    "AccountStatistics",
    "AccountView",
    "CostBasis",
    "MemberUsage",
    "MemberWeeks",
    "Scope",
    "StatisticsView",
    "TimeRange",
    "UsageMap",
    "UsageRow",
    "account_view",
    "statistics_view",
    "time_range",
    "usage_map",
    "usage_view",
]

#: Clusters on one page of the account page's listing
PAGE_CLUSTERS = 50
#: Members drawn one a row on the usage heat map (by the figure shown); the rest share
#: one row, so that 100 members read like 16
TOP_MEMBERS = 15
#: The figures the usage heat map can show (each a ``member.*`` catalogue figure)
USAGE_METRICS = ("cluster_hours", "compute_hours", "cost")


@dataclass(frozen=True)
class Scope:
    """What one viewer may see: one account (None: all), and whose usage (None: every
    member's)."""

    account: str | None = None
    usage_of: str | None = None


@dataclass(frozen=True)
class TimeRange:
    """Clusters started in ``[since, until)``; ``days`` is the range asked for (0: all)."""

    since: float | None
    until: float | None
    days: int


@dataclass(frozen=True)
class CostBasis:
    """One set of prices and the accounts whose clusters were costed at it (None: no
    such price); accounts sharing an entry of ``daskscope.cost`` share one basis."""

    #: the entry of ``daskscope.cost`` that applied (None: none did)
    account: str | None
    #: the accounts (of clusters in the range) priced by it
    accounts: list[str]
    currency: str
    per_core_hour: float | None
    per_gib_hour: float | None


@dataclass(frozen=True)
class AccountStatistics:
    """Totals of the clusters in a range. ``cost`` is None when some account has no
    core price or the accounts' currencies differ (a partial sum would look complete)."""

    clusters: int
    cluster_seconds: float
    core_seconds: float
    compute_seconds: float
    memory_limit_byte_seconds: float
    bytes_processed: int
    tasks_executed: int
    tasks_erred: int
    cost: float | None
    currency: str | None
    cost_basis: list[CostBasis]


@dataclass(frozen=True)
class StatisticsView:
    range: TimeRange
    statistics: AccountStatistics


@dataclass(frozen=True)
class MemberWeeks:
    """One member's series, one value per week of :class:`MemberUsage`."""

    user: str
    cluster_hours: list[float]
    compute_hours: list[float]
    cost: list[float]
    clusters: list[int]


@dataclass(frozen=True)
class MemberUsage:
    """Weekly usage per member; ``weeks`` are the Mondays (UTC epoch seconds) of every
    week shown, with use or not (a member's series holds 0 for a week without use)."""

    weeks: list[float]
    members: list[MemberWeeks]
    since: float
    weeks_shown: int


@dataclass(frozen=True)
class UsageRow:
    """One row of the usage heat map: a member, or (``user`` None) the members after
    the top ones, summed; one value per week of :class:`UsageMap`."""

    user: str | None
    label: str
    values: list[float]
    clusters: list[int]
    #: the members summed in this row (the "others" row; empty for a member)
    grouped: list[str]


@dataclass(frozen=True)
class UsageMap:
    """Member usage as the account page draws it: a member x week heat map of one
    figure (``metric``), the top :data:`TOP_MEMBERS` members by its total first and the
    rest as one row; every week of the range is a column, used or not."""

    metric: str
    weeks: list[float]
    members: list[UsageRow]
    #: top of the colour scale: the largest member's cell (the others' sums may pass it)
    scale_max: float
    since: float
    weeks_shown: int


@dataclass(frozen=True)
class AccountView:
    """Everything on the account page, as far as the viewer may see; the usage as the
    page draws it (every member's series: :func:`usage_view`)."""

    range: TimeRange
    statistics: AccountStatistics
    usage: UsageMap
    listing: ClusterListing


def time_range(
    days: int, since: float | None = None, until: float | None = None, *, now: float | None = None
) -> TimeRange:
    """The last ``days`` days unless ``since`` is given; ValueError for an empty range."""
    if since is None and days:
        since = (time.time() if now is None else now) - days * 86400.0
    if since is not None and until is not None and until <= since:
        raise ValueError("until must be after since")
    return TimeRange(since=since, until=until, days=days)


def _bases(per_account: Sequence[Mapping[str, Any]]) -> list[CostBasis]:
    """One basis per distinct set of prices, naming the accounts it priced."""
    found: dict[tuple[Any, ...], list[str]] = {}
    for rates in per_account:
        key = (
            rates.get("account"),
            rates.get("currency", "USD"),
            rates.get("per_core_hour"),
            rates.get("per_gib_hour"),
        )
        found.setdefault(key, [])
        if rates.get("cluster_account") is not None:
            found[key].append(str(rates["cluster_account"]))
    return [
        CostBasis(
            account=entry,
            accounts=accounts,
            currency=currency,
            per_core_hour=core,
            per_gib_hour=gib,
        )
        for (entry, currency, core, gib), accounts in found.items()
    ]


def statistics_view(store: Store, chosen: TimeRange, scope: Scope = Scope()) -> StatisticsView:
    rows = store.account_totals(since=chosen.since, until=chosen.until, account=scope.account)
    totals = account_statistics(rows, cost_rates)
    # the basis lists rates in the order of the rows: one per cluster account
    basis = [
        {**b, "cluster_account": row["account"]}
        for b, row in zip(totals["cost_basis"], rows, strict=True)
    ]
    stats = AccountStatistics(
        clusters=int(totals["clusters"]),
        cluster_seconds=float(totals["cluster_seconds"]),
        core_seconds=float(totals["core_seconds"]),
        compute_seconds=float(totals["compute_seconds"]),
        memory_limit_byte_seconds=float(totals["memory_limit_byte_seconds"]),
        bytes_processed=int(totals["bytes_processed"]),
        tasks_executed=int(totals["tasks_executed"]),
        tasks_erred=int(totals["tasks_erred"]),
        cost=totals.get("cost"),
        currency=totals.get("currency"),
        cost_basis=_bases(basis),
    )
    return StatisticsView(range=chosen, statistics=stats)


def usage_view(
    store: Store, weeks: int, scope: Scope = Scope(), *, now: float | None = None
) -> MemberUsage:
    """The last ``weeks`` weeks, this one included."""
    this_week = math.floor(((time.time() if now is None else now) - MONDAY) / WEEK)
    since = MONDAY + (this_week - weeks + 1) * WEEK
    rows = store.weekly_usage(since=since, account=scope.account, user=scope.usage_of)
    usage = member_usage(rows, cost_rates)
    # every week on the axis: a week nobody used is a column of zeros, not a gap
    every = [since + i * WEEK for i in range(weeks)]
    at = {w: i for i, w in enumerate(usage["weeks"])}

    def spread(series: list[Any], zero: Any) -> list[Any]:
        return [series[at[w]] if w in at else zero for w in every]

    return MemberUsage(
        weeks=every,
        members=[
            MemberWeeks(
                user=m["user"],
                cluster_hours=spread(m["cluster_hours"], 0.0),
                compute_hours=spread(m["compute_hours"], 0.0),
                cost=spread(m["cost"], 0.0),
                clusters=spread(m["clusters"], 0),
            )
            for m in usage["members"]
        ],
        since=since,
        weeks_shown=weeks,
    )


def usage_map(usage: MemberUsage, metric: str = "cluster_hours") -> UsageMap:
    """The heat map of ``metric`` (one of :data:`USAGE_METRICS`): members ranked by its
    total (ties by name), the top :data:`TOP_MEMBERS` a row each and the rest summed in
    one "others" row (unless that would hold a single member)."""
    if metric not in USAGE_METRICS:
        raise ValueError(f"metric must be one of {', '.join(USAGE_METRICS)}, got {metric!r}")
    ranked = sorted(usage.members, key=lambda m: (-sum(getattr(m, metric)), m.user))
    shown = ranked[:TOP_MEMBERS] if len(ranked) > TOP_MEMBERS + 1 else ranked
    rows = [UsageRow(m.user, m.user, list(getattr(m, metric)), list(m.clusters), []) for m in shown]
    top = max((v for r in rows for v in r.values), default=0.0)
    rest = ranked[len(shown) :]
    if rest:
        columns = range(len(usage.weeks))
        rows.append(
            UsageRow(
                user=None,
                label=f"others ({len(rest)} members)",
                values=[sum(getattr(m, metric)[i] for m in rest) for i in columns],
                clusters=[sum(m.clusters[i] for m in rest) for i in columns],
                grouped=sorted(m.user for m in rest),
            )
        )
    return UsageMap(
        metric=metric,
        weeks=usage.weeks,
        members=rows,
        scale_max=top,
        since=usage.since,
        weeks_shown=usage.weeks_shown,
    )


def account_view(
    store: Store,
    chosen: TimeRange,
    weeks: int,
    scope: Scope = Scope(),
    listing: ListingQuery | None = None,
    metric: str = "cluster_hours",
) -> AccountView:
    """The account page; ``listing`` chooses the page of clusters (default: the newest
    :data:`PAGE_CLUSTERS`), ``metric`` the figure of the usage heat map."""
    listing = ListingQuery(limit=PAGE_CLUSTERS) if listing is None else listing
    return AccountView(
        range=chosen,
        statistics=statistics_view(store, chosen, scope).statistics,
        usage=usage_map(usage_view(store, weeks, scope), metric),
        listing=cluster_listing(store, listing, account=scope.account),
    )
