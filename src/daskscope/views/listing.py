"""A cluster's headline statistics, and the cluster listing (``daskscope clusters``,
the account page, ``/api/v1/clusters``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from daskscope.analysis import RatesOf, cluster_statistics
from daskscope.pricing import cost_rates
from daskscope.store import Store
from daskscope.store.analytics import clusters_in_week

__all__ = [
    "ClusterListing",
    "ClusterStatistics",
    "ClusterSummary",
    "Cost",
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
    statistics: ClusterStatistics


@dataclass(frozen=True)
class ClusterListing:
    """The listing, newest first, and the filter that chose it."""

    user: str | None
    week_start: float | None
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


def cluster_list(
    store: Store,
    *,
    limit: int | None = 100,
    account: str | None = None,
    user: str | None = None,
    week_start: float | None = None,
    since: float | None = None,
    until: float | None = None,
) -> list[ClusterSummary]:
    """Clusters newest first, optionally of one account, one member and one week (from
    ``week_start``, a Monday) or started in ``[since, until)``."""
    rows = clusters_in_week(
        store,
        user=user,
        week_start=week_start,
        since=since,
        until=until,
        limit=limit,
        account=account,
    )
    rates = _cached(cost_rates)
    return [
        ClusterSummary(
            id=row["id"],
            name=row["name"],
            account=row["account"],
            user=row["user"],
            started_at=row["started_at"],
            stopped_at=row["stopped_at"],
            statistics=statistics_of(row, rates),
        )
        for row in rows
    ]


def cluster_listing(
    store: Store,
    *,
    limit: int | None = 100,
    account: str | None = None,
    user: str | None = None,
    week_start: float | None = None,
) -> ClusterListing:
    """:func:`cluster_list` with the filter that chose it."""
    clusters = cluster_list(store, limit=limit, account=account, user=user, week_start=week_start)
    return ClusterListing(user=user, week_start=week_start, clusters=clusters)
