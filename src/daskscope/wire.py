"""The JSON form of a batch of records, as the collector sends it to a daskscope server.

``{"version": 1, "records": [{"kind": "task_group", "data": {"id": ..., ...}}, ...]}``:
each record is its kind and its dataclass fields. Encoding needs only the standard library (it runs
in the scheduler); the server validates what it decodes.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from typing import Any

from daskscope.model import Record, record_to_dict

__all__ = ["WIRE_VERSION", "WireError", "decode_batch", "encode_batch"]

WIRE_VERSION = 1


def batch_document(records: Iterable[Record]) -> dict[str, Any]:
    return {
        "version": WIRE_VERSION,
        "records": [{"kind": r.KIND, "data": record_to_dict(r)} for r in records],
    }


def encode_batch(records: Iterable[Record]) -> bytes:
    # default=str: Dask annotations may hold arbitrary objects; a string beats a crash
    return json.dumps(batch_document(records), default=str, separators=(",", ":")).encode()


class WireError(ValueError):
    """A batch that cannot be accepted; ``field`` names where (e.g. ``records[3].nbytes``)."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


#: Epoch seconds accepted for times: 1970 to about 2255
_MAX_EPOCH = 2**33
_NON_NEGATIVE_SUFFIXES = ("_at", "_s", "_seconds", "_bytes", "nbytes_total", "_peak", "samples")
_NON_NEGATIVE_PREFIXES = ("tasks_", "group_count", "workers_", "threads_", "memory_limit")


@functools.cache
def _adapter(cls: type) -> Any:
    import pydantic

    return pydantic.TypeAdapter(cls)


def decode_batch(document: Any, *, max_records: int = 100_000) -> list[Record]:
    """Validate a decoded JSON batch and rebuild its records (server side: needs pydantic).

    Every problem raises :class:`WireError` naming the field; nothing is returned
    partially, so a rejected batch stores nothing.
    """
    import dataclasses
    import math

    import pydantic

    from daskscope.model import RECORD_TYPES

    if not isinstance(document, dict):
        raise WireError("body", "must be a JSON object with 'version' and 'records'")
    if document.get("version") != WIRE_VERSION:
        raise WireError("version", f"must be {WIRE_VERSION}, got {document.get('version')!r}")
    items = document.get("records")
    if not isinstance(items, list):
        raise WireError("records", "must be a list")
    if len(items) > max_records:
        raise WireError("records", f"at most {max_records} records a batch, got {len(items)}")
    records: list[Record] = []
    for i, item in enumerate(items):
        where = f"records[{i}]"
        if not isinstance(item, dict):
            raise WireError(where, "must be an object")
        kind, data = item.get("kind"), item.get("data")
        cls = RECORD_TYPES.get(kind) if isinstance(kind, str) else None
        if cls is None:
            raise WireError(
                f"{where}.kind", f"unknown record kind {kind!r}; known: {sorted(RECORD_TYPES)}"
            )
        if not isinstance(data, dict):
            raise WireError(f"{where}.data", "must be an object of the record's fields")
        where = f"{where}.data"
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise WireError(f"{where}.{unknown[0]}", f"unknown field for {kind}")
        try:
            record = _adapter(cls).validate_python(data, strict=False)
        except pydantic.ValidationError as exc:
            error = exc.errors()[0]
            loc = ".".join(str(p) for p in error["loc"])
            raise WireError(f"{where}.{loc}", error["msg"]) from None
        for name in known:
            value = getattr(record, name)
            if isinstance(value, float) and not math.isfinite(value):
                raise WireError(f"{where}.{name}", "must be a finite number")
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                if value < 0 and (
                    name.endswith(_NON_NEGATIVE_SUFFIXES) or name.startswith(_NON_NEGATIVE_PREFIXES)
                ):
                    raise WireError(f"{where}.{name}", f"must not be negative, got {value}")
                if name.endswith("_at") and value > _MAX_EPOCH:
                    raise WireError(f"{where}.{name}", f"is not an epoch time in seconds: {value}")
            if isinstance(value, str) and len(value) > 10_000_000:
                raise WireError(f"{where}.{name}", "is longer than 10 MB")
        records.append(record)
    return records
