"""The task log's segment format: task executions as the recorder buffers them (a tuple
each, :data:`Execution`) and as a :class:`~daskscope.model.TaskSegmentRecord` keeps
them column-wise (two Arrow IPC streams, compressed together with zstd, :data:`FORMAT`).

(Over 400 lines: the encoder and the decoder of one binary format side by side, so that
a column changes in both at once; the encoding works on whole columns, which takes
lines.)

The recorder's hook only appends a tuple of what Dask handed it (no pyarrow, no text
made on the event loop); :func:`encode_segment` turns a segment's tuples into columns in
the writer thread and :func:`decode_segment` reads them back wherever the store is read.
Keys are kept compactly: a key is its group's name (a dictionary entry) and what remains
of its text (``('inc-3f2a', 3)`` keeps ``3``; :mod:`daskscope.tasklog.keys`). Strings
(groups, prefixes, workers, actions, sources, computation and span ids) share one
dictionary per segment.

One execution keeps its first compute action in the row itself (``start``/``stop``);
any other action (transfer with its source worker, disk read/write, deserialize, a second
compute) is a row of the segment's action columns pointing back to it.

Encoding works on whole columns (``zip``, ``map`` and numpy over the segment), never a
Python loop per execution, and builds its Arrow arrays from numpy buffers
(:mod:`daskscope.tasklog.arrow`), so the scheduler never pays for Arrow's compute
functions.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain, compress, repeat
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from daskscope.model import TaskSegmentRecord, stable_id
from daskscope.tasklog.arrow import dictionary_array, numbers, string_array, utf8
from daskscope.tasklog.keys import (
    KEY_IS_GROUP,
    KEY_TUPLE,
    KEY_WHOLE,
    key_columns,
    key_filter,
    key_filter_may_hold,
    key_parts,
    key_text,
)
from daskscope.tasklog.summaries import summarize

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from daskscope.tasklog.repeats import RepeatFilter

__all__ = [
    "FORMAT",
    "FORMAT_1",
    "KEY_IS_GROUP",
    "KEY_TUPLE",
    "KEY_WHOLE",
    "NO_THREAD",
    "RETRIED",
    "DecodedSegment",
    "Execution",
    "decode_segment",
    "encode_segment",
    "execution",
    "key_filter_may_hold",
    "key_parts",
    "key_text",
    "segment_id",
]

#: the payload: its uncompressed length (8 bytes), then zstd of the first IPC stream's
#: length (8 bytes) and the two streams (executions, other actions), uncompressed
FORMAT = "arrow-ipc-zstd/2"
#: the first format: the same streams, each buffer compressed by Arrow's IPC writer (a
#: zstd context per buffer: a millisecond a segment however small); still read
FORMAT_1 = "arrow-ipc-zstd/1"
#: the thread of an execution Dask did not say
NO_THREAD = 0
#: state codes: an execution's outcome. "retried": an attempt that failed and that Dask
#: ran again (``retries=``), which Dask itself keeps nowhere (:mod:`daskscope.collector.
#: attempts`)
MEMORY, ERRED, RETRIED = 0, 1, 2
STATES = ("memory", "erred", "retried")
#: microseconds: times are kept as integer offsets from the segment's first start
_US = 1e-6
#: a segment's payload stays under this (a larger one is split in two): the wire's bound
#: on a bytes field, and a server's batch, must take it
MAX_PAYLOAD_BYTES = 12 * 2**20


def segment_id(cluster_id: str, number: int) -> str:
    return stable_id(cluster_id, "task_segment", number)


#: One execution as the recorder buffers it: a tuple of what Dask handed the hook,
#: ``(key, group, prefix, worker, thread, start, stop, actions, erred, nbytes,
#: computation, span, trigger, trigger_group)``. ``erred`` is its state: False
#: (:data:`MEMORY`), True (:data:`ERRED`) or :data:`RETRIED`. ``start``/``stop`` are its
#: compute action's when that was its only action; else None, and ``actions`` holds Dask's
#: startstops as they came. ``trigger`` is the key of the dependency whose end made the
#: task ready (the last of its dependencies to end), ``trigger_group`` its group's name;
#: both None for a task ready when its graph came.
Execution = tuple[Any, ...]


def execution(
    key: Any,
    group: str,
    prefix: str,
    worker: str | None,
    thread: int | None,
    startstops: Sequence[Mapping[str, Any]],
    *,
    erred: bool | int,
    nbytes: int | None,
    computation: str | None,
    span: str | None,
    trigger: tuple[Any, str] | None = None,
) -> Execution:
    """The buffered form of one execution (the recorder's hook builds it inline);
    ``erred``: its state (False, True or :data:`RETRIED`); ``trigger``: the (key, group
    name) of the dependency it waited for last."""
    waited = trigger or (None, None)
    if len(startstops) == 1 and startstops[0]["action"] == "compute":
        only = startstops[0]
        return (key, group, prefix, worker, thread, only["start"], only["stop"], None,
                erred, nbytes, computation, span, *waited)  # fmt: skip
    return (key, group, prefix, worker, thread, None, None, startstops,
            erred, nbytes, computation, span, *waited)  # fmt: skip


# -- encoding (in the writer thread) -----------------------------------------------------


def encode_segment(
    cluster_id: str,
    number: int,
    executions: Sequence[Execution],
    repeats: RepeatFilter | None = None,
) -> list[TaskSegmentRecord]:
    """``executions`` as segment records numbered from ``number`` (one, unless the
    payload would pass :data:`MAX_PAYLOAD_BYTES`: then halves, recursively). With
    ``repeats``, a repeated report of an execution already seen is left out (none left:
    no record)."""
    record = _encode_one(cluster_id, number, executions, repeats)
    if isinstance(record, list):  # repeats left out: the rest, encoded again
        return encode_segment(cluster_id, number, record) if record else []
    if len(record.payload) <= MAX_PAYLOAD_BYTES or len(executions) < 2:
        return [record]
    half = len(executions) // 2
    first = encode_segment(cluster_id, number, executions[:half])
    return first + encode_segment(cluster_id, number + len(first), executions[half:])


#: the fields of an :data:`Execution`, in order
_FIELDS = 14
_KEY, _GROUP, _PREFIX, _WORKER, _THREAD, _START, _STOP, _ACTIONS, _ERRED, _NBYTES = range(10)
_COMPUTATION, _SPAN, _TRIGGER, _TRIGGER_GROUP = 10, 11, 12, 13


def _matrix(executions: Sequence[Execution]) -> npt.NDArray[np.object_]:
    """The executions as an ``(n, fields)`` object array: its columns are the fields
    (one C pass; ``zip(*executions)`` costs half as much again)."""
    import numpy as np

    if not executions:
        raise ValueError("a task-log segment holds at least one execution")
    if set(map(len, executions)) != {_FIELDS}:
        raise ValueError(f"every buffered task execution is a tuple of {_FIELDS} fields")
    flat = np.fromiter(chain.from_iterable(executions), object, count=_FIELDS * len(executions))
    return flat.reshape(len(executions), _FIELDS)


class _Names:
    """The segment's one dictionary of names, and each string column's codes into it
    (-1: none)."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self._index: dict[str, int] = {}

    def codes(self, column: Sequence[Any]) -> npt.NDArray[np.int32]:
        import numpy as np

        mapping: dict[Any, int] = {}
        for value in dict.fromkeys(column):  # distinct values in order of appearance
            if value is None:
                mapping[value] = -1
                continue
            text = value if type(value) is str else str(value)
            code = self._index.get(text)
            if code is None:
                code = self._index[text] = len(self.names)
                self.names.append(text)
            mapping[value] = code
        return np.fromiter(map(mapping.__getitem__, column), np.int32, count=len(column))


def _ints(column: npt.NDArray[np.object_], fill: int) -> npt.NDArray[np.int64]:
    """An object column as int64, ``fill`` for None."""
    import numpy as np

    try:
        return column.astype(np.int64)
    except TypeError:  # some None
        values = column.copy()
        values[values == None] = fill  # noqa: E711 (elementwise)
        return values.astype(np.int64)


@dataclass(slots=True)
class _Actions:
    """A segment's execution times split: each execution's (first) compute start/stop,
    its other actions as rows pointing back to it (in the order Dask gave them)."""

    start: npt.NDArray[np.float64]
    stop: npt.NDArray[np.float64]
    row: npt.NDArray[np.int64]
    name: list[Any]
    action_start: npt.NDArray[np.float64]
    action_stop: npt.NDArray[np.float64]
    source: list[Any]


def _split_actions(
    starts: npt.NDArray[np.object_], stops: npt.NDArray[np.object_], lists: npt.NDArray[np.object_]
) -> _Actions:
    """Each execution's compute start/stop, and its other actions, from the object
    columns of start, stop and actions (a list where start and stop are None). An
    execution without a compute action gets a zero-length one at its first action's
    start."""
    import numpy as np

    listed = lists != None  # noqa: E711 (elementwise)
    rows = np.flatnonzero(listed)
    filled_start, filled_stop = starts.copy(), stops.copy()
    filled_start[rows] = filled_stop[rows] = 0.0
    start, stop = filled_start.astype(np.float64), filled_stop.astype(np.float64)
    if not len(rows):
        empty = np.zeros(0)
        return _Actions(start, stop, np.zeros(0, dtype=np.int64), [], empty, empty, [])
    chosen = lists[rows].tolist()
    counts = np.fromiter(map(len, chosen), np.int64, count=len(chosen))
    if not counts.all():
        raise ValueError("a task execution has an empty list of actions; Dask always gives one")
    flat = list(chain.from_iterable(chosen))
    owner = np.repeat(rows, counts)
    name = list(map(dict.get, flat, repeat("action")))
    f_start = np.fromiter(map(itemgetter("start"), flat), np.float64, count=len(flat))
    f_stop = np.fromiter(map(itemgetter("stop"), flat), np.float64, count=len(flat))
    # each execution's first compute action is the row's own; no compute: a zero-length
    # one at its first action's start
    computes = np.flatnonzero(
        np.fromiter(map(operator.eq, name, repeat("compute")), bool, count=len(flat))
    )
    computing = owner[computes]
    firsts = computes[np.r_[True, computing[1:] != computing[:-1]]] if len(computes) else computes
    earliest = np.minimum.reduceat(f_start, np.r_[0, np.cumsum(counts)[:-1]])
    start[rows] = stop[rows] = earliest
    start[owner[firsts]], stop[owner[firsts]] = f_start[firsts], f_stop[firsts]
    others = np.ones(len(flat), dtype=bool)
    others[firsts] = False
    keep = others.tolist()
    return _Actions(
        start=start,
        stop=stop,
        row=owner[others],
        name=list(compress(name, keep)),
        action_start=f_start[others],
        action_stop=f_stop[others],
        source=list(compress(map(dict.get, flat, repeat("source")), keep)),
    )


def _encode_one(
    cluster_id: str,
    number: int,
    executions: Sequence[Execution],
    repeats: RepeatFilter | None = None,
) -> TaskSegmentRecord | list[Execution]:
    """The segment record, or (when ``repeats`` finds some) the executions that are
    not repeats, to encode instead."""
    import numpy as np

    columns = _matrix(executions)
    n = len(executions)
    acts = _split_actions(columns[:, _START], columns[:, _STOP], columns[:, _ACTIONS])
    start, stop = acts.start, acts.stop
    order = np.argsort(start, kind="stable")  # sorted by start: offsets compress well
    if repeats is not None:
        repeated = repeats.repeated(start, order, columns[:, _KEY], columns[:, _WORKER])
        if repeated.any():
            return list(compress(executions, (~repeated).tolist()))
    new_place = np.empty(n, dtype=np.int64)
    new_place[order] = np.arange(n)
    a_place = new_place[acts.row]
    a_order = np.argsort(a_place, kind="stable")
    placed = a_place[a_order]
    a_start, a_stop = acts.action_start[a_order], acts.action_stop[a_order]
    first = float(min(start.min(), a_start.min() if len(a_start) else np.inf))
    last = float(max(stop.max(), a_stop.max() if len(a_stop) else -np.inf))
    base = float(np.floor(first / _US) * _US)  # whole microseconds: offsets are exact

    # one dictionary of names for every string column of the segment
    names = _Names()
    group, prefix, worker, computation, span, trigger_group = (
        names.codes(columns[:, field].tolist())[order]
        for field in (_GROUP, _PREFIX, _WORKER, _COMPUTATION, _SPAN, _TRIGGER_GROUP)
    )
    a_name = names.codes(acts.name)[a_order]
    a_source = names.codes(acts.source)[a_order]
    dictionary = string_array(*utf8(names.names))

    forms, rests = key_columns(columns[:, _KEY], columns[:, _GROUP])
    forms = forms[order]
    rest_data, rest_offsets = utf8(rests[order].tolist())
    trigger_forms, trigger_rests = _trigger_columns(columns)
    trigger_data, trigger_offsets = utf8(trigger_rests[order].tolist())
    # False, True or RETRIED: the state's code (a failed attempt keeps no bytes)
    state = columns[:, _ERRED].astype(np.int8)[order]
    nbytes_array = _ints(columns[:, _NBYTES], -1)[order]
    nbytes_array[state != MEMORY] = -1
    thread = _ints(columns[:, _THREAD], NO_THREAD)[order]
    s_start, s_stop = start[order], stop[order]

    def offsets(times: npt.NDArray[np.float64]) -> Any:
        return numbers(np.rint((times - base) / _US).astype(np.int64))

    def durations(begin: npt.NDArray[np.float64], end: npt.NDArray[np.float64]) -> Any:
        return numbers(np.rint((end - begin) / _US).astype(np.int64))

    table = {
        "key_form": numbers(forms),
        "key_rest": string_array(rest_data, rest_offsets),
        "group": dictionary_array(group, dictionary),
        "prefix": dictionary_array(prefix, dictionary),
        "worker": dictionary_array(worker, dictionary),
        "thread": numbers(thread),
        "start_us": offsets(s_start),
        "duration_us": durations(s_start, s_stop),
        "state": numbers(state),
        "nbytes": numbers(nbytes_array, nbytes_array >= 0),
        "computation": dictionary_array(computation, dictionary),
        "span": dictionary_array(span, dictionary),
        # the dependency each task waited for last (read since the task-level critical
        # path; a reader of segments without these columns sees no triggers)
        "trigger_group": dictionary_array(trigger_group, dictionary),
        "trigger_form": numbers(trigger_forms[order]),
        "trigger_rest": string_array(trigger_data, trigger_offsets),
    }
    actions = {
        "row": numbers(placed.astype(np.int32)),
        "action": dictionary_array(a_name, dictionary),
        "start_us": offsets(a_start),
        "duration_us": durations(a_start, a_stop),
        "source": dictionary_array(a_source, dictionary),
    }
    span_first, span_last = s_start.copy(), s_stop.copy()
    if len(placed):
        np.minimum.at(span_first, placed, a_start)
        np.maximum.at(span_last, placed, a_stop)
    summary = summarize(
        names.names,
        first=first,
        last=last,
        start=s_start,
        stop=s_stop,
        span_first=span_first,
        span_last=span_last,
        group=group,
        worker=worker,
        thread=thread,
        computation=computation,
        span=span,
        action_row=placed,
        action_name=a_name,
        action_start=a_start,
        action_stop=a_stop,
    )
    return TaskSegmentRecord(
        id=segment_id(cluster_id, number),
        cluster_id=cluster_id,
        segment=number,
        first_start=first,
        last_stop=last,
        executions=n,
        format=FORMAT,
        payload=_ipc_bytes(table, actions, base),
        groups=sorted(names.names[g] for g in np.flatnonzero(np.bincount(group[group >= 0]))),
        summary=summary,
        key_filter=key_filter(forms, rest_data, rest_offsets, group, names.names),
    )


def _trigger_columns(
    columns: npt.NDArray[np.object_],
) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.object_]]:
    """The triggers' key forms and rests, as the keys' (an empty rest where none)."""
    import numpy as np

    keys, groups = columns[:, _TRIGGER], columns[:, _TRIGGER_GROUP]
    some = np.flatnonzero(groups != None)  # noqa: E711 (elementwise)
    forms = np.zeros(len(keys), dtype=np.int8)
    rests = np.full(len(keys), "", dtype=object)
    if len(some):
        forms[some], rests[some] = key_columns(keys[some], groups[some])
    return forms, rests


def _ipc_bytes(table: dict[str, Any], actions: dict[str, Any], base: float) -> bytes:
    """The two tables as two IPC streams (each has its own schema), the first's length
    in front, compressed as one (:data:`FORMAT`); the time base in the schemas'
    metadata."""
    import pyarrow as pa  # type: ignore[import-untyped]
    import pyarrow.ipc as ipc  # type: ignore[import-untyped]

    parts = []
    for columns in (table, actions):
        batch = pa.RecordBatch.from_arrays(
            list(columns.values()), names=list(columns), metadata={"base": repr(base)}
        )
        sink = pa.BufferOutputStream()
        with ipc.new_stream(sink, batch.schema) as writer:
            writer.write_batch(batch)
        parts.append(sink.getvalue().to_pybytes())
    raw = len(parts[0]).to_bytes(8, "little") + parts[0] + parts[1]
    packed = pa.Codec("zstd", compression_level=_ZSTD_LEVEL).compress(raw, asbytes=True)
    return len(raw).to_bytes(8, "little") + bytes(packed)


#: zstd's fastest level: compresses these columns within 1 % of level 3, in two thirds
#: of the time
_ZSTD_LEVEL = 1


# -- decoding ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DecodedSegment:
    """A segment's executions as numpy arrays (sorted by compute start), times in epoch
    seconds; string columns as indices into ``names`` (-1: none)."""

    names: tuple[str, ...]
    key_form: npt.NDArray[np.int8]
    #: a pyarrow string array: turned into Python text only for the rows asked
    key_rest: Any
    group: npt.NDArray[np.int32]
    prefix: npt.NDArray[np.int32]
    worker: npt.NDArray[np.int32]
    thread: npt.NDArray[np.int64]
    start: npt.NDArray[np.float64]
    stop: npt.NDArray[np.float64]
    state: npt.NDArray[np.int8]
    nbytes: npt.NDArray[np.int64]  # -1: unknown
    computation: npt.NDArray[np.int32]
    span: npt.NDArray[np.int32]
    action_row: npt.NDArray[np.int32]
    action_name: npt.NDArray[np.int32]
    action_start: npt.NDArray[np.float64]
    action_stop: npt.NDArray[np.float64]
    action_source: npt.NDArray[np.int32]
    #: each execution's first start and last stop over all its actions
    first: npt.NDArray[np.float64]
    last: npt.NDArray[np.float64]
    #: the dependency each execution waited for last: its group (-1: none, or a
    #: segment written before triggers were kept), key form and rest
    trigger_group: npt.NDArray[np.int32]
    trigger_form: npt.NDArray[np.int8]
    trigger_rest: Any

    def __len__(self) -> int:
        return len(self.start)

    def name_index(self, name: str) -> int:
        """The index of ``name`` in this segment's names, -1 when absent."""
        try:
            return self.names.index(name)
        except ValueError:
            return -1

    def naming(self, column: npt.NDArray[np.int32], names: Iterable[str]) -> npt.NDArray[np.bool_]:
        """Which rows of ``column`` (one of the string columns) hold one of ``names``. A
        name the segment lacks selects nothing: its index -1 is also the code of "none"."""
        import numpy as np

        codes = [i for i in map(self.name_index, names) if i >= 0]
        if not codes:
            return np.zeros(len(column), dtype=bool)
        return np.isin(column, codes)

    def key(self, row: int) -> str:
        rest = self.key_rest[row].as_py()
        return key_text(int(self.key_form[row]), rest, self.names[int(self.group[row])])

    def trigger(self, row: int) -> str | None:
        """The key of the dependency execution ``row`` waited for last; None when it
        waited for none (or the segment does not say)."""
        group = int(self.trigger_group[row])
        if group < 0:
            return None
        rest = self.trigger_rest[row].as_py()
        return key_text(int(self.trigger_form[row]), rest, self.names[group])


def decode_segment(format: str, payload: bytes) -> DecodedSegment:
    """The executions of a segment's payload; an unknown format is an error that says so."""
    if format not in (FORMAT, FORMAT_1):
        raise ValueError(
            f"task segment format {format!r} is not one this daskscope reads ({FORMAT!r}, "
            f"{FORMAT_1!r}); upgrade daskscope"
        )
    import numpy as np
    import pyarrow as pa
    import pyarrow.ipc as ipc

    if format == FORMAT:
        size = int.from_bytes(payload[:8], "little")
        payload = pa.decompress(payload[8:], decompressed_size=size, codec="zstd", asbytes=True)
    length = int.from_bytes(payload[:8], "little")
    tables = [
        ipc.open_stream(pa.py_buffer(part)).read_all()
        for part in (payload[8 : 8 + length], payload[8 + length :])
    ]
    rows, actions = tables
    base = float((rows.schema.metadata or {})[b"base"])
    # every dictionary column shares the segment's one table of names
    group = rows.column("group").combine_chunks()
    names = tuple(group.dictionary.to_pylist())

    def codes(table: Any, name: str) -> npt.NDArray[np.int32]:
        column = table.column(name).combine_chunks()
        return np.asarray(column.indices.fill_null(-1), dtype=np.int32)

    def ints(table: Any, name: str, fill: int = 0) -> npt.NDArray[np.int64]:
        column = table.column(name).combine_chunks()
        return np.asarray(column.fill_null(fill), dtype=np.int64)

    start = np.asarray(base + ints(rows, "start_us") * _US, dtype=np.float64)
    a_start = np.asarray(base + ints(actions, "start_us") * _US, dtype=np.float64)
    a_rows = np.asarray(ints(actions, "row"), dtype=np.int32)
    a_stop = a_start + ints(actions, "duration_us") * _US
    stop = start + ints(rows, "duration_us") * _US
    first, last = start.copy(), stop.copy()
    if len(a_rows):
        np.minimum.at(first, a_rows, a_start)
        np.maximum.at(last, a_rows, a_stop)
    if "trigger_group" in rows.schema.names:
        trigger_group = codes(rows, "trigger_group")
        trigger_form = np.asarray(rows.column("trigger_form").combine_chunks(), dtype=np.int8)
        trigger_rest = rows.column("trigger_rest").combine_chunks()
    else:  # written before triggers were kept
        trigger_group = np.full(len(start), -1, dtype=np.int32)
        trigger_form = np.zeros(len(start), dtype=np.int8)
        trigger_rest = None
    return DecodedSegment(
        names=names,
        key_form=np.asarray(rows.column("key_form").combine_chunks(), dtype=np.int8),
        key_rest=rows.column("key_rest").combine_chunks(),
        group=codes(rows, "group"),
        prefix=codes(rows, "prefix"),
        worker=codes(rows, "worker"),
        thread=ints(rows, "thread"),
        start=start,
        stop=stop,
        state=np.asarray(rows.column("state").combine_chunks(), dtype=np.int8),
        nbytes=ints(rows, "nbytes", -1),
        computation=codes(rows, "computation"),
        span=codes(rows, "span"),
        action_row=a_rows,
        action_name=codes(actions, "action"),
        action_start=a_start,
        action_stop=a_stop,
        action_source=codes(actions, "source"),
        first=first,
        last=last,
        trigger_group=trigger_group,
        trigger_form=trigger_form,
        trigger_rest=trigger_rest,
    )
