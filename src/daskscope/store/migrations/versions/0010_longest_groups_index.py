"""The longest task groups of a cluster read from an index.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-23

A cluster page names its 20 longest task groups. Without an index the database sorts
every group of the cluster for them (40,000 groups: about 100 ms on PostgreSQL under
load); ``ix_task_groups_longest`` on ``(cluster_id, duration_s)`` hands them over in
order. It is partial (``duration_s IS NOT NULL``, which every row meets) so that only
the query that names that condition uses it: an unconditional index by duration made
SQLite read every other all-groups query through it, in random row order.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

WHERE = sa.text("duration_s IS NOT NULL")


def upgrade() -> None:
    op.create_index(
        "ix_task_groups_longest",
        "task_groups",
        ["cluster_id", "duration_s"],
        sqlite_where=WHERE,
        postgresql_where=WHERE,
    )


def downgrade() -> None:
    op.drop_index("ix_task_groups_longest", table_name="task_groups")
