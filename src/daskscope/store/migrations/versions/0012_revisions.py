"""Every record row keeps its revision: a stored row only moves forward.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-27

A batch delivered late (a retry, ``daskscope spool send --rejected``, a proxy's replay)
overwrote newer rows with older values and reopened closed clusters. Each record now
carries the revision its sender numbered it with (``model.stamp_revisions``), and the
writer's upsert replaces a row only with a higher one. Rows stored before this keep
NULL, which any numbered record replaces; ``span_tags`` follows its span row.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

_TABLES = (
    "clusters",
    "computations",
    "task_groups",
    "task_prefixes",
    "spans",
    "span_metrics",
    "worker_samples",
    "events",
    "errors",
    "profiles",
    "workflow_runs",
    "workflow_chunks",
    "task_segments",
    "span_tags",
)


def upgrade() -> None:
    # nullable, no default: adding the column rewrites no table on either database
    for table in _TABLES:
        op.add_column(table, sa.Column("revision", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    for table in _TABLES:
        with op.batch_alter_table(table) as batch:
            batch.drop_column("revision")
