"""Server-side login sessions: the hash of each session id, its token and expiry.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-24

Browsers kept the raw token in a cookie before; those cookies simply stop working and
their owners log in again.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "sessions",
        sa.Column("id_hash", sa.String(), primary_key=True),
        sa.Column("token_id", sa.String(), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("expires_at", sa.Double(), nullable=False),
    )
    op.create_index("ix_sessions_token_id", "sessions", ["token_id"])
    op.create_index("ix_sessions_expires_at", "sessions", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_sessions_expires_at", table_name="sessions")
    op.drop_index("ix_sessions_token_id", table_name="sessions")
    op.drop_table("sessions")
