"""A span's task time by prefix read from an index.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-27

A span tag's history and the regression check sum, for each of up to 200 runs, the task
time of the run's spans' groups by task prefix (issue 25). Found by cluster alone, that
read every group row of each cluster: 20,000 rows for 200 runs of the seeded store, most
of a history's time. ``ix_task_groups_span_prefix`` on ``(cluster_id, span_id, prefix,
duration_s)`` covers the sum. It is partial, for prefixes of at most ``PREFIX_CHARS``
characters, so that a PostgreSQL index entry stays within its size limit whatever a
prefix's length (a task key's first word can be long); ``ix_task_groups_span_long_prefix``
finds the groups of longer prefixes (there are usually none) by the opposite condition.
Only a query that states a condition uses its index: no other read of a cluster's groups
changes its plan.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

#: schema.PREFIX_CHARS when this revision was made
SHORT = sa.text("length(prefix) <= 200")
LONG = sa.text("length(prefix) > 200")


def upgrade() -> None:
    op.create_index(
        "ix_task_groups_span_prefix",
        "task_groups",
        ["cluster_id", "span_id", "prefix", "duration_s"],
        sqlite_where=SHORT,
        postgresql_where=SHORT,
    )
    op.create_index(
        "ix_task_groups_span_long_prefix",
        "task_groups",
        ["cluster_id", "span_id"],
        sqlite_where=LONG,
        postgresql_where=LONG,
    )


def downgrade() -> None:
    op.drop_index("ix_task_groups_span_long_prefix", table_name="task_groups")
    op.drop_index("ix_task_groups_span_prefix", table_name="task_groups")
