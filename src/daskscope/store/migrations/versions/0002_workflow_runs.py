"""Workflow runs and their chunks (MetricsCollector).

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23

Written out in full, like 0001: a migration is a frozen snapshot of the schema.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "workflow_runs",
        sa.Column("id", sa.String(), primary_key=True),
        sa.Column("cluster_id", sa.String(), nullable=True),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("backend", sa.String(), nullable=False),
        sa.Column("started_at", sa.Double(), nullable=False),
        sa.Column("stopped_at", sa.Double(), nullable=False),
        sa.Column("wall_time_s", sa.Double(), nullable=False),
        sa.Column("span_id", sa.String(), nullable=True),
        sa.Column("computation_ids", JSON, nullable=False),
        sa.Column("chunk_count", sa.Integer(), nullable=False),
        sa.Column("metrics", JSON, nullable=False),
        sa.Column("sections", JSON, nullable=False),
        sa.Column("coffea_report", JSON, nullable=True),
        sa.Column("info", JSON, nullable=False),
    )
    op.create_index("ix_workflow_runs_started_at", "workflow_runs", ["started_at"])
    op.create_index(
        "ix_workflow_runs_cluster_id_started_at", "workflow_runs", ["cluster_id", "started_at"]
    )
    op.create_table(
        "workflow_chunks",
        sa.Column("id", sa.String(), primary_key=True),
        sa.Column("run_id", sa.String(), nullable=False),
        sa.Column("cluster_id", sa.String(), nullable=True),
        sa.Column("chunk_index", sa.Integer(), nullable=False),
        sa.Column("started_at", sa.Double(), nullable=True),
        sa.Column("stopped_at", sa.Double(), nullable=True),
        sa.Column("dataset", sa.String(), nullable=True),
        sa.Column("filename", sa.Text(), nullable=True),
        sa.Column("entry_start", sa.BigInteger(), nullable=True),
        sa.Column("entry_stop", sa.BigInteger(), nullable=True),
        sa.Column("events", sa.BigInteger(), nullable=True),
        sa.Column("bytes_read", sa.BigInteger(), nullable=True),
        sa.Column("wall_s", sa.Double(), nullable=True),
        sa.Column("cpu_s", sa.Double(), nullable=True),
        sa.Column("memory_before_bytes", sa.BigInteger(), nullable=True),
        sa.Column("memory_after_bytes", sa.BigInteger(), nullable=True),
        sa.Column("memory_peak_bytes", sa.BigInteger(), nullable=True),
        sa.Column("worker", sa.String(), nullable=True),
        sa.Column("task_key", sa.Text(), nullable=True),
        sa.Column("detail", JSON, nullable=False),
    )
    op.create_index(
        "ix_workflow_chunks_run_id_chunk_index", "workflow_chunks", ["run_id", "chunk_index"]
    )
    op.create_index("ix_workflow_chunks_cluster_id", "workflow_chunks", ["cluster_id"])


def downgrade() -> None:
    op.drop_table("workflow_chunks")
    op.drop_table("workflow_runs")
