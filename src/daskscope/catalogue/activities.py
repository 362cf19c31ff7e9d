"""The activities of Dask's fine performance metrics, as Dask documents them
(distributed's "Fine performance metrics" page) and as its code emits them (the P2P
shuffle's and rechunk's labels), and the actions of its task stream, each with the one
colour every page draws it in.

A fine metric is ``(context, prefix, activity, unit) -> value``: ``context`` is where it
was measured (``execute`` a task on a worker, ``gather-dep`` fetching its inputs,
``get-data`` sending them, ``p2p`` a P2P shuffle's own work, whose "prefix" is
``foreground``, ``background-comms`` or ``background-disk``), ``prefix`` the task
prefix. Inside a task, a P2P label keeps its ``p2p-`` start (``p2p-get-output-cpu``);
in the ``p2p`` context Dask strips it (``get-output-cpu``): both are listed, as Dask
sends both. The set of activities is open (``context_meter.meter("my-label")``).

Colours: one per name, none shared, from colour-blind-safe schemes (Okabe and Ito's
eight colours and grey; Paul Tol's bright, vibrant, muted, light, high- and
medium-contrast, pale and dark schemes), related activities in related hues. A name the
catalogue does not know takes a colour from :data:`RESERVE` (none of them an
activity's), in the order of :func:`activity_colours`, so that no two names drawn
together share one.
"""

from __future__ import annotations

import colorsys
from collections.abc import Iterable, Mapping
from types import MappingProxyType

from daskscope.catalogue.figure import Activity

__all__ = [
    "ACTIVITIES",
    "ACTIVITY_COLOURS",
    "NO_ACTIVITY_COLOUR",
    "RESERVE",
    "SPAN_FIGURES_NOTE",
    "TASK_ACTIONS",
    "activity_colours",
    "task_action_colours",
]

_SEC, _SEC_BYTES_COUNT, _SEC_COUNT = (
    ("seconds",),
    ("seconds", "bytes", "count"),
    ("seconds", "count"),
)

ACTIVITIES: tuple[Activity, ...] = (
    Activity("thread-cpu", _SEC, "CPU time of the worker thread running the task", "#0072b2"),
    Activity(
        "thread-noncpu",
        _SEC,
        "wall time on the thread not spent on its CPU: I/O, the GIL, GPU or CPU "
        "contention (not I/O alone)",
        "#56b4e9",
    ),
    Activity(
        "executor",
        _SEC,
        "time between the task being ready and its thread starting it (queueing in the "
        "worker's thread pool)",
        "#cc79a7",
    ),
    Activity("other", _SEC, "time Dask measured but could not attribute", "#999999"),
    Activity(
        "memory-read",
        ("bytes", "count"),
        "task inputs found in the worker's memory, not spilled (bytes and how many keys)",
        "#009e73",
    ),
    Activity(
        "disk-read",
        _SEC_BYTES_COUNT,
        "keys read back from spill; in the p2p context, shards read back from the "
        "shuffle's disk buffer",
        "#e69f00",
    ),
    Activity(
        "disk-write",
        _SEC_BYTES_COUNT,
        "keys spilled to disk; in the p2p context, shards written to the shuffle's disk buffer",
        "#d55e00",
    ),
    Activity("compress", _SEC, "compression of data sent or spilled", "#997700"),
    Activity("decompress", _SEC, "decompression of data received or unspilled", "#eecc66"),
    Activity("serialize", _SEC, "pickling of data sent or spilled", "#555555"),
    Activity("deserialize", _SEC, "unpickling of data received or unspilled", "#bbbbbb"),
    Activity("network", _SEC, "time of transfers between workers (gather-dep)", "#ee6677"),
    Activity(
        "failed",
        _SEC,
        "the whole time of a task that raised, or of a transfer that failed, counted "
        "here instead of in the activities above",
        "#000000",
    ),
    Activity(
        "cancelled",
        _SEC,
        "the whole time of a task or transfer whose result was not kept (cancelled, rescheduled)",
        "#663333",
    ),
    Activity("missing", _SEC, "the whole time of a transfer whose keys were gone", "#666633"),
    Activity("busy", _SEC, "the whole time of a transfer the peer refused (busy)", "#f0e442"),
    Activity(
        "idle or other spans",
        _SEC,
        "in Dask's span totals only: active CPU seconds minus Σ execute seconds of the "
        "subtree (threads not running this span's tasks)",
        "#dddddd",
    ),
    Activity(
        "offload",
        _SEC,
        "waiting for work handed from the event loop to Dask's offload thread (large "
        "messages' (de)serialisation, P2P's shard handling)",
        "#aa3377",
    ),
    # P2P shuffle and rechunk, inside a task (the execute context)
    Activity(
        "p2p-shard-partition-cpu",
        _SEC,
        "P2P, in a transfer task: CPU time splitting its input into shards",
        "#117733",
    ),
    Activity(
        "p2p-shard-partition-noncpu",
        _SEC,
        "P2P, in a transfer task: wall time splitting its input into shards not spent on the CPU",
        "#44aa99",
    ),
    Activity(
        "p2p-get-output-cpu",
        _SEC,
        "P2P, in an unpack task: CPU time assembling its output from the shards received",
        "#332288",
    ),
    Activity(
        "p2p-get-output-noncpu",
        _SEC,
        "P2P, in an unpack task: wall time assembling its output not spent on the CPU "
        "(reading shards back from disk among it)",
        "#88ccee",
    ),
    Activity(
        "p2p-disk-read",
        ("bytes", "count"),
        "P2P, in an unpack task: shards read back from the shuffle's disk buffer",
        "#ddaa33",
    ),
    Activity(
        "p2p-shards",
        ("bytes", "count"),
        "P2P, in a transfer task: the shards its input was split into",
        "#999933",
    ),
    Activity(
        "p2p-comms-limiter",
        _SEC_COUNT,
        "P2P: waits for room under the limit of shards buffered for sending (count: "
        "every check, seconds: only the waits)",
        "#994455",
    ),
    Activity(
        "p2p-disk-limiter",
        _SEC_COUNT,
        "P2P: waits for room under the limit of shards buffered for the disk (count: "
        "every check, seconds: only the waits)",
        "#bb5566",
    ),
    # P2P shuffle and rechunk, in the p2p context (Dask strips the "p2p-")
    Activity(
        "shard-partition-cpu",
        _SEC,
        "P2P (foreground): CPU time splitting inputs into shards",
        "#228833",
    ),
    Activity(
        "shard-partition-noncpu",
        _SEC,
        "P2P (foreground): wall time splitting inputs into shards not spent on the CPU",
        "#44bb99",
    ),
    Activity(
        "get-output-cpu",
        _SEC,
        "P2P (foreground): CPU time assembling outputs from the shards received",
        "#222255",
    ),
    Activity(
        "get-output-noncpu",
        _SEC,
        "P2P (foreground): wall time assembling outputs not spent on the CPU",
        "#99ddff",
    ),
    Activity(
        "shards",
        ("bytes", "count"),
        "P2P (foreground): the shards inputs were split into",
        "#bbcc33",
    ),
    Activity(
        "comms-limiter",
        _SEC_COUNT,
        "P2P: waits for room under the limit of shards buffered for sending",
        "#ee99aa",
    ),
    Activity(
        "disk-limiter",
        _SEC_COUNT,
        "P2P: waits for room under the limit of shards buffered for the disk",
        "#ffaabb",
    ),
    Activity(
        "send",
        _SEC,
        "P2P (background-comms): sending shards to the workers that own their outputs",
        "#ee7733",
    ),
    Activity(
        "process",
        _SEC_BYTES_COUNT,
        "P2P (background-comms, background-disk): shards the send or disk buffer "
        "processed (sent, or written with their serialisation)",
        "#009988",
    ),
    Activity(
        "idle",
        _SEC,
        "P2P (background-comms, background-disk): the send or disk buffer waiting for "
        "shards to process",
        "#eeeebb",
    ),
)

#: The actions of Dask's task stream (a task's ``startstops``, ``TaskGroup.all_durations``
#: and the timeline): a name shared with an activity has the activity's colour
TASK_ACTIONS: tuple[Activity, ...] = (
    Activity("compute", _SEC, "running the task's function on a worker thread", "#4477aa"),
    Activity(
        "transfer",
        _SEC,
        "fetching the task's inputs from other workers before it ran",
        "#cc3311",
    ),
    Activity("disk-read", _SEC, "reading the task's inputs back from spill", "#e69f00"),
    Activity("disk-write", _SEC, "spilling the task's output to disk", "#d55e00"),
    Activity("deserialize", _SEC, "unpickling the task's inputs (older Dask versions)", "#bbbbbb"),
)

#: Colours for names the catalogue does not know, in the order they are given out:
#: colour-blind-safe colours no catalogued name has, those least like the common
#: activities' (the CPU blues, executor's pink, other's grey) first
RESERVE: tuple[str, ...] = (
    "#ee3377", "#ccbb44", "#225555", "#ee8866", "#aaaa00", "#004488", "#882255",
    "#66ccee", "#cc6677", "#225522", "#ddcc77", "#aa4499", "#0077bb", "#77aadd",
    "#33bbee", "#6699cc", "#eedd88", "#bbccee", "#ccddaa", "#ffcccc", "#cceeff",
)  # fmt: skip
#: A task group that ran no activity (never started) in a graph
NO_ACTIVITY_COLOUR = "#d0d0d0"


def _colours() -> Mapping[str, str]:
    """Every catalogued name's colour; ValueError if a name had two or two names one."""
    out: dict[str, str] = {}
    for a in (*ACTIVITIES, *TASK_ACTIONS):
        if out.setdefault(a.name, a.colour) != a.colour:
            raise ValueError(f"activity {a.name!r} is catalogued with two colours")
    shared = {c for c in out.values() if list(out.values()).count(c) > 1}
    if shared or set(out.values()) & {*RESERVE, NO_ACTIVITY_COLOUR}:
        raise ValueError(f"catalogued activities share a colour: {sorted(shared)}")
    return MappingProxyType(out)


#: Every catalogued activity's and task action's colour, by name
ACTIVITY_COLOURS: Mapping[str, str] = _colours()


def _beyond_reserve(i: int) -> str:
    """The i-th colour past the reserve: hues a golden angle apart (distinct, not
    chosen for colour-blind readers: only past 21 unknown names on one page)."""
    r, g, b = colorsys.hls_to_rgb((i * 0.381966) % 1.0, 0.45 + 0.1 * (i % 3), 0.6)
    return "#{:02x}{:02x}{:02x}".format(*(round(255 * v) for v in (r, g, b)))


def activity_colours(names: Iterable[str]) -> dict[str, str]:
    """The colour of each of ``names`` drawn together: a catalogued name's own; the
    others, in sorted order, the :data:`RESERVE`'s colours in turn (then further
    distinct ones), so that no two of ``names`` share a colour. Give every name a page
    may draw (a cluster's activities, not one filter's) so that each keeps its colour
    as filters change."""
    out: dict[str, str] = {}
    unknown: list[str] = []
    for name in sorted(set(names)):
        if name in ACTIVITY_COLOURS:
            out[name] = ACTIVITY_COLOURS[name]
        else:
            unknown.append(name)
    taken = set(out.values())
    spare = (c for c in RESERVE if c not in taken)
    extra = 0
    for name in unknown:
        colour = next(spare, None)
        while colour is None or colour in taken:
            colour, extra = _beyond_reserve(extra), extra + 1
        out[name] = colour
        taken.add(colour)
    return out


def task_action_colours(present: Iterable[str | None] = ()) -> dict[str, str]:
    """The task stream's actions' colours, and those of any other names in ``present``
    (the activities a graph or a timeline draws), per :func:`activity_colours`."""
    return activity_colours([*(a.name for a in TASK_ACTIONS), *(n for n in present if n)])


#: How a span's two time figures differ, for the pages that show both
SPAN_FIGURES_NOTE = (
    "duration is the summed time of the span's tasks (Σ over tasks, all activities); "
    "active CPU is the thread time made available to the span while it had tasks to run, "
    "not CPU used: the threads x the time the span was active, shared between the spans "
    "active at once"
)
