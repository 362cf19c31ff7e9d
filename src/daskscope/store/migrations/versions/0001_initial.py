"""Initial schema: one table per record kind.

Revision ID: 0001
Revises:
Create Date: 2026-11-22

Written out in full rather than derived from ``schema.metadata``: a migration is a
frozen snapshot, so later changes to the schema module must come with new revisions.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def _id() -> sa.Column[str]:
    return sa.Column("id", sa.String(), primary_key=True)


def _cluster_id() -> sa.Column[str]:
    return sa.Column("cluster_id", sa.String(), nullable=False)


def upgrade() -> None:
    op.create_table(
        "clusters",
        _id(),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("account", sa.String(), nullable=False),
        sa.Column("user", sa.String(), nullable=False),
        sa.Column("scheduler_address", sa.String(), nullable=False),
        sa.Column("dask_version", sa.String(), nullable=False),
        sa.Column("distributed_version", sa.String(), nullable=False),
        sa.Column("python_version", sa.String(), nullable=False),
        sa.Column("started_at", sa.Double(), nullable=False),
        sa.Column("stopped_at", sa.Double(), nullable=True),
        sa.Column("last_seen_at", sa.Double(), nullable=False),
        sa.Column("workers_peak", sa.Integer(), nullable=False),
        sa.Column("threads_peak", sa.Integer(), nullable=False),
        sa.Column("memory_limit_peak", sa.BigInteger(), nullable=False),
        sa.Column("core_seconds", sa.Double(), nullable=False),
        sa.Column("memory_limit_byte_seconds", sa.Double(), nullable=False),
        sa.Column("tasks_executed", sa.BigInteger(), nullable=False),
        sa.Column("tasks_erred", sa.BigInteger(), nullable=False),
        sa.Column("compute_seconds", sa.Double(), nullable=False),
        sa.Column("bytes_processed", sa.BigInteger(), nullable=False),
    )
    op.create_index("ix_clusters_account_started_at", "clusters", ["account", "started_at"])
    op.create_index("ix_clusters_user_started_at", "clusters", ["user", "started_at"])
    op.create_index("ix_clusters_started_at", "clusters", ["started_at"])

    op.create_table(
        "computations",
        _id(),
        _cluster_id(),
        sa.Column("started_at", sa.Double(), nullable=False),
        sa.Column("stopped_at", sa.Double(), nullable=True),
        sa.Column("code", JSON, nullable=False),
        sa.Column("annotations", JSON, nullable=False),
        sa.Column("tasks_executed", sa.BigInteger(), nullable=False),
        sa.Column("tasks_erred", sa.BigInteger(), nullable=False),
        sa.Column("group_count", sa.Integer(), nullable=False),
    )
    op.create_index(
        "ix_computations_cluster_id_started_at", "computations", ["cluster_id", "started_at"]
    )

    op.create_table(
        "task_groups",
        _id(),
        _cluster_id(),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("prefix", sa.String(), nullable=False),
        sa.Column("computation_id", sa.String(), nullable=True),
        sa.Column("span_id", sa.String(), nullable=True),
        sa.Column("dependencies", JSON, nullable=False),
        sa.Column("states", JSON, nullable=False),
        sa.Column("tasks_total", sa.BigInteger(), nullable=False),
        sa.Column("tasks_executed", sa.BigInteger(), nullable=False),
        sa.Column("tasks_erred", sa.BigInteger(), nullable=False),
        sa.Column("nbytes_total", sa.BigInteger(), nullable=False),
        sa.Column("duration_s", sa.Double(), nullable=False),
        sa.Column("durations", JSON, nullable=False),
        sa.Column("types", JSON, nullable=False),
        sa.Column("started_at", sa.Double(), nullable=True),
        sa.Column("stopped_at", sa.Double(), nullable=True),
    )
    op.create_index(
        "ix_task_groups_cluster_id_computation_id",
        "task_groups",
        ["cluster_id", "computation_id"],
    )

    op.create_table(
        "task_prefixes",
        _id(),
        _cluster_id(),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("group_count", sa.Integer(), nullable=False),
        sa.Column("tasks_executed", sa.BigInteger(), nullable=False),
        sa.Column("tasks_erred", sa.BigInteger(), nullable=False),
        sa.Column("nbytes_total", sa.BigInteger(), nullable=False),
        sa.Column("duration_s", sa.Double(), nullable=False),
        sa.Column("durations", JSON, nullable=False),
    )
    op.create_index("ix_task_prefixes_cluster_id", "task_prefixes", ["cluster_id"])

    op.create_table(
        "spans",
        _id(),
        _cluster_id(),
        sa.Column("span_id", sa.String(), nullable=False),
        sa.Column("parent_span_id", sa.String(), nullable=True),
        sa.Column("name", JSON, nullable=False),
        sa.Column("enqueued_at", sa.Double(), nullable=False),
        sa.Column("started_at", sa.Double(), nullable=True),
        sa.Column("stopped_at", sa.Double(), nullable=True),
        sa.Column("done", sa.Boolean(), nullable=False),
        sa.Column("states", JSON, nullable=False),
        sa.Column("nbytes_total", sa.BigInteger(), nullable=False),
        sa.Column("duration_s", sa.Double(), nullable=False),
        sa.Column("durations", JSON, nullable=False),
        sa.Column("active_cpu_seconds", sa.Double(), nullable=False),
        sa.Column("code", JSON, nullable=False),
        sa.Column("group_count", sa.Integer(), nullable=False),
    )
    op.create_index("ix_spans_cluster_id_enqueued_at", "spans", ["cluster_id", "enqueued_at"])

    op.create_table(
        "span_metrics",
        _id(),
        _cluster_id(),
        sa.Column("span_id", sa.String(), nullable=False),
        sa.Column("context", sa.String(), nullable=False),
        sa.Column("prefix", sa.String(), nullable=False),
        sa.Column("activity", sa.String(), nullable=False),
        sa.Column("unit", sa.String(), nullable=False),
        sa.Column("value", sa.Double(), nullable=False),
    )
    op.create_index("ix_span_metrics_cluster_id_span_id", "span_metrics", ["cluster_id", "span_id"])

    op.create_table(
        "worker_samples",
        _id(),
        _cluster_id(),
        sa.Column("worker", sa.String(), nullable=False),
        sa.Column("sampled_at", sa.Double(), nullable=False),
        sa.Column("nthreads", sa.Integer(), nullable=False),
        sa.Column("memory_limit", sa.BigInteger(), nullable=True),
        sa.Column("memory", sa.BigInteger(), nullable=True),
        sa.Column("managed_bytes", sa.BigInteger(), nullable=True),
        sa.Column("spilled_bytes", sa.BigInteger(), nullable=True),
        sa.Column("cpu_percent", sa.Double(), nullable=True),
        sa.Column("executing", sa.Integer(), nullable=False),
        sa.Column("processing", sa.Integer(), nullable=False),
        sa.Column("transfer_incoming_bytes", sa.BigInteger(), nullable=True),
        sa.Column("transfer_outgoing_bytes", sa.BigInteger(), nullable=True),
        sa.Column("net_read_bps", sa.Double(), nullable=True),
        sa.Column("net_write_bps", sa.Double(), nullable=True),
        sa.Column("disk_read_bps", sa.Double(), nullable=True),
        sa.Column("disk_write_bps", sa.Double(), nullable=True),
    )
    op.create_index(
        "ix_worker_samples_cluster_id_sampled_at",
        "worker_samples",
        ["cluster_id", "sampled_at"],
    )

    op.create_table(
        "events",
        _id(),
        _cluster_id(),
        sa.Column("at", sa.Double(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("worker", sa.String(), nullable=True),
        sa.Column("detail", JSON, nullable=False),
    )
    op.create_index("ix_events_cluster_id_at", "events", ["cluster_id", "at"])

    op.create_table(
        "errors",
        _id(),
        _cluster_id(),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("at", sa.Double(), nullable=False),
        sa.Column("group", sa.String(), nullable=False),
        sa.Column("prefix", sa.String(), nullable=False),
        sa.Column("group_id", sa.String(), nullable=True),
        sa.Column("worker", sa.String(), nullable=True),
        sa.Column("exception", sa.Text(), nullable=False),
        sa.Column("traceback", sa.Text(), nullable=False),
    )
    op.create_index("ix_errors_cluster_id_at", "errors", ["cluster_id", "at"])

    op.create_table(
        "profiles",
        _id(),
        _cluster_id(),
        sa.Column("started_at", sa.Double(), nullable=False),
        sa.Column("stopped_at", sa.Double(), nullable=False),
        sa.Column("samples", sa.BigInteger(), nullable=False),
        sa.Column("tree", JSON, nullable=False),
    )
    op.create_index("ix_profiles_cluster_id_started_at", "profiles", ["cluster_id", "started_at"])


def downgrade() -> None:
    for table in (
        "profiles",
        "errors",
        "events",
        "worker_samples",
        "span_metrics",
        "spans",
        "task_prefixes",
        "task_groups",
        "computations",
        "clusters",
    ):
        op.drop_table(table)
