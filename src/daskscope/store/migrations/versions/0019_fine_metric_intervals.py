"""Fine metrics as time series: what the spans' fine metrics gained flush by flush.

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-27

``fine_metric_intervals`` holds one row per cluster, flush interval and
``(context, activity, unit)`` that moved in it (``model.FineMetricIntervalRecord``):
the cluster page's "where the time went, interval by interval" and the monotonic
fine-metric counters of ``/metrics`` read it. Clusters recorded before this migration
keep their totals (``span_metrics``) and have no intervals.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "fine_metric_intervals",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("cluster_id", sa.String(), nullable=False),
        sa.Column("started_at", sa.Double(), nullable=False),
        sa.Column("stopped_at", sa.Double(), nullable=False),
        sa.Column("context", sa.String(), nullable=False),
        sa.Column("activity", sa.String(), nullable=False),
        sa.Column("unit", sa.String(), nullable=False),
        sa.Column("value", sa.Double(), nullable=False),
        sa.Column("revision", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        "ix_fine_metric_intervals_cluster_id_started_at",
        "fine_metric_intervals",
        ["cluster_id", "started_at"],
    )


def downgrade() -> None:
    op.drop_index("ix_fine_metric_intervals_cluster_id_started_at", "fine_metric_intervals")
    op.drop_table("fine_metric_intervals")
