"""One figure daskscope shows: its name, unit, formula, source and which way is better."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from daskscope.format import value_text

__all__ = ["Activity", "Better", "Figure", "Scope"]

Better = Literal["higher", "lower"] | None
#: What a figure describes; a figure's id is ``"<scope>.<key>"``
Scope = Literal[
    "cluster",
    "computation",
    "group",
    "prefix",
    "span",
    "worker",
    "account",
    "member",
    "workflow",
    "chunk",
    "section",
]


@dataclass(frozen=True, slots=True)
class Figure:
    """A figure as found in the data: ``key`` is the field name in its ``scope``'s rows
    (dotted for a nested field: ``cost.total`` is ``row["cost"]["total"]``)."""

    scope: Scope
    key: str
    label: str
    unit: str
    formula: str
    source: str
    better: Better = None

    @property
    def id(self) -> str:
        return f"{self.scope}.{self.key}"

    def text(self, value: float | None, *, currency: str | None = None) -> str:
        """``value`` as this figure reads everywhere (``format.value_text`` in its unit)."""
        return value_text(value, self.unit, currency=currency)


@dataclass(frozen=True, slots=True)
class Activity:
    """An activity of Dask's fine performance metrics (an open set: Dask and user code
    through ``context_meter`` add their own), or an action of its task stream; ``colour``
    is the one it is drawn in on every page."""

    name: str
    units: tuple[str, ...]
    meaning: str
    colour: str
