"""The audit log, the addresses tokens were used from, and shared login attempts.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-27

``audit_events``: tokens created, used from a new address, revoked, and failed logins,
shown to each account's admins and exported as JSON lines (store/audit.py).
``token_addresses``: where each token was used, so that a new address is audited once
across all server processes. ``login_attempts``: the login rate limit, counted in the
database so that ``serve --workers N`` shares it (web/ratelimit.py).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
# BIGSERIAL on PostgreSQL; SQLite's rowid alias must be spelt INTEGER
SERIAL = sa.BigInteger().with_variant(sa.Integer, "sqlite")


def upgrade() -> None:
    op.create_table(
        "audit_events",
        sa.Column("id", SERIAL, primary_key=True),
        sa.Column("at", sa.Double(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("account", sa.String(), nullable=True),
        sa.Column("user", sa.String(), nullable=True),
        sa.Column("address", sa.String(), nullable=True),
        sa.Column("token_hint", sa.String(), nullable=True),
        sa.Column("detail", JSON, nullable=True),
    )
    op.create_index("ix_audit_events_account_id", "audit_events", ["account", "id"])
    op.create_index("ix_audit_events_at", "audit_events", ["at"])
    op.create_table(
        "token_addresses",
        sa.Column("token_id", sa.String(), primary_key=True),
        sa.Column("address", sa.String(), primary_key=True),
        sa.Column("first_seen_at", sa.Double(), nullable=False),
    )
    op.create_table(
        "login_attempts",
        sa.Column("id", SERIAL, primary_key=True),
        sa.Column("address", sa.String(), nullable=False),
        sa.Column("at", sa.Double(), nullable=False),
    )
    op.create_index("ix_login_attempts_address_at", "login_attempts", ["address", "at"])
    op.create_index("ix_login_attempts_at", "login_attempts", ["at"])


def downgrade() -> None:
    op.drop_index("ix_login_attempts_at", table_name="login_attempts")
    op.drop_index("ix_login_attempts_address_at", table_name="login_attempts")
    op.drop_table("login_attempts")
    op.drop_table("token_addresses")
    op.drop_index("ix_audit_events_at", table_name="audit_events")
    op.drop_index("ix_audit_events_account_id", table_name="audit_events")
    op.drop_table("audit_events")
