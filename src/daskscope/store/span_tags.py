"""The span-tag index (table ``span_tags``, migration 0009): one row per span with the
tag it adds (the last of its name, as Dask's ``span(tag)`` builds names) and whether
it is the outermost span of a subtree carrying that tag. Finding a tag's spans then
reads an index instead of matching text in every span's JSON name.

Each row also keeps its span's task seconds and whether it is a root (no parent), which
cost attribution sums (migration 0011), so that it reads this narrow table instead of
the span rows with their JSON.

The writer (:mod:`daskscope.store.writer`) derives these rows from every span row it
writes; the migrations fill them for spans stored before them."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["TAG_CHARS", "span_tag_row", "span_tag_rows", "tag_key"]

#: Characters of a tag kept in the index (a PostgreSQL index entry has a size limit);
#: a longer tag is matched on this start and confirmed on the span's name
TAG_CHARS = 200


def tag_key(tag: str) -> str:
    """What the index holds for ``tag``."""
    return tag[:TAG_CHARS]


def span_tag_row(span: Mapping[str, Any]) -> dict[str, Any] | None:
    """The index row of one span row (``name`` a list, or its JSON text; without
    ``parent_span_id`` it counts as a root); None for a span without a name."""
    name = span["name"]
    if isinstance(name, str):
        name = json.loads(name)
    enqueued = span.get("enqueued_at")
    if not name or not isinstance(enqueued, (int, float)) or enqueued != enqueued:
        return None  # nothing to index (a record the database refuses anyway)
    tag = str(name[-1])
    return {
        "id": span["id"],
        "cluster_id": span["cluster_id"],
        "tag": tag_key(tag),
        "outermost": tag not in (str(t) for t in name[:-1]),
        "enqueued_at": float(enqueued),
        "root": span.get("parent_span_id") is None,
        "duration_s": span.get("duration_s"),
        "revision": span.get("revision", 0),
    }


def span_tag_rows(spans: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The index rows of ``spans``."""
    return [row for row in map(span_tag_row, spans) if row is not None]
