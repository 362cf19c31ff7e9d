"""One computation with its task-group graph, laid out in layers (the graph the
cluster page draws when a computation is opened, and the computation page with its
critical path). A large graph is folded: one node per task prefix or span, opened on
demand (:func:`daskscope.analysis.graph_layout.fold_groups`)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from daskscope.analysis.graph_layout import fold_groups
from daskscope.catalogue import NO_ACTIVITY_COLOUR, task_action_colours
from daskscope.store import Store
from daskscope.views.memo import memoized
from daskscope.views.rows import pick

__all__ = ["FOLD_ABOVE", "ComputationGraph", "GraphEdge", "GraphNode", "computation_view"]

#: Task groups drawn in a computation's graph unfolded: the longest this many
MAX_GRAPH_GROUPS = 300
#: Groups past which a graph is folded (by prefix) unless asked otherwise
FOLD_ABOVE = 100
#: Groups read to fold a graph: past this many, the longest are drawn unfolded
MAX_FOLDED_GROUPS = 50_000

FoldAsked = Literal["auto", "prefix", "span", "none"]


@dataclass(frozen=True)
class GraphNode:
    """A task group placed in the graph, or a fold of groups (``kind``: ``group``,
    ``fold``: a prefix's or a span's groups, ``more``: the rest of an opened fold,
    ``other``: the smallest folds together): column ``x``, row ``y``, ``layer``, area
    by memory (``weight`` 0-1; with a critical path, by longest task), colour by its
    dominant activity; ``groups`` it stands for (``examples``: up to 5 names),
    ``highlighted`` of them on the critical path; ``size_value``: what its area shows
    (bytes summed; with a critical path, the longest task in seconds)."""

    id: str
    kind: str
    fold: str | None
    label: str
    groups: int
    examples: list[str]
    layer: int
    weight: float
    size_value: float
    highlighted: int
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
    """From a dependency to its dependent (node ids); ``groups``: the group-to-group
    dependencies it stands for, ``path_steps`` of them steps of the critical path;
    ``reversed``: it closes a cycle between folds, so it points leftwards."""

    source: str
    target: str
    groups: int = 1
    path_steps: int = 0
    reversed: bool = False


@dataclass(frozen=True)
class ComputationGraph:
    """A computation's groups as a graph: each drawn as its own node
    (``groups_drawn``), inside a fold (``groups_folded``, by ``fold``: "prefix",
    "span", or None), or, unfolded past :data:`MAX_GRAPH_GROUPS`, not drawn
    (``groups_not_drawn``: the longest are drawn); all listed by ``all_groups_url``.
    ``opened``: the folds drawn open; ``columns`` and ``rows`` of the layout, ``bands``
    the first and last column of each layer; ``path_groups``: groups of the critical
    path highlighted (0: none asked)."""

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
    fold: str | None
    opened: list[str]
    groups_folded: int
    fold_nodes: int
    columns: int
    rows: int
    bands: list[list[int]]
    path_groups: int


def _graph_rows(
    store: Store, cluster_id: str, computation_id: str, fingerprint: Any
) -> tuple[dict[str, Any], list[dict[str, Any]], int, dict[str, str]] | None:
    """The computation's groups as a graph reads them, kept while unchanged
    (:mod:`daskscope.views.memo`)."""

    def build() -> Any:
        return store.computation_graph_rows(
            cluster_id, computation_id, limit=MAX_FOLDED_GROUPS, longest=MAX_GRAPH_GROUPS
        )

    key = ("graph-rows", cluster_id, computation_id)
    found = memoized(store, key, fingerprint, build, lambda v: len(v[1]) if v else 1)
    return found  # type: ignore[no-any-return]


def computation_view(
    store: Store,
    cluster_id: str,
    computation_id: str,
    *,
    all_groups_url: str,
    fold: FoldAsked = "auto",
    opened: Collection[str] = (),
    path: Sequence[str] = (),
    sizes: Mapping[str, float] | None = None,
    limit: int = MAX_GRAPH_GROUPS,
    fingerprint: Any = None,
) -> ComputationGraph | None:
    """The computation's graph (None: the cluster has no such computation);
    ``all_groups_url`` is where all of its groups are listed. ``fold``: "prefix" or
    "span" (one node each, ``opened`` ones drawn as their groups), "none" (the
    ``limit`` longest groups), "auto" (by prefix past :data:`FOLD_ABOVE` groups).
    ``path``: the critical path's groups, to highlight; ``sizes``: each group's value
    for its area (default: memory), worked out from the same rows (the graph is kept
    while they are unchanged: ``fingerprint``, else read here)."""
    if fingerprint is None:
        fingerprint = store.computation_fingerprint(cluster_id, computation_id)
    key = ("graph", cluster_id, computation_id, fold, tuple(opened), tuple(path), sizes is None)

    def build() -> ComputationGraph | None:
        return _graph(
            store, cluster_id, computation_id, fingerprint, all_groups_url=all_groups_url,
            fold=fold, opened=opened, path=path, sizes=sizes, limit=limit,
        )  # fmt: skip

    return memoized(store, (*key, all_groups_url, limit), fingerprint, build)


def _graph(
    store: Store,
    cluster_id: str,
    computation_id: str,
    fingerprint: Any,
    *,
    all_groups_url: str,
    fold: FoldAsked,
    opened: Collection[str],
    path: Sequence[str],
    sizes: Mapping[str, float] | None,
    limit: int,
) -> ComputationGraph | None:
    found = _graph_rows(store, cluster_id, computation_id, fingerprint)
    if found is None:
        return None
    comp, groups, total, span_names = found
    by: Any = None if fold == "none" else fold
    if fold == "auto":
        by = "prefix" if total > FOLD_ABOVE else None
    if len(groups) < total:  # too many to fold: its longest, unfolded
        by = None
    graph = fold_groups(
        groups, by=by, opened=opened, labels=span_names, path=path, sizes=sizes, limit=limit
    )
    colours = task_action_colours(n["activity"] for n in graph["nodes"])
    return ComputationGraph(
        computation_id=comp["id"],
        code=comp["code"],
        nodes=[
            pick(GraphNode, n, colour=colours.get(n["activity"] or "", NO_ACTIVITY_COLOUR))
            for n in graph["nodes"]
        ],
        edges=[pick(GraphEdge, e) for e in graph["edges"]],
        layers=graph["layers"],
        # A graph of thousands of groups is neither drawable nor readable: folded, each
        # group is counted in a node; unfolded, the longest are drawn and the rest
        # counted (all are listed by the paged route).
        groups_total=total,
        groups_drawn=graph["groups_drawn"],
        groups_not_drawn=total - graph["groups_drawn"] - graph["groups_folded"],
        all_groups_url=all_groups_url,
        activity_colours=colours,
        fold=graph["fold"],
        opened=graph["opened"],
        groups_folded=graph["groups_folded"],
        fold_nodes=graph["fold_nodes"],
        columns=graph["columns"],
        rows=graph["rows"],
        bands=graph["bands"],
        path_groups=len(set(path)),
    )
