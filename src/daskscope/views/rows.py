"""Building a view's dataclasses from the store's row dicts."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

__all__ = ["pick"]

T = TypeVar("T", bound="DataclassInstance")


def pick(cls: type[T], row: Mapping[str, Any], **given: Any) -> T:
    """A ``cls`` from the row's fields of the same names; ``given`` fields override."""
    values = {f.name: row[f.name] for f in dataclasses.fields(cls) if f.name not in given}
    return cls(**values, **given)
