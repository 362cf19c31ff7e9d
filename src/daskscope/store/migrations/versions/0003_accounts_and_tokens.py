"""Accounts, their members and hashed tokens, for a shared daskscope server.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22

Written out in full, like the others: a migration is a frozen snapshot of the schema.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "accounts",
        sa.Column("id", sa.String(), primary_key=True),
        sa.Column("name", sa.String(), nullable=False, unique=True),
        sa.Column("created_at", sa.Double(), nullable=False),
    )
    op.create_table(
        "users",
        sa.Column("id", sa.String(), primary_key=True),
        sa.Column("name", sa.String(), nullable=False, unique=True),
        sa.Column("account", sa.String(), nullable=False),
        sa.Column("is_admin", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
    )
    op.create_index("ix_users_account", "users", ["account"])
    op.create_table(
        "tokens",
        sa.Column("id", sa.String(), primary_key=True),
        sa.Column("user", sa.String(), nullable=False),
        sa.Column("token_hash", sa.String(), nullable=False, unique=True),
        sa.Column("hint", sa.String(), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("revoked_at", sa.Double(), nullable=True),
    )
    op.create_index("ix_tokens_user", "tokens", ["user"])


def downgrade() -> None:
    op.drop_index("ix_tokens_user", table_name="tokens")
    op.drop_table("tokens")
    op.drop_index("ix_users_account", table_name="users")
    op.drop_table("users")
    op.drop_table("accounts")
