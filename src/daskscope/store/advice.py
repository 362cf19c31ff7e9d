"""What the advice rules read of a cluster's task groups: every group as a brief row, in
no particular order (no JSON columns, no sort: 40,000 groups in one plain scan)."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from daskscope.store.database import Database, as_engine
from daskscope.store.groups import BRIEF_COLUMNS
from daskscope.store.schema import task_groups

__all__ = ["brief_groups"]


def brief_groups(store: Database | sa.Engine, cluster_id: str) -> list[dict[str, Any]]:
    """Every task group of the cluster: id, name, prefix, computation_id, task counts,
    bytes, seconds, first start and last stop."""
    query = sa.select(*BRIEF_COLUMNS).where(task_groups.c.cluster_id == cluster_id)
    with as_engine(store).connect() as conn:
        result = conn.execute(query)
        keys = list(result.keys())
        return [dict(zip(keys, row, strict=True)) for row in result.all()]
