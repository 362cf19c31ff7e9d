"""One computation with its task-group graph, laid out in layers (the graph the
cluster page draws when a computation is opened)."""

from __future__ import annotations

from dataclasses import dataclass

from daskscope.analysis.graph import ACTIVITY_COLOURS, task_group_graph
from daskscope.store import Store
from daskscope.store.groups import computation_graph_groups
from daskscope.views.rows import pick

__all__ = ["ComputationGraph", "GraphEdge", "GraphNode", "computation_view"]

#: Task groups drawn in a computation's graph: the longest this many
MAX_GRAPH_GROUPS = 300


@dataclass(frozen=True)
class GraphNode:
    """A task group placed in the graph: layer ``x``, position ``y`` in its layer, area
    by memory, colour by its dominant activity."""

    name: str
    prefix: str | None
    x: int
    y: float
    size: float
    activity: str | None
    colour: str
    failed: bool
    tasks_total: int
    tasks_executed: int
    tasks_erred: int
    nbytes_total: int
    duration_s: float
    durations: dict[str, float]


@dataclass(frozen=True)
class GraphEdge:
    """From a dependency to its dependent."""

    source: str
    target: str


@dataclass(frozen=True)
class ComputationGraph:
    """A computation's longest groups as a graph; the others are counted, and listed by
    ``all_groups_url``."""

    computation_id: str
    code: list[str]
    nodes: list[GraphNode]
    edges: list[GraphEdge]
    layers: int
    groups_total: int
    groups_drawn: int
    groups_not_drawn: int
    all_groups_url: str
    activity_colours: dict[str, str]


def computation_view(
    store: Store,
    cluster_id: str,
    computation_id: str,
    *,
    all_groups_url: str,
    limit: int = MAX_GRAPH_GROUPS,
) -> ComputationGraph | None:
    """The graph of the ``limit`` longest groups of a computation (None: the cluster
    has no such computation); ``all_groups_url`` is where all of them are listed."""
    found = computation_graph_groups(store, cluster_id, computation_id, limit=limit)
    if found is None:
        return None
    comp, groups, total = found
    graph = task_group_graph(groups)
    return ComputationGraph(
        computation_id=comp["id"],
        code=comp["code"],
        nodes=[pick(GraphNode, n) for n in graph["nodes"]],
        edges=[pick(GraphEdge, e) for e in graph["edges"]],
        layers=graph["layers"],
        # A graph of thousands of groups is neither drawable nor readable: the
        # longest are drawn, the rest are counted (and listed by the paged route).
        groups_total=total,
        groups_drawn=len(groups),
        groups_not_drawn=total - len(groups),
        all_groups_url=all_groups_url,
        activity_colours=dict(ACTIVITY_COLOURS),
    )
