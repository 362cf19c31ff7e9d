"""The span-tag index: each span's own tag, indexed by tag, outermost and time.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-23

``span_tags`` holds one row per span (``store/span_tags.py``): the tag the span adds
(the last of its name), whether no parent carries it (the outermost of a tagged
subtree) and when it was enqueued. The history of a span tag and the regressions
listing read it instead of matching text in every span's JSON name. The spans stored
before this migration are indexed here; the writer indexes every span after it.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from daskscope.store.span_tags import span_tag_rows

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

#: Spans read and indexed per round trip while filling the table
_BATCH = 5_000


def upgrade() -> None:
    table = op.create_table(
        "span_tags",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("cluster_id", sa.String(), nullable=False),
        sa.Column("tag", sa.String(), nullable=False),
        sa.Column("outermost", sa.Boolean(), nullable=False),
        sa.Column("enqueued_at", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    spans = sa.table(
        "spans",
        sa.column("id", sa.String()),
        sa.column("cluster_id", sa.String()),
        sa.column("name", sa.Text()),  # its JSON as text on both dialects
        sa.column("enqueued_at", sa.Double()),
    )
    conn = op.get_bind()
    name_text = sa.cast(spans.c.name, sa.Text)
    query = sa.select(spans.c.id, spans.c.cluster_id, name_text.label("name"), spans.c.enqueued_at)
    last = None
    while True:  # by id, a page at a time: no cursor held open while inserting
        page = query.order_by(spans.c.id).limit(_BATCH)
        if last is not None:
            page = page.where(spans.c.id > last)
        rows = [dict(r._mapping) for r in conn.execute(page)]
        if not rows:
            break
        last = rows[-1]["id"]
        # the columns of this revision (later ones add more to the rows)
        tags = [{c.name: r[c.name] for c in table.columns} for r in span_tag_rows(rows)]
        if tags:
            conn.execute(table.insert(), tags)
    # Indexes after the fill: one sort each instead of an update per row
    op.create_index(
        "ix_span_tags_tag_outermost_enqueued_at", "span_tags", ["tag", "outermost", "enqueued_at"]
    )
    op.create_index(
        "ix_span_tags_cluster_id_outermost_tag", "span_tags", ["cluster_id", "outermost", "tag"]
    )


def downgrade() -> None:
    op.drop_index("ix_span_tags_cluster_id_outermost_tag", table_name="span_tags")
    op.drop_index("ix_span_tags_tag_outermost_enqueued_at", table_name="span_tags")
    op.drop_table("span_tags")
