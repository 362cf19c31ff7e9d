"""Retention of the task log: per-account policies and a mark on pruned clusters.

Revision ID: 0018
Revises: 0014
Create Date: 2026-11-27

``retention_policies`` holds an account's own number of days its clusters' task log is
kept (NULL: for ever); an account without a row follows the ``retention.task-log-days``
setting. ``task_log_prunes`` marks each cluster whose task log ``daskscope prune``
removed (when, under which policy, how much), so that its timeline says "pruned" rather
than "nothing recorded". Aggregates are never pruned (docs/server.md, Retention).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "retention_policies",
        sa.Column("account", sa.String(), primary_key=True),
        sa.Column("task_log_days", sa.Double(), nullable=True),
        sa.Column("set_by", sa.String(), nullable=False),
        sa.Column("set_at", sa.Double(), nullable=False),
    )
    op.create_table(
        "task_log_prunes",
        sa.Column("cluster_id", sa.String(), primary_key=True),
        sa.Column("pruned_at", sa.Double(), nullable=False),
        sa.Column("task_log_days", sa.Double(), nullable=False),
        sa.Column("segments", sa.BigInteger(), nullable=False),
        sa.Column("executions", sa.BigInteger(), nullable=False),
        sa.Column("bytes", sa.BigInteger(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("task_log_prunes")
    op.drop_table("retention_policies")
