"""How a record's field declares its shape: the column that stores it and the rules the
wire checks it by. A record is thus the single source of its table (``store.schema``)
and of its checks (``wire``), whatever its fields are called.

>>> @dataclass(kw_only=True)
... class Sample:
...     id: str = col(Column.STRING, primary_key=True)
...     taken_at: float = col(Column.TIME)
...     nbytes: int = col(Column.BIGINT, nonnegative=True, default=0)

Nothing here imports SQLAlchemy or msgspec: the recorder imports the records in the
scheduler.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import types
import typing
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Column", "FieldShape", "RecordField", "col", "record_fields"]


class Column(enum.Enum):
    """How a field is stored; ``store.schema`` maps each to a database type."""

    STRING = "string"  # text of a line or so
    TEXT = "text"  # text of any length: task keys, tracebacks, file names
    INTEGER = "integer"  # 32 bits
    BIGINT = "bigint"  # 64 bits: counts and sizes that can grow past 2**31
    DOUBLE = "double"
    #: epoch seconds: double precision (REAL would lose sub-second detail), and on the
    #: wire no earlier than 1970 and no later than about 2255
    TIME = "time"
    BOOLEAN = "boolean"
    JSON = "json"  # JSONB on PostgreSQL
    #: opaque bytes (BLOB; bytea on PostgreSQL): encoded task-log segments; base64 on
    #: the wire's JSON
    BYTES = "bytes"


@dataclass(frozen=True, slots=True)
class FieldShape:
    """What :func:`col` declares for one field."""

    column: Column
    #: the wire refuses a value below zero
    nonnegative: bool = False
    #: the wire refuses text longer than an index entry holds (ids, owners)
    short: bool = False
    #: the column takes NULL even where the field's type does not (rows stored before
    #: the field existed); a field typed ``X | None`` is nullable anyway
    nullable: bool = False
    primary_key: bool = False


_SHAPE = "daskscope.shape"


def col(
    column: Column,
    *,
    nonnegative: bool = False,
    short: bool = False,
    nullable: bool = False,
    primary_key: bool = False,
    default: Any = dataclasses.MISSING,
    default_factory: Any = dataclasses.MISSING,
) -> Any:
    """A record field of this shape (a :func:`dataclasses.field` carrying it)."""
    shape = FieldShape(column, nonnegative, short or primary_key, nullable, primary_key)
    metadata = {_SHAPE: shape}
    if default_factory is not dataclasses.MISSING:
        return field(default_factory=default_factory, metadata=metadata)
    return field(default=default, metadata=metadata)


@dataclass(frozen=True, slots=True)
class RecordField:
    """One field of a record kind with its declared shape: what the store's schema and
    the wire's checks are built from."""

    name: str
    #: the field's type, e.g. ``int | None``
    hint: Any
    shape: FieldShape
    field: dataclasses.Field[Any]

    @property
    def optional(self) -> bool:
        """The field's type admits None."""
        return type(None) in typing.get_args(self.hint) and isinstance(self.hint, types.UnionType)

    @property
    def nullable(self) -> bool:
        """The column takes NULL."""
        return self.optional or self.shape.nullable


@functools.cache
def record_fields(cls: type) -> tuple[RecordField, ...]:
    """The fields of record kind ``cls``, in order; a field declared without :func:`col`
    is an error here, so no field goes unchecked or unstored by accident."""
    hints = typing.get_type_hints(cls)
    fields = []
    for f in dataclasses.fields(cls):
        shape = f.metadata.get(_SHAPE)
        if not isinstance(shape, FieldShape):
            raise TypeError(f"{cls.__name__}.{f.name} declares no shape; declare it with col()")
        fields.append(RecordField(f.name, hints[f.name], shape, f))
    return tuple(fields)
