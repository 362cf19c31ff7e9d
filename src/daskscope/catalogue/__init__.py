"""The metric catalogue: every figure daskscope shows, with its label, unit, formula,
source and which direction is better, in one place that ``docs/metrics.md``, the views,
the pages and comparisons read.

A figure is named by its id ``"<scope>.<key>"`` (``"cluster.duration_s"``,
``"cluster.cost.total"``, ``"workflow.data_rate_gbps"``): ``scope`` says what it
describes (:data:`SCOPES`), ``key`` is its field name in that scope's rows. Units are
those :mod:`daskscope.format` knows (:data:`daskscope.format.UNITS`), so
``figure("cluster.utilisation").text(0.5)`` reads ``"50.0 %"`` everywhere.

Dask's fine metrics are an open set of activities: :data:`ACTIVITIES` explains those Dask
emits, :data:`TASK_ACTIONS` its task stream's actions, each with the one colour every page
draws it in (:func:`activity_colours` gives names it does not know colours of their own).
``python -m daskscope.catalogue --write-docs docs/metrics.md`` writes the
tables of ``docs/metrics.md`` from here.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import get_args

from daskscope.catalogue import records, workflow
from daskscope.catalogue.activities import (
    ACTIVITIES,
    ACTIVITY_COLOURS,
    NO_ACTIVITY_COLOUR,
    RESERVE,
    SPAN_FIGURES_NOTE,
    TASK_ACTIONS,
    activity_colours,
    task_action_colours,
)
from daskscope.catalogue.figure import Activity, Better, Figure, Scope

__all__ = [
    "ACTIVITIES",
    "ACTIVITY_COLOURS",
    "FIGURES",
    "NO_ACTIVITY_COLOUR",
    "RESERVE",
    "SCOPES",
    "SPAN_FIGURES_NOTE",
    "TASK_ACTIONS",
    "Activity",
    "Better",
    "Figure",
    "Scope",
    "activity",
    "activity_colours",
    "figure",
    "figures",
    "task_action_colours",
]

#: Every scope, in the order the docs list them
SCOPES: tuple[Scope, ...] = get_args(Scope)


def _index(all_figures: tuple[Figure, ...]) -> Mapping[str, Figure]:
    index: dict[str, Figure] = {}
    for f in all_figures:
        if f.id in index:
            raise ValueError(f"figure {f.id!r} is catalogued twice")
        index[f.id] = f
    return MappingProxyType(index)


#: Every figure by its id ``"<scope>.<key>"``
FIGURES: Mapping[str, Figure] = _index(records.FIGURES + workflow.FIGURES)


def figure(scope_or_id: str, key: str | None = None) -> Figure:
    """The figure ``figure("cluster.duration_s")`` or ``figure("cluster", "duration_s")``;
    KeyError naming the scope's known keys when there is none."""
    fid = scope_or_id if key is None else f"{scope_or_id}.{key}"
    try:
        return FIGURES[fid]
    except KeyError:
        scope = fid.split(".", 1)[0]
        known = [f.key for f in FIGURES.values() if f.scope == scope]
        hint = f"known in {scope!r}: {', '.join(known)}" if known else f"scopes: {SCOPES}"
        raise KeyError(f"no figure {fid!r} in the catalogue; {hint}") from None


def figures(scope: str) -> list[Figure]:
    """The figures of ``scope``, in catalogue order; ValueError for an unknown scope."""
    if scope not in SCOPES:
        raise ValueError(f"unknown scope {scope!r}; scopes: {', '.join(SCOPES)}")
    return [f for f in FIGURES.values() if f.scope == scope]


def activity(name: str) -> Activity | None:
    """What Dask documents of a fine-metric activity; None for one it does not (a custom
    ``context_meter`` label: the set is open)."""
    return next((a for a in ACTIVITIES if a.name == name), None)
