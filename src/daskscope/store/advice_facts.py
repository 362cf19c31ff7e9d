"""What the resource advice rules read beyond the cluster detail and the run detail
(``views/advice_resources.py`` gathers it)."""

from __future__ import annotations

import sqlalchemy as sa

from daskscope.store import schema as s
from daskscope.store.database import Database, as_engine

__all__ = ["run_filenames"]


def run_filenames(store: Database | sa.Engine, run_id: str) -> list[str]:
    """The input files a run's chunks read, each once, in name order."""
    ch = s.workflow_chunks.c
    query = (
        sa.select(ch.filename)
        .where(ch.run_id == run_id, ch.filename.is_not(None))
        .distinct()
        .order_by(ch.filename)
    )
    with as_engine(store).connect() as conn:
        return [str(name) for name in conn.execute(query).scalars()]
