"""Dask's statistical profile trees as flame-graph (icicle) arrays (pure).

A profile node is ``{identifier, count, description{filename, name, line_number,
line}, children: {identifier: node}}``; samples are taken every ``interval`` seconds,
so seconds ~ count x interval, and a frame's self count is its count minus its
children's.

Dask's workers sample with ``profile.process(frame, True, ...)``: every frame of a
sample is counted except the innermost one (the count meant for it is left to the
low-level profiler, off by default). So each frame's count lacks the samples that ended
in it, a leaf always reads 0, and the frame that burnt the time (a user's function
spinning in C calls) is drawn with no width. :func:`count_innermost` puts those samples
back: exactly where a frame has one callee, and split over its callees where it has
several (the profile does not say how; such splits are counted in the result).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["INNERMOST_COUNTED", "count_innermost", "icicle", "merge_trees"]

ROOT = "all"
#: Marks a tree (its root) whose innermost frames were counted: the number of frames
#: whose callees' split had to be estimated
INNERMOST_COUNTED = "innermost_counted"


def count_innermost(tree: dict[str, Any]) -> int:
    """Give each frame of a Dask worker profile tree the samples that ended in it (in
    place; a tree already marked :data:`INNERMOST_COUNTED` is left as it is).

    In Dask's tree a frame's count is the samples that went on into its callees, so a
    parent's count is the sum of its callees' real counts: the surplus over their
    recorded counts belongs to them. One callee takes all of it; several share it (one
    sample to each that has none, the rest evenly, the remainder by identifier order).
    Returns how many frames' surplus had to be split (0: every count is exact)."""
    if tree.get(INNERMOST_COUNTED) is not None:
        return int(tree[INNERMOST_COUNTED])
    estimated = 0
    # (node, its count as Dask recorded it): a node's surplus is over its recorded count
    pending = [(tree, int(tree.get("count") or 0))]
    while pending:  # without recursion: stacks may be hundreds deep
        node, count = pending.pop()
        children = [c for _, c in sorted((node.get("children") or {}).items())]
        if not children:
            continue
        recorded = [int(c.get("count") or 0) for c in children]
        surplus = max(0, count - sum(recorded))
        added = [0] * len(children)
        if len(children) == 1:
            added[0] = surplus
        elif surplus:
            estimated += 1
            for i, n in enumerate(recorded):
                if n == 0 and surplus:
                    added[i] += 1
                    surplus -= 1
            share, rest = divmod(surplus, len(children))
            for i in range(len(children)):
                added[i] += share + (1 if i < rest else 0)
        for child, n, extra in zip(children, recorded, added, strict=True):
            child["count"] = n + extra
            pending.append((child, n))
    tree[INNERMOST_COUNTED] = estimated
    return estimated


def _empty() -> dict[str, Any]:
    return {"count": 0, "description": {}, "children": {}}


def merge_trees(trees: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Sum several profile trees (e.g. consecutive windows) node by node, each with its
    innermost frames counted (:func:`count_innermost`, in place); the merged root says
    how many splits were estimated (:data:`INNERMOST_COUNTED`)."""
    merged = _empty()
    estimated = 0

    def add(into: dict[str, Any], node: Mapping[str, Any]) -> None:
        into["count"] += int(node.get("count") or 0)
        if not into["description"]:
            into["description"] = dict(node.get("description") or {})
        for ident, child in (node.get("children") or {}).items():
            add(into["children"].setdefault(ident, _empty()), child)

    for tree in trees:
        # trees recorded before the recorder counted innermost frames: counted here
        estimated += count_innermost(tree)
        add(merged, tree)
    merged[INNERMOST_COUNTED] = estimated
    return merged


def icicle(tree: Mapping[str, Any], interval: float) -> dict[str, Any]:
    """Parallel arrays for a plotly icicle with ``branchvalues="total"``:
    ``ids, labels, parents, values`` (total samples) plus ``self_s``, ``total_s`` and
    ``where`` (file:line) for tooltips. ``values`` is never below the sum of the
    children's, which plotly requires of a "total" tree."""
    out: dict[str, list[Any]] = {
        "ids": [],
        "labels": [],
        "parents": [],
        "values": [],
        "self_s": [],
        "total_s": [],
        "where": [],
    }

    def visit(node: Mapping[str, Any], node_id: str, label: str, parent: str) -> int:
        children = node.get("children") or {}
        child_totals = 0
        slot = len(out["ids"])
        for key in ("ids", "labels", "parents", "values", "self_s", "total_s", "where"):
            out[key].append(None)
        for i, (ident, child) in enumerate(sorted(children.items())):
            desc = child.get("description") or {}
            child_label = desc.get("name") or ident.split(";")[0] or "?"
            child_totals += visit(child, f"{node_id}/{i}", child_label, node_id)
        total = max(int(node.get("count") or 0), child_totals)
        desc = node.get("description") or {}
        where = ""
        if desc.get("filename"):
            where = f"{desc['filename']}:{desc.get('line_number', '')}"
            if desc.get("line"):
                where += f"  {str(desc['line']).strip()}"
        out["ids"][slot] = node_id
        out["labels"][slot] = label
        out["parents"][slot] = parent
        out["values"][slot] = total
        out["self_s"][slot] = (total - child_totals) * interval
        out["total_s"][slot] = total * interval
        out["where"][slot] = where
        return total

    total = visit(tree, ROOT, ROOT, "")
    return {**out, "interval": interval, "samples": total, "seconds": total * interval}
