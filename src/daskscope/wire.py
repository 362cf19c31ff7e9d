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

__all__ = [
    "WIRE_VERSION",
    "NotJSON",
    "WireError",
    "decode_batch",
    "decode_rows_json",
    "encode_batch",
]

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
def _wire_fields(cls: type) -> Any:
    """A TypedDict of ``cls``'s fields with the wire's rules written as constraints, so
    that pydantic's core checks them in one pass and hands back plain dicts: no unknown
    fields, finite numbers, no negative counts or sizes, epoch-second times."""
    import dataclasses
    import typing
    from typing import Annotated, NotRequired, Required

    import pydantic
    from typing_extensions import TypedDict

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
        kind = (
            Annotated[hints[f.name], pydantic.Field(**constraints)]
            if constraints
            else hints[f.name]
        )
        optional = (
            f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        )
        fields[f.name] = NotRequired[kind] if optional else Required[kind]
    typed = TypedDict(f"Wire{cls.__name__}", fields, total=False)  # type: ignore[operator]
    typed.__pydantic_config__ = pydantic.ConfigDict(extra="forbid", allow_inf_nan=False)  # type: ignore[attr-defined]
    return typed


@functools.cache
def _defaults(cls: type) -> dict[str, Any]:
    """The values of the fields a sender may leave out. Shared between rows: rows are
    written, never changed in place."""
    import dataclasses

    out: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            out[f.name] = f.default_factory()
    return out


@functools.cache
def _batch_adapter(max_records: int) -> Any:
    """One validator for a whole batch: records told apart by their ``kind``, so that
    pydantic's core parses and checks a JSON body in one pass, without Python per field."""
    from typing import Annotated, Literal, Union

    import pydantic
    from typing_extensions import TypedDict

    from daskscope.model import RECORD_TYPES

    items = tuple(
        TypedDict(f"Item_{kind}", {"kind": Literal[kind], "data": _wire_fields(cls)})  # type: ignore[operator]
        for kind, cls in RECORD_TYPES.items()
    )
    item = Annotated[Union[items], pydantic.Field(discriminator="kind")]  # noqa: UP007
    # functional form: the annotations refer to names local to this function
    batch = TypedDict(  # type: ignore[operator]  # noqa: UP013
        "Batch",
        {
            "version": Literal[WIRE_VERSION],
            "records": Annotated[list[item], pydantic.Field(max_length=max_records)],  # type: ignore[valid-type]
        },
    )
    return pydantic.TypeAdapter(batch)


class NotJSON(WireError):
    """The body is not JSON at all."""


def decode_rows_json(body: bytes, *, max_records: int = 100_000) -> list[tuple[str, dict]]:
    """The batch in a request body as ``(kind, row)`` pairs, each row a dict of every
    field of its record kind (what the store writes); raises :class:`WireError`."""
    import pydantic

    try:
        batch = _batch_adapter(max_records).validate_json(body)
    except pydantic.ValidationError as exc:
        raise _wire_error(exc, max_records) from None
    return _rows(batch)


def decode_batch(document: Any, *, max_records: int = 100_000) -> list[Record]:
    """Validate a decoded JSON batch and rebuild its records (server side: needs pydantic).

    Every problem raises :class:`WireError` naming the field; nothing is returned
    partially, so a rejected batch stores nothing.
    """
    import pydantic

    try:
        batch = _batch_adapter(max_records).validate_python(document)
    except pydantic.ValidationError as exc:
        raise _wire_error(exc, max_records) from None
    return _as_records(_rows(batch))


def _rows(batch: Any) -> list[tuple[str, dict]]:
    from daskscope.model import RECORD_TYPES

    defaults = {kind: _defaults(cls) for kind, cls in RECORD_TYPES.items()}
    return [(item["kind"], defaults[item["kind"]] | item["data"]) for item in batch["records"]]


def _as_records(rows: list[tuple[str, dict]]) -> list[Record]:
    from daskscope.model import RECORD_TYPES

    return [RECORD_TYPES[kind](**row) for kind, row in rows]


def _wire_error(exc: Any, max_records: int) -> WireError:
    """The first problem pydantic found, named the way the wire format names fields."""
    from daskscope.model import RECORD_TYPES

    error = exc.errors()[0]
    loc, kind, given = error["loc"], error["type"], error.get("input")
    if kind == "json_invalid":
        return NotJSON("body", f"is not JSON: {error['msg']}")
    if not loc or (kind == "model_type" and len(loc) == 0):
        return WireError("body", "must be a JSON object with 'version' and 'records'")
    if loc[0] == "version":
        return WireError("version", f"must be {WIRE_VERSION}, got {given!r}")
    if loc[0] != "records":
        return WireError(str(loc[0]), error["msg"])
    if len(loc) == 1:
        if kind == "too_long":
            return WireError("records", f"at most {max_records} records a batch")
        return WireError("records", "must be a list")
    where = f"records[{loc[1]}]"
    if len(loc) == 2:
        if kind in ("union_tag_invalid", "union_tag_not_found"):
            tag = given.get("kind") if isinstance(given, dict) else None
            return WireError(
                f"{where}.kind", f"unknown record kind {tag!r}; known: {sorted(RECORD_TYPES)}"
            )
        return WireError(where, "must be an object")
    path = [str(p) for p in loc[3:]]  # loc[2] is the kind that chose the model
    if path == ["data"]:
        return WireError(f"{where}.data", "must be an object of the record's fields")
    message = error["msg"]
    if kind == "extra_forbidden":
        message = f"unknown field for {loc[2]}"
    elif kind in ("less_than_equal", "greater_than_equal", "finite_number"):
        message = f"{message}, got {given!r}"
    return WireError(".".join([where, *path]), message)
