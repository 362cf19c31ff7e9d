"""A cluster's headline statistics, and the cluster listing (``daskscope clusters``,
the account page, ``/api/v1/clusters``): searched, filtered, sorted and paged by the
database, with the number of matches."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from daskscope.analysis import RatesOf, cluster_statistics
from daskscope.pricing import cost_rates
from daskscope.store import Store
from daskscope.store.analytics import RUNNING_WITHIN, SORTS, WEEK, Prices

__all__ = [
    "SORTS",
    "ClusterListing",
    "ClusterStatistics",
    "ClusterSummary",
    "Cost",
    "ListingQuery",
    "cluster_list",
    "cluster_listing",
    "statistics_of",
]


@dataclass(frozen=True)
class Cost:
    """What a cluster cost: core-hours x per-core-hour + GiB-hours x per-gib-hour."""

    total: float
    cores: float
    memory: float
    currency: str
    per_core_hour: float
    per_gib_hour: float | None
    #: the entry of ``daskscope.cost`` whose prices applied
    account: str | None


@dataclass(frozen=True)
class ClusterStatistics:
    """Headline numbers of one cluster; None: not measured (or no price known)."""

    duration_s: float | None
    workers_peak: int
    threads_peak: int
    core_hours: float
    compute_hours: float
    memory_gib_hours: float
    #: compute seconds / core seconds
    utilisation: float | None
    tasks_executed: int
    tasks_erred: int
    bytes_processed: int
    cost: Cost | None


@dataclass(frozen=True)
class ClusterSummary:
    """One line of the cluster listing."""

    id: str
    name: str
    account: str
    user: str
    started_at: float
    stopped_at: float | None
    #: no stop recorded and written recently (``store.analytics.RUNNING_WITHIN``)
    running: bool
    statistics: ClusterStatistics


@dataclass(frozen=True)
class ListingQuery:
    """Which clusters a listing shows and in what order: ``q`` a substring of the name
    or user, ``user`` one member, ``week_start`` the week from that Monday, ``[since,
    until)`` start times, ``errors`` only clusters with errored tasks, ``running`` only
    running ones; sorted by ``sort`` (one of :data:`SORTS`) in ``order``; ``limit``
    clusters from ``offset``."""

    q: str | None = None
    user: str | None = None
    week_start: float | None = None
    since: float | None = None
    until: float | None = None
    errors: bool = False
    running: bool = False
    sort: str = "started"
    order: Literal["asc", "desc"] = "desc"
    offset: int = 0
    limit: int = 100


@dataclass(frozen=True)
class ClusterListing:
    """One page of the listing: ``total`` clusters match ``query``; ``clusters`` are
    those from ``query.offset``."""

    query: ListingQuery
    total: int
    clusters: list[ClusterSummary]


def statistics_of(cluster: Mapping[str, Any], rates: RatesOf = cost_rates) -> ClusterStatistics:
    """:func:`daskscope.analysis.cluster_statistics` of a clusters row, priced by
    ``rates`` (the account's prices from config by default)."""
    stats = cluster_statistics(cluster, rates(cluster.get("account")))
    cost = stats.get("cost")
    return ClusterStatistics(
        duration_s=stats.get("duration_s"),
        workers_peak=stats["workers_peak"],
        threads_peak=stats["threads_peak"],
        core_hours=stats["core_hours"],
        compute_hours=stats["compute_hours"],
        memory_gib_hours=stats["memory_gib_hours"],
        utilisation=stats.get("utilisation"),
        tasks_executed=stats["tasks_executed"],
        tasks_erred=stats["tasks_erred"],
        bytes_processed=stats["bytes_processed"],
        cost=None if cost is None else Cost(**cost),
    )


def _cached(rates: RatesOf) -> RatesOf:
    seen: dict[str | None, Mapping[str, Any]] = {}

    def lookup(account: str | None) -> Mapping[str, Any]:
        if account not in seen:
            seen[account] = rates(account)
        return seen[account]

    return lookup


def _prices(rates: RatesOf) -> Prices:
    def prices(account: str) -> tuple[float | None, float | None]:
        found = rates(account)
        return found.get("per_core_hour"), found.get("per_gib_hour")

    return prices


def _summary(row: Mapping[str, Any], rates: RatesOf, now: float) -> ClusterSummary:
    return ClusterSummary(
        id=row["id"],
        name=row["name"],
        account=row["account"],
        user=row["user"],
        started_at=row["started_at"],
        stopped_at=row["stopped_at"],
        running=row["stopped_at"] is None and row["last_seen_at"] >= now - RUNNING_WITHIN,
        statistics=statistics_of(row, rates),
    )


def cluster_listing(
    store: Store,
    query: ListingQuery = ListingQuery(),
    *,
    account: str | None = None,
    now: float | None = None,
) -> ClusterListing:
    """The page of clusters ``query`` asks for (of one account, when given), with the
    number matching in all. ValueError for an unknown sort."""
    now = time.time() if now is None else now
    since, until = query.since, query.until
    if query.week_start is not None:
        week_end = query.week_start + WEEK
        since = query.week_start if since is None else max(since, query.week_start)
        until = week_end if until is None else min(until, week_end)
    rates = _cached(cost_rates)
    total, rows = store.cluster_page(
        now=now,
        prices=_prices(rates),
        account=account,
        q=query.q or None,
        user=query.user,
        since=since,
        until=until,
        errors=query.errors,
        running=query.running,
        sort=query.sort,
        descending=query.order == "desc",
        offset=query.offset,
        limit=query.limit,
    )
    return ClusterListing(
        query=query, total=total, clusters=[_summary(r, rates, now) for r in rows]
    )


def cluster_list(
    store: Store,
    *,
    limit: int = 100,
    account: str | None = None,
    user: str | None = None,
    week_start: float | None = None,
) -> list[ClusterSummary]:
    """The newest ``limit`` clusters, optionally of one account, member and week."""
    query = ListingQuery(user=user, week_start=week_start, limit=limit)
    return cluster_listing(store, query, account=account).clusters
