"""Dask's statistical profile trees as flame-graph (icicle) arrays (pure).

A profile node is ``{identifier, count, description{filename, name, line_number,
line}, children: {identifier: node}}``; samples are taken every ``interval`` seconds,
so seconds ~ count x interval, and a frame's self count is its count minus its
children's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["icicle", "merge_trees"]

ROOT = "all"


def _empty() -> dict[str, Any]:
    return {"count": 0, "description": {}, "children": {}}


def merge_trees(trees: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Sum several profile trees (e.g. consecutive windows) node by node."""
    merged = _empty()

    def add(into: dict[str, Any], node: Mapping[str, Any]) -> None:
        into["count"] += int(node.get("count") or 0)
        if not into["description"]:
            into["description"] = dict(node.get("description") or {})
        for ident, child in (node.get("children") or {}).items():
            add(into["children"].setdefault(ident, _empty()), child)

    for tree in trees:
        add(merged, tree)
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
