"""The store's reads as methods of the Store: the door the views and the routes ask.

Each method is the store module's function with the store as its first argument
(``store.cluster_detail(cid)`` is :func:`daskscope.store.queries.cluster_detail`), so the
function's docstring and signature are the method's. A view or a route asks the Store
and never writes SQL or names a table (``tests/test_layers.py`` checks it); a new read
is a function in the store module of its tables, named here.

The task log's reads are here too (``store.timeline_window(cid)`` is
:func:`daskscope.tasklog.window.timeline_window`): their modules sit in the task log's
package (:mod:`daskscope.tasklog`) and import :mod:`.database`, never :mod:`.engine`.
"""

from __future__ import annotations

from daskscope.store import (
    advice,
    advice_facts,
    alerts,
    analytics,
    audit,
    compare,
    export_reads,
    groups,
    history,
    identity,
    queries,
    reports,
    retention,
    runs,
    series,
    span_cost,
    totals,
)
from daskscope.store.database import Database
from daskscope.tasklog import lookups, scan, window
from daskscope.tasklog import reads as tasklog_reads

__all__ = ["StoreReads"]


class StoreReads(Database):
    """Every read of the store (and the few writes the server makes on a member's
    behalf: its sessions, reports and audit events stay functions of their modules)."""

    # clusters (store/queries.py)
    list_clusters = queries.list_clusters
    resolve_cluster_id = queries.resolve_cluster_id
    cluster_name = queries.cluster_name
    cluster_detail = queries.cluster_detail
    worker_samples = queries.worker_samples
    profile_trees = queries.profile_trees
    table_counts = queries.table_counts

    # computations and their task groups (store/groups.py)
    computation_row = groups.computation_row
    computation_ids_starting = groups.computation_ids_starting
    computation_fingerprint = groups.computation_fingerprint
    computation_graph_rows = groups.computation_graph_rows
    computation_graph_groups = groups.computation_graph_groups
    computation_group_totals = groups.computation_group_totals
    task_group_page = groups.task_group_page
    span_scope = groups.span_scope

    # the listing, the account page and usage (store/analytics.py)
    cluster_page = analytics.cluster_page
    account_totals = analytics.account_totals
    weekly_usage = analytics.weekly_usage
    worker_events = analytics.worker_events

    # runs of a workflow (store/runs.py)
    list_runs = runs.list_runs
    count_runs = runs.count_runs
    run_users = runs.run_users
    resolve_run_id = runs.resolve_run_id
    run_detail = runs.run_detail

    # history and regressions (store/history.py)
    cluster_runs = history.cluster_runs
    span_runs = history.span_runs
    workflow_runs = history.workflow_runs
    recurring_names = history.recurring_names
    run_count = history.run_count

    # comparisons (store/compare.py)
    cluster_side = compare.cluster_side
    computation_side = compare.computation_side
    run_side = compare.run_side
    span_side = compare.span_side

    # costs, totals and fine metrics
    span_cost_sums = span_cost.span_cost_sums
    root_spans = span_cost.root_spans
    cluster_row = span_cost.cluster_row
    computation_task_seconds = span_cost.computation_task_seconds
    cluster_totals = totals.cluster_totals
    prefix_totals = totals.prefix_totals
    fine_metric_seconds = totals.fine_metric_seconds
    fine_metric_interval_seconds = totals.fine_metric_interval_seconds
    span_tree_rows = series.span_tree_rows
    fine_metric_intervals = series.fine_metric_intervals

    # advice
    brief_groups = advice.brief_groups
    run_filenames = advice_facts.run_filenames

    # members, reports and the audit log
    identity_for_token = identity.identity_for_token
    list_members = identity.list_members
    list_reports = reports.list_reports
    read_report = reports.read_report
    report_info = reports.report_info
    audit_page = audit.audit_page
    export_events = audit.export_events

    # the task log (daskscope.tasklog): a window, a key's executions, the slowest, the
    # transfers, how much it holds, and every execution in order (the exports')
    timeline_window = window.timeline_window
    task_executions = lookups.task_executions
    slowest_tasks = lookups.slowest_tasks
    transfers = lookups.transfers
    timeline_extent = lookups.timeline_extent
    log_version = tasklog_reads.log_version
    scan_segments = scan.scan_segments
    log_extent = scan.log_extent

    # what the exports read that no page does (store/export_reads.py)
    erred_groups = export_reads.erred_groups
    group_log_times = export_reads.group_log_times

    # retention (store/retention.py): the policy and what a prune removed
    task_log_days = retention.task_log_days
    account_policies = retention.account_policies
    expired_clusters = retention.expired_clusters
    pruned_task_log = retention.pruned_task_log

    # alerts (store/alerts.py): the conditions the rules watch, the rules, the history
    failed_clusters = alerts.failed_clusters
    idle_clusters = alerts.idle_clusters
    stored_rules = alerts.stored_rules
    alert_history = alerts.alert_history
