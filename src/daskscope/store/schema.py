"""The database schema: one table per record kind, columns named like the fields.

This module describes the *current* schema; the migrations under ``migrations/``
create it step by step and a test checks that both agree.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from daskscope import model

__all__ = ["TABLES", "TABLE_FOR", "metadata"]

# JSONB on PostgreSQL (smaller, indexable); JSON text elsewhere.
JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
# Epoch seconds need double precision: REAL/FLOAT(24) would lose sub-second detail.
Time = sa.Double


def _id() -> sa.Column:
    # Ids are stable_id() strings: uuid5, so a batch written twice is stored once.
    return sa.Column("id", sa.String, primary_key=True)


def _cluster_id() -> sa.Column:
    # No foreign key: a cluster's records may arrive before the cluster row.
    return sa.Column("cluster_id", sa.String, nullable=False)


metadata = sa.MetaData()

clusters = sa.Table(
    "clusters",
    metadata,
    _id(),
    sa.Column("name", sa.String, nullable=False),
    sa.Column("account", sa.String, nullable=False),
    sa.Column("user", sa.String, nullable=False),
    sa.Column("scheduler_address", sa.String, nullable=False),
    sa.Column("dask_version", sa.String, nullable=False),
    sa.Column("distributed_version", sa.String, nullable=False),
    sa.Column("python_version", sa.String, nullable=False),
    sa.Column("started_at", Time, nullable=False),
    sa.Column("stopped_at", Time, nullable=True),
    sa.Column("last_seen_at", Time, nullable=False),
    sa.Column("workers_peak", sa.Integer, nullable=False),
    sa.Column("threads_peak", sa.Integer, nullable=False),
    sa.Column("memory_limit_peak", sa.BigInteger, nullable=False),
    sa.Column("core_seconds", sa.Double, nullable=False),
    sa.Column("memory_limit_byte_seconds", sa.Double, nullable=False),
    sa.Column("tasks_executed", sa.BigInteger, nullable=False),
    sa.Column("tasks_erred", sa.BigInteger, nullable=False),
    sa.Column("compute_seconds", sa.Double, nullable=False),
    sa.Column("bytes_processed", sa.BigInteger, nullable=False),
    sa.Index("ix_clusters_account_started_at", "account", "started_at"),
    sa.Index("ix_clusters_user_started_at", "user", "started_at"),
    sa.Index("ix_clusters_started_at", "started_at"),
)

computations = sa.Table(
    "computations",
    metadata,
    _id(),
    _cluster_id(),
    sa.Column("started_at", Time, nullable=False),
    sa.Column("stopped_at", Time, nullable=True),
    sa.Column("code", JSON, nullable=False),
    sa.Column("annotations", JSON, nullable=False),
    sa.Column("tasks_executed", sa.BigInteger, nullable=False),
    sa.Column("tasks_erred", sa.BigInteger, nullable=False),
    sa.Column("group_count", sa.Integer, nullable=False),
    sa.Index("ix_computations_cluster_id_started_at", "cluster_id", "started_at"),
)

task_groups = sa.Table(
    "task_groups",
    metadata,
    _id(),
    _cluster_id(),
    sa.Column("name", sa.String, nullable=False),
    sa.Column("prefix", sa.String, nullable=False),
    sa.Column("computation_id", sa.String, nullable=True),
    sa.Column("span_id", sa.String, nullable=True),
    sa.Column("dependencies", JSON, nullable=False),
    sa.Column("states", JSON, nullable=False),
    sa.Column("tasks_total", sa.BigInteger, nullable=False),
    sa.Column("tasks_executed", sa.BigInteger, nullable=False),
    sa.Column("tasks_erred", sa.BigInteger, nullable=False),
    sa.Column("nbytes_total", sa.BigInteger, nullable=False),
    sa.Column("duration_s", sa.Double, nullable=False),
    sa.Column("durations", JSON, nullable=False),
    sa.Column("types", JSON, nullable=False),
    sa.Column("started_at", Time, nullable=True),
    sa.Column("stopped_at", Time, nullable=True),
    # Leads with cluster_id, so it also serves "all groups of a cluster".
    sa.Index("ix_task_groups_cluster_id_computation_id", "cluster_id", "computation_id"),
)

task_prefixes = sa.Table(
    "task_prefixes",
    metadata,
    _id(),
    _cluster_id(),
    sa.Column("name", sa.String, nullable=False),
    sa.Column("group_count", sa.Integer, nullable=False),
    sa.Column("tasks_executed", sa.BigInteger, nullable=False),
    sa.Column("tasks_erred", sa.BigInteger, nullable=False),
    sa.Column("nbytes_total", sa.BigInteger, nullable=False),
    sa.Column("duration_s", sa.Double, nullable=False),
    sa.Column("durations", JSON, nullable=False),
    sa.Index("ix_task_prefixes_cluster_id", "cluster_id"),
)

spans = sa.Table(
    "spans",
    metadata,
    _id(),
    _cluster_id(),
    sa.Column("span_id", sa.String, nullable=False),
    sa.Column("parent_span_id", sa.String, nullable=True),
    sa.Column("name", JSON, nullable=False),
    sa.Column("enqueued_at", Time, nullable=False),
    sa.Column("started_at", Time, nullable=True),
    sa.Column("stopped_at", Time, nullable=True),
    sa.Column("done", sa.Boolean, nullable=False),
    sa.Column("states", JSON, nullable=False),
    sa.Column("nbytes_total", sa.BigInteger, nullable=False),
    sa.Column("duration_s", sa.Double, nullable=False),
    sa.Column("durations", JSON, nullable=False),
    sa.Column("active_cpu_seconds", sa.Double, nullable=False),
    sa.Column("code", JSON, nullable=False),
    sa.Column("group_count", sa.Integer, nullable=False),
    sa.Index("ix_spans_cluster_id_enqueued_at", "cluster_id", "enqueued_at"),
)

span_metrics = sa.Table(
    "span_metrics",
    metadata,
    _id(),
    _cluster_id(),
    sa.Column("span_id", sa.String, nullable=False),
    sa.Column("context", sa.String, nullable=False),
    sa.Column("prefix", sa.String, nullable=False),
    sa.Column("activity", sa.String, nullable=False),
    sa.Column("unit", sa.String, nullable=False),
    sa.Column("value", sa.Double, nullable=False),
    sa.Index("ix_span_metrics_cluster_id_span_id", "cluster_id", "span_id"),
)

worker_samples = sa.Table(
    "worker_samples",
    metadata,
    _id(),
    _cluster_id(),
    sa.Column("worker", sa.String, nullable=False),
    sa.Column("sampled_at", Time, nullable=False),
    sa.Column("nthreads", sa.Integer, nullable=False),
    sa.Column("memory_limit", sa.BigInteger, nullable=True),
    sa.Column("memory", sa.BigInteger, nullable=True),
    sa.Column("managed_bytes", sa.BigInteger, nullable=True),
    sa.Column("unmanaged_bytes", sa.BigInteger, nullable=True),
    sa.Column("unmanaged_old_bytes", sa.BigInteger, nullable=True),
    sa.Column("unmanaged_recent_bytes", sa.BigInteger, nullable=True),
    sa.Column("spilled_bytes", sa.BigInteger, nullable=True),
    sa.Column("cpu_percent", sa.Double, nullable=True),
    sa.Column("executing", sa.Integer, nullable=False),
    sa.Column("processing", sa.Integer, nullable=False),
    sa.Column("transfer_incoming_bytes", sa.BigInteger, nullable=True),
    sa.Column("transfer_outgoing_bytes", sa.BigInteger, nullable=True),
    sa.Column("net_read_bps", sa.Double, nullable=True),
    sa.Column("net_write_bps", sa.Double, nullable=True),
    sa.Column("disk_read_bps", sa.Double, nullable=True),
    sa.Column("disk_write_bps", sa.Double, nullable=True),
    # NULL in samples stored before 0004: their other metrics were not recorded
    sa.Column("metrics", JSON, nullable=True),
    sa.Index("ix_worker_samples_cluster_id_sampled_at", "cluster_id", "sampled_at"),
)

events = sa.Table(
    "events",
    metadata,
    _id(),
    _cluster_id(),
    sa.Column("at", Time, nullable=False),
    sa.Column("kind", sa.String, nullable=False),
    sa.Column("worker", sa.String, nullable=True),
    sa.Column("detail", JSON, nullable=False),
    sa.Index("ix_events_cluster_id_at", "cluster_id", "at"),
)

errors = sa.Table(
    "errors",
    metadata,
    _id(),
    _cluster_id(),
    sa.Column("key", sa.Text, nullable=False),
    sa.Column("at", Time, nullable=False),
    sa.Column("group", sa.String, nullable=False),
    sa.Column("prefix", sa.String, nullable=False),
    sa.Column("group_id", sa.String, nullable=True),
    sa.Column("worker", sa.String, nullable=True),
    sa.Column("exception", sa.Text, nullable=False),
    sa.Column("traceback", sa.Text, nullable=False),
    sa.Index("ix_errors_cluster_id_at", "cluster_id", "at"),
)

profiles = sa.Table(
    "profiles",
    metadata,
    _id(),
    _cluster_id(),
    sa.Column("started_at", Time, nullable=False),
    sa.Column("stopped_at", Time, nullable=False),
    sa.Column("samples", sa.BigInteger, nullable=False),
    sa.Column("tree", JSON, nullable=False),
    sa.Index("ix_profiles_cluster_id_started_at", "cluster_id", "started_at"),
)

workflow_runs = sa.Table(
    "workflow_runs",
    metadata,
    _id(),
    # Nullable: a run on a cluster without a recorder belongs to no recorded cluster
    sa.Column("cluster_id", sa.String, nullable=True),
    sa.Column("name", sa.String, nullable=False),
    sa.Column("backend", sa.String, nullable=False),
    sa.Column("started_at", Time, nullable=False),
    sa.Column("stopped_at", Time, nullable=False),
    sa.Column("wall_time_s", sa.Double, nullable=False),
    sa.Column("span_id", sa.String, nullable=True),
    sa.Column("computation_ids", JSON, nullable=False),
    sa.Column("chunk_count", sa.Integer, nullable=False),
    sa.Column("metrics", JSON, nullable=False),
    sa.Column("sections", JSON, nullable=False),
    sa.Column("coffea_report", JSON, nullable=True),
    sa.Column("info", JSON, nullable=False),
    # Who sent it: a server sets the token's; NULL only for runs stored before owners
    sa.Column("account", sa.String, nullable=True),
    sa.Column("user", sa.String, nullable=True),
    sa.Index("ix_workflow_runs_started_at", "started_at"),
    sa.Index("ix_workflow_runs_account_started_at", "account", "started_at"),
    sa.Index("ix_workflow_runs_cluster_id_started_at", "cluster_id", "started_at"),
)

workflow_chunks = sa.Table(
    "workflow_chunks",
    metadata,
    _id(),
    sa.Column("run_id", sa.String, nullable=False),
    sa.Column("cluster_id", sa.String, nullable=True),
    sa.Column("chunk_index", sa.Integer, nullable=False),
    sa.Column("started_at", Time, nullable=True),
    sa.Column("stopped_at", Time, nullable=True),
    sa.Column("dataset", sa.String, nullable=True),
    sa.Column("filename", sa.Text, nullable=True),
    sa.Column("entry_start", sa.BigInteger, nullable=True),
    sa.Column("entry_stop", sa.BigInteger, nullable=True),
    sa.Column("events", sa.BigInteger, nullable=True),
    sa.Column("bytes_read", sa.BigInteger, nullable=True),
    sa.Column("wall_s", sa.Double, nullable=True),
    sa.Column("cpu_s", sa.Double, nullable=True),
    sa.Column("memory_before_bytes", sa.BigInteger, nullable=True),
    sa.Column("memory_after_bytes", sa.BigInteger, nullable=True),
    sa.Column("memory_peak_bytes", sa.BigInteger, nullable=True),
    sa.Column("worker", sa.String, nullable=True),
    sa.Column("task_key", sa.Text, nullable=True),
    sa.Column("detail", JSON, nullable=False),
    sa.Index("ix_workflow_chunks_run_id_chunk_index", "run_id", "chunk_index"),
    sa.Index("ix_workflow_chunks_cluster_id", "cluster_id"),
)

TABLE_FOR: dict[type, sa.Table] = {
    model.ClusterRecord: clusters,
    model.ComputationRecord: computations,
    model.TaskGroupRecord: task_groups,
    model.TaskPrefixRecord: task_prefixes,
    model.SpanRecord: spans,
    model.SpanMetricRecord: span_metrics,
    model.WorkerSampleRecord: worker_samples,
    model.EventRecord: events,
    model.ErrorRecord: errors,
    model.ProfileRecord: profiles,
    model.WorkflowRunRecord: workflow_runs,
    model.WorkflowChunkRecord: workflow_chunks,
}

TABLES: dict[str, sa.Table] = {t.name: t for t in TABLE_FOR.values()}

# Browser logins: only the SHA-256 of a session id is kept. A session ends at its
# expiry, at logout, or when the token that opened it is revoked (looked up each time).
sessions = sa.Table(
    "sessions",
    metadata,
    sa.Column("id_hash", sa.String, primary_key=True),
    sa.Column("token_id", sa.String, nullable=False),
    sa.Column("created_at", Time, nullable=False),
    sa.Column("expires_at", Time, nullable=False),
    sa.Index("ix_sessions_token_id", "token_id"),
    sa.Index("ix_sessions_expires_at", "expires_at"),
)
