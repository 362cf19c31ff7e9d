"""Workflow runs carry their owner: the account and user that sent them.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23

A run on a recorded cluster belonged to the cluster's account already; a run without a
recorder (local execution, a cluster nobody registered) belonged to nobody, so with
authentication on no member could see it and anyone could overwrite it. Existing runs
take their cluster's account and user; a run without a cluster keeps NULL (it was sent
before owners were known: only an unauthenticated server shows it).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("workflow_runs") as batch:
        batch.add_column(sa.Column("account", sa.String(), nullable=True))
        batch.add_column(sa.Column("user", sa.String(), nullable=True))
        batch.create_index("ix_workflow_runs_account_started_at", ["account", "started_at"])
    runs = sa.table(
        "workflow_runs",
        sa.column("cluster_id", sa.String),
        sa.column("account", sa.String),
        sa.column("user", sa.String),
    )
    clusters = sa.table(
        "clusters", sa.column("id", sa.String), sa.column("account"), sa.column("user")
    )
    for column in ("account", "user"):
        owner = (
            sa.select(clusters.c[column])
            .where(clusters.c.id == runs.c.cluster_id)
            .scalar_subquery()
        )
        op.execute(runs.update().where(runs.c.cluster_id.is_not(None)).values({column: owner}))


def downgrade() -> None:
    with op.batch_alter_table("workflow_runs") as batch:
        batch.drop_index("ix_workflow_runs_account_started_at")
        batch.drop_column("user")
        batch.drop_column("account")
