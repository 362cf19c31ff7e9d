"""Views: what is shown of a cluster, a computation, an account and the cluster listing,
as typed, frozen dataclasses built from the store and the analyses.

The CLI's ``--json``, the JSON API and the pages all render these, encoded one way
(:func:`to_json`), so each concept has one shape. Imports flow store/analysis → views
→ cli/web, never back.
"""

from __future__ import annotations

from daskscope.views.account import (
    AccountStatistics,
    AccountView,
    MemberUsage,
    Scope,
    StatisticsView,
    TimeRange,
    account_view,
    statistics_view,
    time_range,
    usage_view,
)
from daskscope.views.cluster import ClusterView, cluster_view
from daskscope.views.computation import ComputationGraph, computation_view
from daskscope.views.encode import to_data, to_json, to_pretty_json
from daskscope.views.groups import GroupPage, group_page_view
from daskscope.views.listing import (
    ClusterListing,
    ClusterStatistics,
    ClusterSummary,
    cluster_list,
    cluster_listing,
)

__all__ = [
    "AccountStatistics",
    "AccountView",
    "ClusterListing",
    "ClusterStatistics",
    "ClusterSummary",
    "ClusterView",
    "ComputationGraph",
    "GroupPage",
    "MemberUsage",
    "Scope",
    "StatisticsView",
    "TimeRange",
    "account_view",
    "cluster_list",
    "cluster_listing",
    "cluster_view",
    "computation_view",
    "group_page_view",
    "statistics_view",
    "time_range",
    "to_data",
    "to_json",
    "to_pretty_json",
    "usage_view",
]
