"""Stored profiles as a speedscope file (https://www.speedscope.app/file-format-schema.json).

Dask keeps its statistical profile as a tree of frames with sample counts; speedscope's
"sampled" profile wants a shared table of frames, then stacks (lists of frame indices,
outermost first) with a weight each. Dask counts a sample at every
frame of its stack but the innermost (it leaves that one to its low-level profiler), so a
node's count minus its children's is the number of samples that ended in one of its
children: with one child, the stack ends there; with several, Dask does not say which,
and the stack ends at the node (as the cluster page's flame graph shows it). Each such
stack weighs ``samples x interval`` seconds, so the weights of a profile add up to its
samples x interval.

The file holds the whole cluster first, then one profile per computation (from the
profile windows that overlap it). A window is a second or more and holds the samples of
every worker thread, so a window that overlaps several computations is in the profile
of each: those profiles add up to more than the cluster's, and Dask does not record
which sample belonged to which computation to split them. Each profile's name says how
many of its windows it shares with other computations (their samples are in each).
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import dask.config
from dask.utils import parse_timedelta

from daskscope.analysis.flamegraph import merge_trees
from daskscope.export.common import call_line
from daskscope.views.export import ExportView, NothingRecorded, export_view

if TYPE_CHECKING:
    from daskscope.store import Store

__all__ = [
    "SCHEMA_URL",
    "NamedTree",
    "Speedscope",
    "frame_of",
    "speedscope_document",
    "speedscope_file",
    "speedscope_of",
]

SCHEMA_URL = "https://www.speedscope.app/file-format-schema.json"
#: computations given a profile of their own (the longest ones); the cluster's profile
#: holds every sample whatever their number
MAX_COMPUTATION_PROFILES = 50


@dataclass(frozen=True, slots=True)
class NamedTree:
    """One profile to write: a name and Dask's merged tree."""

    name: str
    tree: Mapping[str, Any]


def profile_interval() -> float:
    """Seconds between two samples of a worker's profiler (Dask's setting)."""
    interval = parse_timedelta(dask.config.get("distributed.worker.profile.interval", "10ms"))
    return float(interval or 0.01)


def frame_of(identifier: str, node: Mapping[str, Any]) -> tuple[str, str, int]:
    """(function, file, line) of a profile node: the function's first line, from Dask's
    identifier ``name;file;first line``, which names the node in every window (the
    description's line is wherever the first sample found it)."""
    desc = node.get("description") or {}
    name, _, rest = identifier.partition(";")
    file, _, line = rest.rpartition(";")
    if file and line.isdigit():
        return name, file, int(line)
    name = str(desc.get("name") or identifier or "?")
    return name, str(desc.get("filename") or ""), int(desc.get("line_number") or 0)


class _Frames:
    """The shared frame table: one entry per (function, file, line)."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self._index: dict[tuple[str, str, int], int] = {}

    def index(self, identifier: str, node: Mapping[str, Any]) -> int:
        name, file, line = frame_of(identifier, node)
        key = (name, file, line)
        found = self._index.get(key)
        if found is None:
            found = self._index[key] = len(self.rows)
            frame: dict[str, Any] = {"name": name}
            if file:
                frame["file"] = file
            if line:
                frame["line"] = line
            self.rows.append(frame)
        return found


def _sampled(
    name: str, tree: Mapping[str, Any], frames: _Frames, interval: float
) -> dict[str, Any]:
    samples: list[list[int]] = []
    weights: list[float] = []
    # depth first with an explicit stack: Dask's stacks go 100 frames deep, and a
    # merged tree may hold tens of thousands of nodes
    pending: list[tuple[Mapping[str, Any], list[int]]] = [(tree, [])]
    while pending:
        node, stack = pending.pop()
        children = node.get("children") or {}
        ended = int(node.get("count") or 0) - sum(
            int(c.get("count") or 0) for c in children.values()
        )
        if ended > 0:
            # samples whose innermost frame is a child of this node: the child's when it
            # has one, else Dask does not say which, and they stay with this node
            if len(children) == 1:
                [(only, child)] = children.items()
                samples.append([*stack, frames.index(only, child)])
            else:
                samples.append(stack)
            weights.append(ended * interval)
        for ident in sorted(children, reverse=True):  # popped in sorted order
            child = children[ident]
            pending.append((child, [*stack, frames.index(ident, child)]))
    return {
        "type": "sampled",
        "name": name,
        "unit": "seconds",
        "startValue": 0,
        "endValue": sum(weights),
        "samples": samples,
        "weights": weights,
    }


def speedscope_file(
    profiles: Sequence[NamedTree], *, name: str, interval: float, exporter: str = "daskscope"
) -> dict[str, Any]:
    """The speedscope document for the profiles given, which share one frame table."""
    frames = _Frames()
    rendered = [_sampled(p.name, p.tree, frames, interval) for p in profiles]
    return {
        "$schema": SCHEMA_URL,
        "name": name,
        "exporter": exporter,
        "activeProfileIndex": 0,
        "shared": {"frames": frames.rows},
        "profiles": rendered,
    }


def _overlapping(
    windows: Iterable[Mapping[str, Any]], start: float, stop: float
) -> list[Mapping[str, Any]]:
    return [w for w in windows if w["stopped_at"] >= start and w["started_at"] <= stop]


class _Overlaps:
    """How many computations overlap a window (any of the cluster's, not only those
    given a profile): those started by its end, less those stopped before its start."""

    def __init__(self, computations: Iterable[Mapping[str, Any]], last_seen: float) -> None:
        spans = [(c["started_at"], c["stopped_at"] or last_seen) for c in computations]
        self.starts = sorted(start for start, _ in spans)
        self.stops = sorted(stop for _, stop in spans)

    def count(self, window: Mapping[str, Any]) -> int:
        started = bisect.bisect_right(self.starts, window["stopped_at"])
        ended = bisect.bisect_left(self.stops, window["started_at"])
        return started - ended


def _windows_text(windows: Sequence[Mapping[str, Any]], overlaps: _Overlaps) -> str:
    """``(3 profile windows, 2 of them shared with other computations: …)``"""
    text = f"{len(windows)} profile window{'s' if len(windows) != 1 else ''}"
    shared = sum(overlaps.count(w) > 1 for w in windows)
    if shared:
        text += (
            f", {'all' if shared == len(windows) else shared} of them shared with other "
            "computations, whose samples they hold too"
        )
    return f"({text})"


class Speedscope:
    """The stored profiles as a speedscope file (see the module's docstring)."""

    name = "speedscope"
    format = "json"
    description = "speedscope's JSON"
    help = (
        "The stored profiles as speedscope JSON: open it in https://www.speedscope.app.\n\n"
        "A profile for the cluster, then one per computation (or only --computation's)."
    )
    media_type = "application/json"
    extension = "speedscope.json"
    subject = "profile"
    binary = False
    streamed = False
    options: tuple[str, ...] = ("computation", "window")

    def render(self, view: ExportView) -> Iterator[str]:
        """The file, whole. Raises NothingRecorded when the cluster (or the window)
        holds no profile sample."""
        return iter([json.dumps(speedscope_of(view))])


def speedscope_of(view: ExportView) -> dict[str, Any]:
    """A cluster's stored profiles as a speedscope document: the cluster (or the window
    asked for) first, then its computations; with a computation asked for, only that
    one. Raises NothingRecorded when the cluster (or the window) holds no profile
    sample."""
    from daskscope import __version__

    cluster = view.cluster
    computations = view.detail["computations"]
    computation = view.computation
    if computation is not None:
        computations = [c for c in computations if c["id"] == computation]
    windows = view.profile_windows()
    if not windows:
        raise NothingRecorded(
            f"cluster {view.cluster_id} has no profile sample"
            + (" in this window" if view.start is not None or view.stop is not None else "")
            + ": the recorder stores Dask's profiles in windows of daskscope.profile.interval "
            "(a cluster shorter than that may have none)"
        )
    label = cluster["name"] or view.cluster_id
    overlaps = _Overlaps(view.detail["computations"], cluster["last_seen_at"])
    profiles: list[NamedTree] = []
    if computation is None:
        profiles.append(NamedTree(f"cluster {label}", merge_trees(w["tree"] for w in windows)))
        longest = sorted(computations, key=_duration, reverse=True)[:MAX_COMPUTATION_PROFILES]
        computations = sorted(longest, key=lambda c: c["started_at"])
    for comp in computations:
        found = _overlapping(
            windows, comp["started_at"], comp["stopped_at"] or cluster["last_seen_at"]
        )
        if found or computation is not None:
            line = call_line(comp)
            title = f"computation {comp['id']}" + (f": {line[:80]}" if line else "")
            title += " " + _windows_text(found, overlaps)
            profiles.append(NamedTree(title, merge_trees(w["tree"] for w in found)))
    return speedscope_file(
        profiles,
        name=f"daskscope profile of {label}",
        interval=profile_interval(),
        exporter=f"daskscope {__version__}",
    )


def speedscope_document(
    store: Store,
    cluster_id: str,
    *,
    computation: str | None = None,
    start: float | None = None,
    stop: float | None = None,
) -> dict[str, Any]:
    """:func:`speedscope_of` the cluster's view, in one call. Raises UnknownCluster,
    UnknownComputation, BadWindow and NothingRecorded."""
    view = export_view(store, cluster_id, computation=computation, start=start, stop=stop)
    return speedscope_of(view)


def _duration(comp: Mapping[str, Any]) -> float:
    return float((comp["stopped_at"] or comp["started_at"]) - comp["started_at"])
