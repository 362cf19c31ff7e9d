"""A cluster made from a file by ``daskscope import`` says so.

Revision ID: 0016
Revises: 0014
Create Date: 2026-11-27

``clusters.imported`` is NULL for a recorded cluster; for one imported from a
``dump_cluster_state`` file or a performance report it holds the file's name, its
format, when it was imported and what such a file cannot hold (issue 30). Nullable, so
every cluster stored before keeps NULL: recorded.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0016"
down_revision = "0014"
branch_labels = None
depends_on = None

_JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    # batch mode: SQLite recreates the table, PostgreSQL runs plain ALTER TABLE
    with op.batch_alter_table("clusters") as batch:
        batch.add_column(sa.Column("imported", _JSON, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("clusters") as batch:
        batch.drop_column("imported")
