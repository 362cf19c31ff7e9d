"""Task-group graphs a person can read at any size (pure, no plotting).

A layered layout that fills a chart's width: layers are longest paths from the sources
(edges that close a cycle are set aside first, so that every other edge points
rightwards), groups in a layer are ordered by the mean position of their neighbours
(barycentre sweeps both ways), and a layer taller than the chart's shape allows is laid
out in several columns side by side, so that a graph of few layers and many groups is a
grid rather than one tall column of overlapping circles. Positions are whole columns and
rows: no two nodes share a cell.

Folding: a computation of thousands of groups is drawn as one node per task prefix (or
per span), each saying how many groups it holds; a fold opened on demand shows its
longest groups, the rest of it staying one node. Every group is counted somewhere, and
the result says how many are folded. Nodes carry their dominant activity; colours are
the catalogue's, given by the view.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "ASPECT",
    "FOLDS",
    "MAX_FOLDS",
    "MAX_OPEN",
    "MAX_OPENED",
    "Fold",
    "Layout",
    "dominant_activity",
    "fold_groups",
    "layered_layout",
]

Fold = Literal["prefix", "span"]
FOLDS: tuple[Fold, ...] = ("prefix", "span")
#: The width over the height the layout aims at (a dashboard chart, about 1100 x 460 px)
ASPECT = 2.4
#: Fold nodes drawn; beyond, the smallest folds (by task time) are one node "N other ..."
MAX_FOLDS = 40
#: Groups an opened fold draws (its longest); the rest of it stays one node
MAX_OPEN = 100
#: Folds open at once (opening another closes the one opened first)
MAX_OPENED = 3
#: Nodes past which a layout is ordered by one sweep only (their order is for the JSON:
#: a graph this large is drawn folded)
_SWEPT = 2000
#: Nodes' diameters in px as the JSON gives them (a page fits them to its chart)
_SMALLEST, _LARGEST = 12.0, 48.0

Row = Mapping[str, Any]


def dominant_activity(durations: Mapping[str, float] | None) -> str | None:
    """The activity with the most seconds (ties: alphabetical), None if nothing ran."""
    items = [(float(v), k) for k, v in (durations or {}).items() if v and float(v) > 0]
    if not items:
        return None
    return min(items, key=lambda item: (-item[0], item[1]))[1]


@dataclass(frozen=True)
class Layout:
    """Where each node goes: ``position`` (column, row) with rows centred on 0 in each
    column; ``layer`` of each node; ``bands`` the first and last column of each layer;
    ``reversed`` the edges set aside as closing a cycle (they point leftwards)."""

    position: dict[str, tuple[int, float]]
    layer: dict[str, int]
    columns: int
    rows: int
    bands: list[tuple[int, int]]
    reversed: set[tuple[str, str]]


def _back_edges(names: Sequence[str], out: Mapping[str, list[str]]) -> set[tuple[str, str]]:
    """Edges that close a cycle, found by a depth-first search from ``names`` in order
    (iterative: a chain of 20,000 groups is no recursion)."""
    state = dict.fromkeys(names, 0)  # 0 unseen, 1 on the stack, 2 done
    back: set[tuple[str, str]] = set()
    for root in names:
        if state[root]:
            continue
        state[root] = 1
        stack = [(root, iter(out[root]))]
        while stack:
            node, children = stack[-1]
            for child in children:
                if state[child] == 1:
                    back.add((node, child))
                elif state[child] == 0:
                    state[child] = 1
                    stack.append((child, iter(out[child])))
                    break
            else:
                state[node] = 2
                stack.pop()
    return back


def _rows_per_column(sizes: Counter[int], aspect: float) -> int:
    """The most rows a column holds: the count whose columns over rows is nearest the
    aspect (a layer of n nodes takes ceil(n / rows) columns)."""
    tallest = max(sizes)
    best, score = tallest, math.inf
    for rows in range(1, tallest + 1):
        columns = sum(-(-size // rows) * count for size, count in sizes.items())
        off = abs(math.log((columns / rows) / aspect))
        if off < score - 1e-9:
            best, score = rows, off
    return best


def layered_layout(
    names: Sequence[str], edges: Iterable[tuple[str, str]], *, aspect: float = ASPECT
) -> Layout:
    """Columns and rows for a directed graph's nodes (``names`` in the order that breaks
    ties and cycles: e.g. by start time), edges from dependency to dependent; edges to
    unknown nodes are left out."""
    known = set(names)
    out: dict[str, list[str]] = {n: [] for n in names}
    pairs = sorted({(a, b) for a, b in edges if a in known and b in known and a != b})
    for a, b in pairs:
        out[a].append(b)
    back = _back_edges(names, out)
    forward = [(a, b) for a, b in pairs if (a, b) not in back] if back else pairs
    ins: dict[str, list[str]] = {n: [] for n in names}
    outs: dict[str, list[str]] = {n: [] for n in names}
    for a, b in forward:
        ins[b].append(a)
        outs[a].append(b)
    # longest path from the sources, in a topological order (Kahn's)
    indegree = {n: len(ins[n]) for n in names}
    layer = dict.fromkeys(names, 0)
    ready = [n for n in reversed(names) if indegree[n] == 0]
    while ready:
        n = ready.pop()
        for m in outs[n]:
            layer[m] = max(layer[m], layer[n] + 1)
            indegree[m] -= 1
            if indegree[m] == 0:
                ready.append(m)
    layers: dict[int, list[str]] = defaultdict(list)
    for n in names:  # in the given order: the first ordering within a layer
        layers[layer[n]].append(n)
    order = [layers[i] for i in sorted(layers)]
    # barycentre sweeps: down using dependencies, then twice up using dependents and
    # down again
    rank = {n: i - (len(members) - 1) / 2 for members in order for i, n in enumerate(members)}

    def sweep(members: list[str], neighbours: Mapping[str, list[str]]) -> None:
        def key(n: str) -> float:
            near = neighbours[n]
            return sum(rank[m] for m in near) / len(near) if near else rank[n]

        members.sort(key=key)
        for i, n in enumerate(members):
            rank[n] = i - (len(members) - 1) / 2

    # (a graph of thousands of groups, which is drawn folded, gets one sweep down)
    rounds = 2 if len(names) <= _SWEPT else 0
    for members in order[1:]:
        sweep(members, ins)
    for _ in range(rounds):
        for members in reversed(order[:-1]):
            sweep(members, outs)
        for members in order[1:]:
            sweep(members, ins)
    # a tall layer in several columns, its nodes dealt across them row by row: a row
    # keeps the place the sweeps gave it
    tallest = _rows_per_column(Counter(len(m) for m in order), aspect) if order else 1
    position: dict[str, tuple[int, float]] = {}
    bands = []
    column = 0
    rows = 0
    for members in order:
        width = -(-len(members) // tallest)
        height = -(-len(members) // width)
        rows = max(rows, height)
        for i, n in enumerate(members):
            position[n] = (column + i % width, i // width - (height - 1) / 2)
        bands.append((column, column + width - 1))
        column += width
    return Layout(position, layer, column, rows, bands, back)


def _fold_of(group: Row, by: Fold) -> str:
    key = group.get("prefix") if by == "prefix" else group.get("span_id")
    return f"{by}:{'' if key is None else key}"


def _label(fold: str, labels: Mapping[str, str]) -> str:
    by, _, key = fold.partition(":")
    if not key:
        return f"(no {by})"
    return labels.get(key, key) if by == "span" else key


@dataclass
class _Node:
    id: str
    kind: str  # "group", "fold", "more" (the rest of an opened fold), "other"
    fold: str | None  # the fold it stands for or belongs to
    label: str
    members: int = 0
    tasks_total: int = 0
    tasks_executed: int = 0
    tasks_erred: int = 0
    nbytes_total: int = 0
    duration_s: float = 0.0
    size_value: float = 0.0
    highlighted: int = 0
    first: float = math.inf
    prefix: str | None = None
    durations: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    names: list[str] = field(default_factory=list)

    def add(self, g: Row, size: float, sum_sizes: bool, lit: bool) -> None:
        self.members += 1
        self.tasks_total += int(g.get("tasks_total") or 0)
        self.tasks_executed += int(g.get("tasks_executed") or 0)
        self.tasks_erred += int(g.get("tasks_erred") or 0)
        self.nbytes_total += int(g.get("nbytes_total") or 0)
        self.duration_s += float(g.get("duration_s") or 0.0)
        for k, v in (g.get("durations") or {}).items():
            self.durations[k] += float(v or 0.0)
        self.size_value = self.size_value + size if sum_sizes else max(self.size_value, size)
        self.highlighted += lit
        started = g.get("started_at")
        if started is not None:
            self.first = min(self.first, float(started))
        if len(self.names) < 5:
            self.names.append(g["name"])


def _longest_first(g: Row) -> tuple[float, str]:
    return (-float(g.get("duration_s") or 0.0), g["name"])


def fold_groups(
    groups: Sequence[Row],
    *,
    by: Fold | None,
    opened: Collection[str] = (),
    labels: Mapping[str, str] | None = None,
    path: Sequence[str] = (),
    sizes: Mapping[str, float] | None = None,
    limit: int = 300,
    max_folds: int = MAX_FOLDS,
    max_open: int = MAX_OPEN,
    aspect: float = ASPECT,
) -> dict[str, Any]:
    """A computation's groups as a graph of at most a few hundred nodes.

    ``by``: one node per prefix or per span (``labels``: span id -> name), or None for
    the ``limit`` longest groups each as a node. A group's node has its name as ``id``;
    a fold's is ``"prefix:NAME"`` or ``"span:ID"``, the rest of an opened one
    ``"more:"`` and its id, the folds past ``max_folds`` together ``"other"``.
    ``opened``: folds drawn as their ``max_open`` longest groups plus one node for the
    rest; the last :data:`MAX_OPENED` count. ``path``: groups in order (the critical
    path) whose members each node counts (``highlighted``) and whose steps each edge
    counts (``path_steps``). ``sizes``: a group's value for its node's area (summed in a
    fold: memory; with ``path``, the largest: longest task); default ``nbytes_total``."""
    by_name = {g["name"]: g for g in groups}
    lit = set(path)
    sum_sizes = sizes is None

    def size_of(g: Row) -> float:
        if sizes is None:
            return float(g.get("nbytes_total") or 0)
        return float(sizes.get(g["name"], 0.0))

    labels = labels or {}
    nodes: dict[str, _Node] = {}
    node_of: dict[str, str] = {}
    folded = not_drawn = 0
    open_now: list[str] = []
    if by is None:
        drawn = sorted(groups, key=_longest_first)[:limit]
        for g in drawn:
            nodes[g["name"]] = _Node(g["name"], "group", None, g["name"])
            node_of[g["name"]] = g["name"]
        not_drawn = len(by_name) - len(drawn)
    else:
        members: dict[str, list[Row]] = defaultdict(list)
        for g in by_name.values():
            members[_fold_of(g, by)].append(g)
        seconds = {
            f: sum(float(g.get("duration_s") or 0.0) for g in ms) for f, ms in members.items()
        }
        ranked = sorted(members, key=lambda f: (-seconds[f], f))
        kept = ranked if len(ranked) <= max_folds else ranked[: max_folds - 1]
        others = ranked[len(kept) :]
        open_now = [f for f in dict.fromkeys(opened) if f in members and f not in others]
        open_now = open_now[-MAX_OPENED:]
        for f in kept:
            if f in open_now:
                ms = sorted(members[f], key=_longest_first)
                for g in ms[:max_open]:
                    nodes[g["name"]] = _Node(g["name"], "group", f, g["name"])
                    node_of[g["name"]] = g["name"]
                if len(ms) > max_open:
                    rest = f"more:{f}"
                    more = f"{_label(f, labels)}: {len(ms) - max_open:,} more"
                    nodes[rest] = _Node(rest, "more", f, more)
                    for g in ms[max_open:]:
                        node_of[g["name"]] = rest
            else:
                nodes[f] = _Node(f, "fold", f, _label(f, labels))
                for g in members[f]:
                    node_of[g["name"]] = f
        if others:
            what = "prefixes" if by == "prefix" else "spans"
            nodes["other"] = _Node("other", "other", None, f"{len(others):,} other {what}")
            for f in others:
                for g in members[f]:
                    node_of[g["name"]] = "other"
    for name, nid in node_of.items():
        g = by_name[name]
        node = nodes[nid]
        node.add(g, size_of(g), sum_sizes, name in lit)
        if node.kind == "group":
            node.prefix = g.get("prefix")
    folded = sum(n.members for n in nodes.values() if n.kind != "group")
    edge_groups: Counter[tuple[str, str]] = Counter()
    for name, nid in node_of.items():
        for dep in by_name[name].get("dependencies") or ():
            source = node_of.get(dep)
            if source is not None and source != nid:
                edge_groups[(source, nid)] += 1
    steps: Counter[tuple[str, str]] = Counter()
    for a, b in itertools.pairwise(path):
        pair = (node_of.get(a), node_of.get(b))
        if pair in edge_groups:
            steps[pair] += 1  # type: ignore[index]
    order = sorted(nodes.values(), key=lambda n: (n.first, n.id))
    layout = layered_layout([n.id for n in order], edge_groups, aspect=aspect)
    largest = max((n.size_value for n in nodes.values()), default=0.0)
    out_nodes = []
    for n in order:
        activity = dominant_activity(n.durations)
        weight = math.sqrt(n.size_value / largest) if largest > 0 else 0.0
        x, y = layout.position[n.id]
        out_nodes.append(
            {
                "id": n.id,
                "name": n.label if n.kind != "group" else n.names[0],
                "label": n.label if n.kind != "group" else (n.prefix or n.label),
                "kind": n.kind,
                "fold": n.fold,
                "prefix": n.prefix,
                "groups": n.members,
                "examples": n.names,
                "x": x,
                "y": y,
                "layer": layout.layer[n.id],
                "weight": weight,
                "size": _SMALLEST + (_LARGEST - _SMALLEST) * weight,
                "size_value": n.size_value,
                "activity": activity,
                "failed": n.tasks_erred > 0,
                "tasks_total": n.tasks_total,
                "tasks_executed": n.tasks_executed,
                "tasks_erred": n.tasks_erred,
                "nbytes_total": n.nbytes_total,
                "duration_s": n.duration_s,
                "durations": dict(n.durations),
                "highlighted": n.highlighted,
            }
        )
    edges = [
        {
            "source": a,
            "target": b,
            "groups": k,
            "path_steps": steps.get((a, b), 0),
            "reversed": (a, b) in layout.reversed,
        }
        for (a, b), k in sorted(edge_groups.items())
    ]
    drawn_alone = sum(1 for n in nodes.values() if n.kind == "group")
    return {
        "fold": by,
        "opened": open_now,
        "nodes": out_nodes,
        "edges": edges,
        "layers": len(layout.bands),
        "columns": layout.columns,
        "rows": layout.rows,
        "bands": [list(b) for b in layout.bands],
        "groups_total": len(by_name),
        "groups_drawn": drawn_alone,
        "groups_folded": folded,
        "groups_not_drawn": not_drawn,
        "fold_nodes": sum(1 for n in nodes.values() if n.kind != "group"),
    }
