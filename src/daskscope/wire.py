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
_MAX_TEXT = 10_000_000


@functools.cache
def _list_adapter(cls: type) -> Any:
    """A pydantic validator for a list of ``cls`` records as plain dicts, with the
    wire's rules written as constraints so that pydantic's core checks them in one pass:
    no unknown fields, finite numbers, no negative counts or sizes, epoch-second times."""
    import dataclasses
    import typing

    import pydantic

    hints = typing.get_type_hints(cls)
    fields: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        constraints: dict[str, Any] = {}
        if f.name.endswith(_NON_NEGATIVE_SUFFIXES) or f.name.startswith(_NON_NEGATIVE_PREFIXES):
            constraints["ge"] = 0
        if f.name.endswith("_at"):
            constraints["le"] = _MAX_EPOCH
        if hints[f.name] in (str, str | None):
            constraints["max_length"] = _MAX_TEXT
        if f.default is not dataclasses.MISSING:
            default = pydantic.Field(f.default, **constraints)
        elif f.default_factory is not dataclasses.MISSING:
            default = pydantic.Field(default_factory=f.default_factory, **constraints)
        else:
            default = pydantic.Field(..., **constraints)
        fields[f.name] = (hints[f.name], default)
    config = pydantic.ConfigDict(extra="forbid", allow_inf_nan=False)
    model = pydantic.create_model(f"Wire{cls.__name__}", __config__=config, **fields)
    return pydantic.TypeAdapter(list[model])


def decode_batch(document: Any, *, max_records: int = 100_000) -> list[Record]:
    """Validate a decoded JSON batch and rebuild its records (server side: needs pydantic).

    Every problem raises :class:`WireError` naming the field; nothing is returned
    partially, so a rejected batch stores nothing.
    """
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
    # Validate kind by kind, each in one call; remember where each record came from.
    by_kind: dict[type, tuple[list[int], list[Any]]] = {}
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise WireError(f"records[{i}]", "must be an object")
        kind = item.get("kind")
        cls = RECORD_TYPES.get(kind) if isinstance(kind, str) else None
        if cls is None:
            raise WireError(
                f"records[{i}].kind", f"unknown record kind {kind!r}; known: {sorted(RECORD_TYPES)}"
            )
        positions, data = by_kind.setdefault(cls, ([], []))
        positions.append(i)
        data.append(item.get("data"))
    records: list[Record | None] = [None] * len(items)
    for cls, (positions, data) in by_kind.items():
        try:
            validated = _list_adapter(cls).validate_python(data)
        except pydantic.ValidationError as exc:
            error = exc.errors()[0]
            index, *path = error["loc"]
            where = f"records[{positions[int(index)]}].data"
            message = error["msg"]
            if not path:
                message = "must be an object of the record's fields"
            elif error["type"] == "extra_forbidden":
                message = f"unknown field for {cls.KIND}"
            elif error["type"] in ("less_than_equal", "greater_than_equal", "finite_number"):
                message = f"{message}, got {error.get('input')!r}"
            raise WireError(".".join([where, *map(str, path)]), message) from None
        for position, model in zip(positions, validated, strict=True):
            records[position] = cls(**model.__dict__)
    return records  # type: ignore[return-value]
