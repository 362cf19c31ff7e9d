"""Worker samples keep Dask's memory split and every numeric heartbeat metric.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23

Columns are only added, all nullable: samples stored before keep their values, and
what they did not record (the unmanaged split, the other metrics) stays NULL rather
than a made-up zero.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

_JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
_BYTES = ("unmanaged_bytes", "unmanaged_old_bytes", "unmanaged_recent_bytes")


def upgrade() -> None:
    # batch mode: SQLite recreates the table, PostgreSQL runs plain ALTER TABLE
    with op.batch_alter_table("worker_samples") as batch:
        for name in _BYTES:
            batch.add_column(sa.Column(name, sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column("metrics", _JSON, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("worker_samples") as batch:
        batch.drop_column("metrics")
        for name in reversed(_BYTES):
            batch.drop_column(name)
