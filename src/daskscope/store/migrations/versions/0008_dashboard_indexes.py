"""Indexes for the dashboard's pages at scale.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-23

``ix_clusters_usage`` covers the account page's weekly usage per member: it holds every
column that query reads (member, account, start, end, core, compute and memory-limit
seconds), so the database groups 10,000 clusters from the index instead of reading
their wide rows.

``ix_task_groups_cluster_id_computation_id_started_at`` serves the page of a
cluster with tens of thousands of task groups: each computation's first groups by start.
"""

from __future__ import annotations

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

#: The columns of ``ix_clusters_usage``, as ``store/schema.py`` declares them
USAGE = (
    "user",
    "account",
    "started_at",
    "stopped_at",
    "last_seen_at",
    "core_seconds",
    "compute_seconds",
    "memory_limit_byte_seconds",
)


#: The task groups' indexes: name, columns
GROUPS = (
    (
        "ix_task_groups_cluster_id_computation_id_started_at",
        ["cluster_id", "computation_id", "started_at"],
    ),
)


def upgrade() -> None:
    op.create_index("ix_clusters_usage", "clusters", list(USAGE))
    for name, columns in GROUPS:
        op.create_index(name, "task_groups", columns)


def downgrade() -> None:
    for name, _ in GROUPS:
        op.drop_index(name, table_name="task_groups")
    op.drop_index("ix_clusters_usage", table_name="clusters")
