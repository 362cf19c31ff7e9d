"""The account as shown on its page (``/``) and by the account routes: totals over a
time range with cost, weekly usage per member, and the cluster listing."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from daskscope.analysis.usage import account_statistics, member_usage
from daskscope.pricing import cost_rates
from daskscope.store import Store
from daskscope.store.analytics import MONDAY, WEEK, account_totals, weekly_usage
from daskscope.views.listing import ClusterSummary, cluster_list

__all__ = [
    "AccountStatistics",
    "AccountView",
    "CostBasis",
    "MemberUsage",
    "MemberWeeks",
    "Scope",
    "StatisticsView",
    "TimeRange",
    "account_view",
    "statistics_view",
    "time_range",
    "usage_view",
]

#: Clusters listed on the account page
PAGE_CLUSTERS = 100


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
    """The prices one account's clusters were costed at (None: no such price)."""

    #: the entry of ``daskscope.cost`` that applied (None: none did)
    account: str | None
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
    """Weekly usage per member; ``weeks`` are the Mondays (UTC epoch seconds) with use."""

    weeks: list[float]
    members: list[MemberWeeks]
    since: float
    weeks_shown: int


@dataclass(frozen=True)
class AccountView:
    """Everything on the account page, as far as the viewer may see."""

    range: TimeRange
    statistics: AccountStatistics
    usage: MemberUsage
    clusters: list[ClusterSummary]


def time_range(
    days: int, since: float | None = None, until: float | None = None, *, now: float | None = None
) -> TimeRange:
    """The last ``days`` days unless ``since`` is given; ValueError for an empty range."""
    if since is None and days:
        since = (time.time() if now is None else now) - days * 86400.0
    if since is not None and until is not None and until <= since:
        raise ValueError("until must be after since")
    return TimeRange(since=since, until=until, days=days)


def _basis(rates: Mapping[str, Any]) -> CostBasis:
    return CostBasis(
        account=rates.get("account"),
        currency=rates.get("currency", "USD"),
        per_core_hour=rates.get("per_core_hour"),
        per_gib_hour=rates.get("per_gib_hour"),
    )


def statistics_view(store: Store, chosen: TimeRange, scope: Scope = Scope()) -> StatisticsView:
    totals = account_statistics(
        account_totals(store, since=chosen.since, until=chosen.until, account=scope.account),
        cost_rates,
    )
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
        cost_basis=[_basis(b) for b in totals["cost_basis"]],
    )
    return StatisticsView(range=chosen, statistics=stats)


def usage_view(
    store: Store, weeks: int, scope: Scope = Scope(), *, now: float | None = None
) -> MemberUsage:
    """The last ``weeks`` weeks, this one included."""
    this_week = math.floor(((time.time() if now is None else now) - MONDAY) / WEEK)
    since = MONDAY + (this_week - weeks + 1) * WEEK
    rows = weekly_usage(store, since=since, account=scope.account, user=scope.usage_of)
    usage = member_usage(rows, cost_rates)
    return MemberUsage(
        weeks=usage["weeks"],
        members=[
            MemberWeeks(
                user=m["user"],
                cluster_hours=m["cluster_hours"],
                compute_hours=m["compute_hours"],
                cost=m["cost"],
                clusters=m["clusters"],
            )
            for m in usage["members"]
        ],
        since=since,
        weeks_shown=weeks,
    )


def account_view(
    store: Store, chosen: TimeRange, weeks: int, scope: Scope = Scope()
) -> AccountView:
    return AccountView(
        range=chosen,
        statistics=statistics_view(store, chosen, scope).statistics,
        usage=usage_view(store, weeks, scope),
        clusters=cluster_list(store, limit=PAGE_CLUSTERS, account=scope.account),
    )
