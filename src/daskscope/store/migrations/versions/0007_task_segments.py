"""Every task kept: the task log, as encoded segments of task executions.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-23

One row a segment (tens of thousands of executions, column-wise and compressed in
``payload``), so a cluster of ten million tasks is a few hundred rows; the index on
``(cluster_id, first_start)`` finds the segments of a time window.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    json = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
    op.create_table(
        "task_segments",
        sa.Column("id", sa.String(), primary_key=True),
        sa.Column("cluster_id", sa.String(), nullable=False),
        sa.Column("segment", sa.Integer(), nullable=False),
        sa.Column("first_start", sa.Double(), nullable=False),
        sa.Column("last_stop", sa.Double(), nullable=False),
        sa.Column("executions", sa.BigInteger(), nullable=False),
        sa.Column("format", sa.String(), nullable=False),
        sa.Column("payload", sa.LargeBinary(), nullable=False),
        sa.Column("groups", json, nullable=False),
        sa.Column("summary", sa.LargeBinary(), nullable=False),
        sa.Column("key_filter", sa.LargeBinary(), nullable=False),
    )
    op.create_index(
        "ix_task_segments_cluster_id_first_start", "task_segments", ["cluster_id", "first_start"]
    )


def downgrade() -> None:
    op.drop_index("ix_task_segments_cluster_id_first_start", table_name="task_segments")
    op.drop_table("task_segments")
