"""Facts the resource advice rules read beyond the cluster detail (issue 14)."""

from __future__ import annotations

from typing import Any

from daskscope.store import Store

__all__ = ["resource_extra"]


def resource_extra(
    store: Store, cluster_id: str | None, computation_id: str | None, run_id: str | None
) -> dict[str, Any]:
    """What goes into ``AdviceFacts.extra`` for the rules of ``analysis/advice/resources.py``."""
    return {}
