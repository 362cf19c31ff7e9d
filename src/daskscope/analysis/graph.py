"""The task-group graph of a computation, laid out in layers (pure, no plotting).

Arrows point from dependency to dependent. Layers are longest paths from the sources,
so every arrow points rightwards; within a layer, groups are ordered by the mean
position of their dependencies (one barycentre sweep), which keeps edges short.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["ACTIVITY_COLOURS", "dominant_activity", "task_group_graph"]

#: Fill colours by dominant activity, after the scheme of Dask's task stream (transfer
#: red, disk I/O orange, deserialisation grey); compute gets one colour here because a
#: colour per prefix would be unreadable across hundreds of groups.
ACTIVITY_COLOURS = {
    "compute": "#3b7dd8",
    "transfer": "#e0413a",
    "disk-read": "#f39c12",
    "disk-write": "#f39c12",
    "deserialize": "#8c8c8c",
}
OTHER_COLOUR = "#9b59b6"

Row = Mapping[str, Any]


def dominant_activity(durations: Mapping[str, float] | None) -> str | None:
    """The activity with the most seconds (ties: alphabetical), None if nothing ran."""
    items = [(float(v), k) for k, v in (durations or {}).items() if v and float(v) > 0]
    if not items:
        return None
    return min(items, key=lambda item: (-item[0], item[1]))[1]


def _layers(names: list[str], deps: dict[str, list[str]]) -> dict[str, int]:
    # Kahn's algorithm; groups left on a cycle (should not happen) go to layer 0.
    indegree = {n: len(deps[n]) for n in names}
    dependents: dict[str, list[str]] = {n: [] for n in names}
    for n in names:
        for d in deps[n]:
            dependents[d].append(n)
    layer = dict.fromkeys(names, 0)
    ready = [n for n in names if indegree[n] == 0]
    while ready:
        n = ready.pop()
        for m in dependents[n]:
            layer[m] = max(layer[m], layer[n] + 1)
            indegree[m] -= 1
            if indegree[m] == 0:
                ready.append(m)
    return layer


def task_group_graph(groups: Iterable[Row]) -> dict[str, Any]:
    """Nodes (with ``x``, ``y``, ``size``, ``colour``, ``failed``) and edges of the
    groups' dependency graph; dependencies outside ``groups`` are left out."""
    rows = {g["name"]: g for g in groups}
    names = sorted(rows)
    deps = {n: [d for d in (rows[n].get("dependencies") or []) if d in rows] for n in names}
    layer = _layers(names, deps)
    by_layer: dict[int, list[str]] = {}
    for n in names:
        by_layer.setdefault(layer[n], []).append(n)
    position: dict[str, float] = {}
    for index in sorted(by_layer):
        members = by_layer[index]

        def barycentre(n: str) -> tuple[float, str]:
            parents = [position[d] for d in deps[n] if d in position]
            return (sum(parents) / len(parents) if parents else 0.0, n)

        members.sort(key=barycentre)
        for i, n in enumerate(members):
            position[n] = i - (len(members) - 1) / 2

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
                "x": layer[n],
                "y": position[n],
                "size": size,
                "activity": activity,
                "colour": ACTIVITY_COLOURS.get(activity or "", OTHER_COLOUR)
                if activity
                else "#d0d0d0",
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
    return {"nodes": nodes, "edges": edges, "layers": len(by_layer)}
