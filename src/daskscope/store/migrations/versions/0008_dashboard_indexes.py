"""Indexes for the dashboard's pages at scale.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-23

``ix_clusters_usage`` covers the account page's weekly usage per member: it holds every
column that query reads (member, account, start, end, core, compute and memory-limit
seconds), so the database groups 10,000 clusters from the index instead of reading
their wide rows.
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


def upgrade() -> None:
    op.create_index("ix_clusters_usage", "clusters", list(USAGE))


def downgrade() -> None:
    op.drop_index("ix_clusters_usage", table_name="clusters")
