"""The task timeline as a Perfetto protobuf trace (``Trace`` of ``TracePacket``\\s), which
ui.perfetto.dev opens: the native format, smaller than the JSON and with no limit on a
whole cluster.

A process track per worker, a thread track per worker thread (named as in the JSON
export: the worker's address, Dask's thread ident); each compute of a task is a slice
(begin and end events) on its thread, named by the task prefix, in the category of its
activity ("compute", and "erred" too when it failed), with the key, group, bytes, state,
computation and span as debug annotations. The other actions (transfers with their
source worker, disk reads and writes, deserialisation) run on the worker's event loop and
overlap one another: they are slices on tracks of the worker's process, one per activity
("transfer", "disk-read", ...), with a further track ("transfer 2", ...) where one would
cross another. A compute that crosses one Dask reported on the same thread goes to a track
"thread N · overlapping 1", as a track only holds slices that nest or follow.

Event names, categories, annotation names and repeated annotation values are interned
(defined once in the packet first using them). Every packet is on one sequence, in time
order (ends before begins at the same instant), so a reader can check nesting as it goes.
Timestamps are nanoseconds since the epoch on the scheduler's clock. A trace file is a
concatenation of ``Trace.packet`` fields, so the packets are written in chunks as they
are built, a page of executions each.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from daskscope.export.perfetto import PAGE_TASKS, TaskTimeline
from daskscope.views.export import ExportView, Page, PlainColumns, TaskWindow, export_view

if TYPE_CHECKING:
    from daskscope.store import Store

__all__ = ["SEQUENCE", "PerfettoProto", "perfetto_proto_chunks"]

#: the one trusted packet sequence of the file
SEQUENCE = 1
_NS = 1_000_000_000


class PerfettoProto(TaskTimeline[bytes]):
    """Perfetto's protobuf trace (see the module's docstring), with Perfetto's own file
    extension."""

    format = "proto"
    description = "Perfetto's protobuf trace (smaller; for a whole cluster of millions of tasks)"
    media_type = "application/octet-stream"
    extension = "pftrace"
    binary = True

    def _chunks(
        self, view: ExportView, window: TaskWindow, pages: Iterator[Page]
    ) -> Iterator[bytes]:
        writer = _Writer(window.origin)
        for page in pages:
            for columns, row in page:
                writer.add_execution(columns, row)
            if len(page) == self.page_tasks:
                yield writer.take()
        writer.finish()
        yield writer.take()


def perfetto_proto_chunks(
    store: Store,
    cluster_id: str,
    *,
    computation: str | None = None,
    start: float | None = None,
    stop: float | None = None,
    page_tasks: int = PAGE_TASKS,
) -> Iterator[bytes]:
    """The trace as serialised ``Trace`` chunks to write one after the other: the
    cluster's view rendered, in one call.

    Raises (before the first chunk) what :func:`~daskscope.export.perfetto.perfetto_chunks`
    raises."""
    view = export_view(store, cluster_id, computation=computation, start=start, stop=stop)
    return PerfettoProto(page_tasks).render(view)


@dataclass
class _Lane:
    """One track: its uuid and the ends (ns) of its open slices, innermost last."""

    uuid: int
    open_ends: list[int] = field(default_factory=list)


@dataclass
class _Tracks:
    """Tracks by worker and by (worker, thread | activity), made when first used; each
    new one is a descriptor to write before the events on it."""

    processes: dict[str, tuple[int, int]] = field(default_factory=dict)  # uuid, pid
    lanes: dict[tuple[str, object], list[_Lane]] = field(default_factory=dict)
    threads_of: dict[str, int] = field(default_factory=dict)
    next_uuid: int = 1
    #: descriptors (TrackDescriptor kwargs) not yet written
    new: list[dict[str, Any]] = field(default_factory=list)

    def _uuid(self) -> int:
        self.next_uuid += 1
        return self.next_uuid

    def _process(self, worker: str) -> tuple[int, int]:
        found = self.processes.get(worker)
        if found is None:
            found = self.processes[worker] = (self._uuid(), len(self.processes) + 1)
            self.new.append(
                {"uuid": found[0], "process": {"pid": found[1], "process_name": f"worker {worker}"}}
            )
        return found

    def lane(self, worker: str, kind: object, begin: int, end: int) -> _Lane:
        """The first track of ``worker``'s thread (``kind`` an int) or activity (a str)
        where ``[begin, end]`` nests in the open slices; a new one when none."""
        lanes = self.lanes.setdefault((worker, kind), [])
        for lane in lanes:
            if not lane.open_ends or lane.open_ends[-1] >= end:
                return lane
        process_uuid, pid = self._process(worker)
        uuid = self._uuid()
        n = len(lanes)
        if isinstance(kind, int):
            name = f"thread {kind}" if kind else "thread (ident not reported)"
            if n:
                self.new.append(
                    {
                        "uuid": uuid,
                        "parent_uuid": process_uuid,
                        "name": f"{name} · overlapping {n}",
                    }
                )
            else:
                tid = self.threads_of[worker] = self.threads_of.get(worker, 0) + 1
                self.new.append(
                    {
                        "uuid": uuid,
                        "parent_uuid": process_uuid,
                        "thread": {"pid": pid, "tid": tid, "thread_name": name},
                    }
                )
        else:
            name = str(kind) if not n else f"{kind} {n + 1}"
            self.new.append({"uuid": uuid, "parent_uuid": process_uuid, "name": name})
        lanes.append(_Lane(uuid))
        return lanes[-1]


#: the kinds of interned strings, as InternedData's fields
_KINDS = (
    "event_names",
    "event_categories",
    "debug_annotation_names",
    "debug_annotation_string_values",
)
_NAME, _CATEGORY, _NOTE, _VALUE = range(4)


class _Interned:
    """Interned ids (iids) by kind and text; new ones wait in ``fresh`` to be defined in
    the packet that first uses them."""

    def __init__(self) -> None:
        self.ids: list[dict[str, int]] = [{} for _ in _KINDS]
        self.fresh: list[tuple[int, int, str]] = []

    def iid(self, kind: int, text: str) -> int:
        known = self.ids[kind]
        found = known.get(text)
        if found is None:
            found = known[text] = len(known) + 1
            self.fresh.append((kind, found, text))
        return found

    def define(self, packet: Any) -> None:
        for kind, iid, text in self.fresh:
            entry = getattr(packet.interned_data, _KINDS[kind]).add()
            entry.iid = iid
            if kind == _VALUE:
                entry.str = text.encode()
            else:
                entry.name = text
        self.fresh.clear()


#: a slice waiting to begin: (name, categories, annotations, (worker, thread | activity))
_Slice = tuple[str, tuple[str, ...], list[tuple[str, object]], tuple[str, object]]

_END, _BEGIN = 0, 1


class _Writer:
    """Builds the packets in time order: slices wait in a heap until no execution still
    to come can begin before them (executions come in order of their first start).

    Packets are added to a generated ``Trace`` message, serialised and cleared at each
    :meth:`take` (a file is those serialisations one after the other)."""

    def __init__(self, origin: float) -> None:
        from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import (  # type: ignore[import-untyped]
            Trace,
            TracePacket,
            TrackEvent,
        )

        self.trace = Trace()
        self.needs_state = TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
        self.begin_type, self.end_type = TrackEvent.TYPE_SLICE_BEGIN, TrackEvent.TYPE_SLICE_END
        self.origin_ns = round(origin * _NS)
        self.origin = origin
        self.tracks = _Tracks()
        self.interned = _Interned()
        self.heap: list[tuple[Any, ...]] = []
        self.count = 0  # a tie-break that keeps the heap from comparing payloads
        self.trace.packet.add(
            trusted_packet_sequence_id=SEQUENCE,
            sequence_flags=TracePacket.SEQ_INCREMENTAL_STATE_CLEARED,
            first_packet_on_sequence=True,
        )

    def _ns(self, seconds: float) -> int:
        return self.origin_ns + round((seconds - self.origin) * _NS)

    def add_execution(self, c: PlainColumns, row: int) -> None:
        actions = c.actions(row)
        self._release(self._ns(actions[0][1]))  # its first start: none to come is earlier
        worker = c.worker[row] or ""
        prefix = c.prefix[row] or ""
        state = c.state[row]
        notes: list[tuple[str, object]] = [("key", c.key[row]), ("group", c.group[row])]
        notes.append(("state", state))
        if c.nbytes[row] is not None:
            notes.append(("bytes", c.nbytes[row]))
        if c.computation[row]:
            notes.append(("computation", c.computation[row]))
        if c.span[row]:
            notes.append(("span", c.span[row]))
        for action, start, stop, source in actions:
            begin = self._ns(start)
            end = max(begin, self._ns(stop))
            if action == "compute":
                item: _Slice = (
                    prefix,
                    ("compute", "erred") if state == "erred" else ("compute",),
                    notes,
                    (worker, c.thread[row]),
                )
            else:
                extra: list[tuple[str, object]] = [("source", source)] if source else []
                item = (f"{action} {prefix}", (action,), notes + extra, (worker, action))
            self.count += 1
            # at one instant: ends first, then the longer slice begins (it holds the other)
            heapq.heappush(self.heap, (begin, _BEGIN, -end, self.count, end, item))

    def _event_packet(self, timestamp: int) -> Any:
        return self.trace.packet.add(
            timestamp=timestamp,
            trusted_packet_sequence_id=SEQUENCE,
            sequence_flags=self.needs_state,
        )

    def _note(self, event: Any, note: str, value: object) -> None:
        """One debug annotation of ``event``: numbers as numbers, keys as text (unique:
        not worth interning), other values interned."""
        iid = self.interned.iid
        if isinstance(value, int):
            event.debug_annotations.add(name_iid=iid(_NOTE, note), int_value=value)
        elif note == "key":
            event.debug_annotations.add(name_iid=iid(_NOTE, note), string_value=str(value))
        else:
            event.debug_annotations.add(
                name_iid=iid(_NOTE, note), string_value_iid=iid(_VALUE, str(value))
            )

    def _release(self, before: int) -> None:
        """Write every waiting begin and end earlier than ``before`` (ns)."""
        heap = self.heap
        iid = self.interned.iid
        while heap and heap[0][0] < before:
            entry = heapq.heappop(heap)
            if entry[1] == _END:
                lane = entry[4]
                lane.open_ends.pop()
                event = self._event_packet(entry[0]).track_event
                event.type = self.end_type
                event.track_uuid = lane.uuid
                continue
            begin, _, _, _, end, (name, categories, notes, (worker, kind)) = entry
            lane = self.tracks.lane(worker, kind, begin, end)
            if self.tracks.new:
                self._describe()
            lane.open_ends.append(end)
            packet = self._event_packet(begin)
            event = packet.track_event
            event.type = self.begin_type
            event.track_uuid = lane.uuid
            event.name_iid = iid(_NAME, name)
            event.category_iids.extend(iid(_CATEGORY, c) for c in categories)
            for note, value in notes:
                self._note(event, note, value)
            if self.interned.fresh:  # defined in the packet that first uses them
                self.interned.define(packet)
            self.count += 1
            # inner slices (begun later) end first at one instant
            heapq.heappush(heap, (end, _END, -self.count, self.count, lane))

    def _describe(self) -> None:
        for descriptor in self.tracks.new:
            packet = self.trace.packet.add(trusted_packet_sequence_id=SEQUENCE)
            track = packet.track_descriptor
            track.uuid = descriptor["uuid"]
            if "parent_uuid" in descriptor:
                track.parent_uuid = descriptor["parent_uuid"]
            if "name" in descriptor:
                track.name = descriptor["name"]
            for part in ("process", "thread"):
                for key, value in descriptor.get(part, {}).items():
                    setattr(getattr(track, part), key, value)
        self.tracks.new.clear()

    def finish(self) -> None:
        self._release(2**63)

    def take(self) -> bytes:
        """The packets built since the last call: fields of a ``Trace``."""
        data: bytes = self.trace.SerializeToString()
        # a new message, not Clear(): upb keeps a cleared message's arena allocated
        self.trace = type(self.trace)()
        return data
