"""Alerts: each time a rule's condition held, its notification's delivery, and the rules
an account's admins set.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-27

One row per rule, condition and episode (issue 30, alerts): fired, then cleared when
the condition no longer holds; the delivery columns make it an outbox, so a server that
restarts mid-delivery goes on where it stopped. The partial unique index keeps one open
alert per rule and condition, whichever server process evaluates first.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

_JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
_OPEN = sa.text("cleared_at IS NULL")


def upgrade() -> None:
    op.create_table(
        "alerts",
        sa.Column("id", sa.String, primary_key=True),
        sa.Column("rule", sa.String, nullable=False),
        sa.Column("account", sa.String, nullable=False),
        sa.Column("kind", sa.String, nullable=False),
        sa.Column("condition", sa.String, nullable=False),
        sa.Column("summary", sa.Text, nullable=False),
        sa.Column("detail", _JSON, nullable=True),
        sa.Column("fired_at", sa.Double, nullable=False),
        sa.Column("cleared_at", sa.Double, nullable=True),
        sa.Column("webhook", sa.Text, nullable=False),
        sa.Column("body_format", sa.String, nullable=False),
        sa.Column("delivery", sa.String, nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("next_attempt_at", sa.Double, nullable=True),
        sa.Column("claimed_until", sa.Double, nullable=True),
        sa.Column("delivered_at", sa.Double, nullable=True),
        sa.Column("last_error", sa.Text, nullable=True),
    )
    op.create_index(
        "ux_alerts_open", "alerts", ["rule", "condition"], unique=True,
        sqlite_where=_OPEN, postgresql_where=_OPEN,
    )  # fmt: skip
    op.create_index("ix_alerts_account_fired", "alerts", ["account", "fired_at"])
    op.create_index("ix_alerts_delivery", "alerts", ["delivery", "next_attempt_at"])
    op.create_table(
        "alert_rules",
        sa.Column("name", sa.String, primary_key=True),
        sa.Column("account", sa.String, nullable=False),
        sa.Column("rule", _JSON, nullable=False),
        sa.Column("updated_by", sa.String, nullable=True),
        sa.Column("updated_at", sa.Double, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("alert_rules")
    op.drop_table("alerts")
