"""Cost attribution reads the span-tag index alone.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-26

The costs of every span tag summed each outermost span's task seconds from its row in
``spans`` (wide: JSON names, states, code), one lookup per span: 50,000 spans took
150 ms on SQLite for one of the page's two sums. ``span_tags`` now keeps each span's
``duration_s`` and whether it is a ``root`` (no parent), which the writer sets from the
span row it writes, and both its indexes are widened to cover what the sums read.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "span_tags", sa.Column("root", sa.Boolean(), nullable=False, server_default=sa.false())
    )
    op.add_column("span_tags", sa.Column("duration_s", sa.Double(), nullable=True))
    tags = sa.table(
        "span_tags",
        sa.column("id", sa.String()),
        sa.column("root", sa.Boolean()),
        sa.column("duration_s", sa.Double()),
    )
    spans = sa.table(
        "spans",
        sa.column("id", sa.String()),
        sa.column("parent_span_id", sa.String()),
        sa.column("duration_s", sa.Double()),
    )
    of_span = spans.c.id == tags.c.id
    op.get_bind().execute(
        sa.update(tags).values(
            duration_s=sa.select(spans.c.duration_s).where(of_span).scalar_subquery(),
            root=sa.func.coalesce(
                sa.select(spans.c.parent_span_id.is_(None)).where(of_span).scalar_subquery(),
                sa.false(),
            ),
        )
    )
    # the tag index, widened to cover the sums (the same queries still lead with it)
    op.drop_index("ix_span_tags_tag_outermost_enqueued_at", table_name="span_tags")
    op.create_index(
        "ix_span_tags_tag_costs",
        "span_tags",
        ["tag", "outermost", "enqueued_at", "cluster_id", "root", "duration_s"],
    )
    # and the index by cluster, widened so that the members' costs read no table rows
    op.drop_index("ix_span_tags_cluster_id_outermost_tag", table_name="span_tags")
    op.create_index(
        "ix_span_tags_cluster_id_outermost_tag",
        "span_tags",
        ["cluster_id", "outermost", "tag", "root", "duration_s"],
    )


def downgrade() -> None:
    op.drop_index("ix_span_tags_cluster_id_outermost_tag", table_name="span_tags")
    op.create_index(
        "ix_span_tags_cluster_id_outermost_tag", "span_tags", ["cluster_id", "outermost", "tag"]
    )
    op.drop_index("ix_span_tags_tag_costs", table_name="span_tags")
    op.create_index(
        "ix_span_tags_tag_outermost_enqueued_at", "span_tags", ["tag", "outermost", "enqueued_at"]
    )
    with op.batch_alter_table("span_tags") as batch:
        batch.drop_column("duration_s")
        batch.drop_column("root")
