"""The task-group graph of a computation, laid out in layers (pure, no plotting).

Arrows point from dependency to dependent. Layers are longest paths from the sources,
so every arrow points rightwards; within a layer, groups are ordered by the mean
position of their neighbours (barycentre sweeps), which keeps edges short, and a tall
layer takes several columns (:func:`daskscope.analysis.graph_layout.layered_layout`). Each
node carries its dominant activity; its colour is the catalogue's
(``daskscope.catalogue.activity_colours``), given by the view.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

# the layout (graph_layout.py) colours its folds by the activity too: it is defined there
from daskscope.analysis.graph_layout import dominant_activity, layered_layout

__all__ = ["dominant_activity", "task_group_graph"]

Row = Mapping[str, Any]


def task_group_graph(groups: Iterable[Row]) -> dict[str, Any]:
    """Nodes (with ``x``, ``y``, ``size``, ``activity``, ``failed``) and edges of the
    groups' dependency graph; dependencies outside ``groups`` are left out."""
    rows = {g["name"]: g for g in groups}
    names = sorted(rows)
    deps = {n: [d for d in (rows[n].get("dependencies") or []) if d in rows] for n in names}
    # layers by longest path, each ordered by its neighbours and, when tall, laid out
    # in several columns (analysis/graph_layout.py): x is a column, y a row
    layout = layered_layout(names, ((d, n) for n in names for d in deps[n]))
    position = layout.position

    largest = max((int(rows[n].get("nbytes_total") or 0) for n in names), default=0)
    nodes = []
    for n in names:
        g = rows[n]
        nbytes = int(g.get("nbytes_total") or 0)
        activity = dominant_activity(g.get("durations"))
        # Area proportional to memory: size grows with the square root, from 12 to 48 px.
        size = 12 + (36 * math.sqrt(nbytes / largest) if largest else 0)
        nodes.append(
            {
                "name": n,
                "prefix": g.get("prefix"),
                "x": position[n][0],
                "y": position[n][1],
                "size": size,
                "activity": activity,
                "failed": int(g.get("tasks_erred") or 0) > 0,
                "tasks_total": int(g.get("tasks_total") or 0),
                "tasks_executed": int(g.get("tasks_executed") or 0),
                "tasks_erred": int(g.get("tasks_erred") or 0),
                "nbytes_total": nbytes,
                "duration_s": float(g.get("duration_s") or 0.0),
                "durations": dict(g.get("durations") or {}),
            }
        )
    edges = [{"source": d, "target": n} for n in names for d in deps[n]]
    return {"nodes": nodes, "edges": edges, "layers": len(layout.bands)}
