"""The task log's segment format: task executions as the recorder buffers them (a tuple
each, :data:`Execution`) and as a :class:`~daskscope.model.TaskSegmentRecord` keeps
them column-wise (Arrow IPC streams compressed with zstd, :data:`FORMAT`).

The recorder's hook only appends a tuple of what Dask handed it (no pyarrow, no text
made on the event loop); :func:`encode_segment` turns a segment's tuples into columns in
the writer thread and :func:`decode_segment` reads them back wherever the store is read.
Keys are kept compactly: a key is its group's name (a dictionary entry) and what remains
of its text (``('inc-3f2a', 3)`` keeps ``3``). Strings (groups, prefixes, workers,
actions, sources, computation and span ids) share one dictionary per segment.

One execution keeps its first compute action in the row itself (``start``/``stop``);
any other action (transfer with its source worker, disk read/write, deserialize, a second
compute) is a row of the segment's action columns pointing back to it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from daskscope.model import TaskSegmentRecord, stable_id
from daskscope.summaries import summarize

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "FORMAT",
    "NO_THREAD",
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

FORMAT = "arrow-ipc-zstd/1"
#: the thread of an execution Dask did not say
NO_THREAD = 0
#: how a key's text is kept: whole, equal to its group's name, or a tuple led by it
KEY_WHOLE, KEY_IS_GROUP, KEY_TUPLE = 0, 1, 2
#: state codes
MEMORY, ERRED = 0, 1
STATES = ("memory", "erred")
#: microseconds: times are kept as integer offsets from the segment's first start
_US = 1e-6
#: a segment's payload stays under this (a larger one is split in two): the wire's bound
#: on a bytes field, and a server's batch, must take it
MAX_PAYLOAD_BYTES = 12 * 2**20
#: bits of the key filter per key, and the hashes each key sets (~1 % false positives)
_FILTER_BITS_PER_KEY = 10
_FILTER_HASHES = 7


def segment_id(cluster_id: str, number: int) -> str:
    return stable_id(cluster_id, "task_segment", number)


def key_parts(key: str, group: str) -> tuple[int, str]:
    """``key`` (the str of a Dask key) as (form, rest) relative to its group's name."""
    if key == group:
        return KEY_IS_GROUP, ""
    lead = f"({group!r}, "
    if key.startswith(lead) and key.endswith(")"):
        return KEY_TUPLE, key[len(lead) : -1]
    return KEY_WHOLE, key


def key_text(form: int, rest: str, group: str) -> str:
    """The key's text again, from :func:`key_parts`."""
    if form == KEY_IS_GROUP:
        return group
    if form == KEY_TUPLE:
        return f"({group!r}, {rest})"
    return rest


#: One execution as the recorder buffers it: a tuple of what Dask handed the hook,
#: ``(key, group, prefix, worker, thread, start, stop, actions, erred, nbytes,
#: computation, span)``. ``start``/``stop`` are its compute action's when that was its
#: only action; else None, and ``actions`` holds Dask's startstops as they came.
Execution = tuple[Any, ...]


def execution(
    key: Any,
    group: str,
    prefix: str,
    worker: str,
    thread: int | None,
    startstops: Sequence[dict[str, Any]],
    *,
    erred: bool,
    nbytes: int | None,
    computation: str | None,
    span: str | None,
) -> Execution:
    """The buffered form of one execution (the recorder's hook builds it inline)."""
    if len(startstops) == 1 and startstops[0]["action"] == "compute":
        only = startstops[0]
        return (key, group, prefix, worker, thread, only["start"], only["stop"], None,
                erred, nbytes, computation, span)  # fmt: skip
    return (key, group, prefix, worker, thread, None, None, startstops,
            erred, nbytes, computation, span)  # fmt: skip


# -- encoding (in the writer thread) -----------------------------------------------------


def encode_segment(
    cluster_id: str, number: int, executions: Sequence[Execution]
) -> list[TaskSegmentRecord]:
    """``executions`` as segment records numbered from ``number`` (one, unless the
    payload would pass :data:`MAX_PAYLOAD_BYTES`: then halves, recursively)."""
    record = _encode_one(cluster_id, number, executions)
    if len(record.payload) <= MAX_PAYLOAD_BYTES or len(executions) < 2:
        return [record]
    half = len(executions) // 2
    first = encode_segment(cluster_id, number, executions[:half])
    return first + encode_segment(cluster_id, number + len(first), executions[half:])


def _split_actions(
    executions: Sequence[Execution],
) -> tuple[list[float], list[float], list[tuple[int, str, float, float, str | None]]]:
    """Each execution's compute start/stop, and its other actions as
    ``(row, action, start, stop, source)``. An execution without a compute action gets
    a zero-length one at its first action's start."""
    starts = [e[5] for e in executions]
    stops = [e[6] for e in executions]
    others: list[tuple[int, str, float, float, str | None]] = []
    for row, e in enumerate(executions):
        startstops = e[7]
        if startstops is None:
            continue
        start = -1.0
        for ss in startstops:
            action = ss.get("action")
            if action == "compute" and start < 0:
                start, stop = ss["start"], ss["stop"]
                continue
            source = ss.get("source")
            others.append(
                (row, str(action), ss["start"], ss["stop"], None if source is None else str(source))
            )
        if start < 0:
            start = stop = min(ss["start"] for ss in startstops)
        starts[row], stops[row] = start, stop
    return starts, stops, others


def _encode_one(cluster_id: str, number: int, executions: Sequence[Execution]) -> TaskSegmentRecord:
    import numpy as np
    import pyarrow as pa  # type: ignore[import-untyped]

    (keys, groups, prefixes, workers, threads, _, _, _, erreds, nbytes, comps, spans) = zip(
        *executions, strict=True
    )
    starts, stops, others = _split_actions(executions)
    start = np.array(starts, dtype=np.float64)
    stop = np.array(stops, dtype=np.float64)
    order = np.argsort(start, kind="stable")  # sorted by start: offsets compress well
    n = len(executions)
    a_rows = np.array([o[0] for o in others], dtype=np.int64)
    a_start = np.array([o[2] for o in others], dtype=np.float64)
    a_stop = np.array([o[3] for o in others], dtype=np.float64)
    new_place = np.empty(n, dtype=np.int64)
    new_place[order] = np.arange(n)
    a_place = new_place[a_rows] if len(a_rows) else a_rows
    a_order = np.argsort(a_place, kind="stable")
    first = float(min(start.min(), a_start.min() if len(a_start) else np.inf))
    last = float(max(stop.max(), a_stop.max() if len(a_stop) else -np.inf))
    base = float(np.floor(first / _US) * _US)  # whole microseconds: offsets are exact

    # one dictionary of names for every string column of the segment
    texts = [str(w) if w is not None else None for w in workers]
    columns = [list(groups), list(prefixes), texts, list(comps), list(spans)]
    action_names = [o[1] for o in others]
    sources = [o[4] for o in others]
    joined = pa.array([v for c in columns for v in c] + action_names + sources, type=pa.string())
    encoded = joined.dictionary_encode()
    dictionary = encoded.dictionary
    all_codes = np.asarray(encoded.indices.fill_null(-1), dtype=np.int32)

    def interned(codes: npt.NDArray[np.int32]) -> Any:
        return pa.DictionaryArray.from_arrays(
            pa.array(codes, mask=codes < 0, type=pa.int32()), dictionary
        )

    def offsets(times: npt.NDArray[np.float64]) -> Any:
        return pa.array(np.rint((times - base) / _US).astype(np.int64))

    code = [all_codes[i * n : (i + 1) * n][order] for i in range(len(columns))]
    a_codes = all_codes[len(columns) * n :]
    a_name, a_source = a_codes[: len(others)][a_order], a_codes[len(others) :][a_order]
    names = dictionary.to_pylist()
    group_names = [names[c] for c in code[0].tolist()]
    key_texts = [str(keys[i]) for i in order.tolist()]
    forms, rests = _key_columns(key_texts, group_names)
    nbytes_array = np.array([-1 if b is None else b for b in nbytes], dtype=np.int64)[order]
    erred = np.array(erreds, dtype=bool)[order]
    nbytes_array[erred] = -1
    thread = np.array([t or NO_THREAD for t in threads], dtype=np.int64)[order]
    table = pa.table(
        {
            "key_form": pa.array(forms, type=pa.int8()),
            "key_rest": pa.array(rests, type=pa.string()),
            "group": interned(code[0]),
            "prefix": interned(code[1]),
            "worker": interned(code[2]),
            "thread": pa.array(thread),
            "start_us": offsets(start[order]),
            "duration_us": pa.array(np.rint((stop - start)[order] / _US).astype(np.int64)),
            "state": pa.array(np.where(erred, ERRED, MEMORY).astype(np.int8)),
            "nbytes": pa.array(nbytes_array, mask=nbytes_array < 0, type=pa.int64()),
            "computation": interned(code[3]),
            "span": interned(code[4]),
        }
    )
    actions = pa.table(
        {
            "row": pa.array(a_place[a_order].astype(np.int32)),
            "action": interned(a_name),
            "start_us": offsets(a_start[a_order]),
            "duration_us": pa.array(np.rint((a_stop - a_start)[a_order] / _US).astype(np.int64)),
            "source": interned(a_source),
        }
    )
    s_start, s_stop = start[order], stop[order]
    span_first, span_last = s_start.copy(), s_stop.copy()
    placed = a_place[a_order]
    if len(placed):
        np.minimum.at(span_first, placed, a_start[a_order])
        np.maximum.at(span_last, placed, a_stop[a_order])
    summary = summarize(
        names,
        first=first,
        last=last,
        start=s_start,
        stop=s_stop,
        span_first=span_first,
        span_last=span_last,
        group=code[0],
        worker=code[2],
        thread=thread,
        computation=code[3],
        span=code[4],
        action_row=placed,
        action_name=a_name,
        action_start=a_start[a_order],
        action_stop=a_stop[a_order],
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
        groups=sorted(set(group_names)),
        summary=summary,
        key_filter=_key_filter(key_texts),
    )


def _key_columns(keys: list[str], groups: list[str]) -> tuple[list[int], list[str]]:
    """:func:`key_parts` of every key, inlined (this loop is most of a segment's
    encoding)."""
    forms: list[int] = []
    rests: list[str] = []
    leads: dict[str, str] = {}
    for key, group in zip(keys, groups, strict=True):
        lead = leads.get(group)
        if lead is None:
            lead = leads[group] = f"({group!r}, "
        if key.startswith(lead) and key.endswith(")"):
            forms.append(KEY_TUPLE)
            rests.append(key[len(lead) : -1])
        elif key == group:
            forms.append(KEY_IS_GROUP)
            rests.append("")
        else:
            forms.append(KEY_WHOLE)
            rests.append(key)
    return forms, rests


def _ipc_bytes(table: Any, actions: Any, base: float) -> bytes:
    """The two tables as two IPC streams (each has its own schema), the first's length
    in front; the time base in the schemas' metadata."""
    import pyarrow as pa
    import pyarrow.ipc as ipc  # type: ignore[import-untyped]

    options = ipc.IpcWriteOptions(compression="zstd")
    parts = []
    for t in (table, actions):
        t = t.replace_schema_metadata({"base": repr(base)})
        sink = pa.BufferOutputStream()
        with ipc.new_stream(sink, t.schema, options=options) as writer:
            writer.write_table(t)
        parts.append(sink.getvalue().to_pybytes())
    return len(parts[0]).to_bytes(8, "little") + parts[0] + parts[1]


# -- the key filter ---------------------------------------------------------------------


#: bytes of a key's text the filter hashes: its last ones (where keys differ: indices,
#: tokens); keys alike there only cost a segment decoded for nothing
_HASHED_BYTES = 96
_FNV_OFFSET, _FNV_PRIME = 0xCBF29CE484222325, 0x100000001B3


def _key_hashes(keys: Sequence[str]) -> npt.NDArray[np.uint64]:
    """Two 64-bit hashes of each key (FNV-1a over its last bytes, and a remix of it),
    vectorised over the keys: an ``(n, 2)`` array."""
    import numpy as np

    tails = [k.encode("utf-8", "surrogatepass")[-_HASHED_BYTES:] for k in keys]
    matrix = np.array(tails, dtype=f"S{_HASHED_BYTES}").view(np.uint8)
    matrix = matrix.reshape(len(keys), _HASHED_BYTES)
    h = np.full(len(keys), _FNV_OFFSET, dtype=np.uint64)
    prime = np.uint64(_FNV_PRIME)
    with np.errstate(over="ignore"):
        for column in range(_HASHED_BYTES):
            h = (h ^ matrix[:, column].astype(np.uint64)) * prime
        h2 = (h ^ (h >> np.uint64(29))) * np.uint64(0xBF58476D1CE4E5B9) | np.uint64(1)
    return np.stack([h, h2], axis=1)


def _filter_positions(hashes: npt.NDArray[np.uint64], bits: int) -> npt.NDArray[np.uint64]:
    """The bit positions of each key: ``(n, hashes)``."""
    import numpy as np

    steps = np.arange(_FILTER_HASHES, dtype=np.uint64)
    with np.errstate(over="ignore"):
        mixed = hashes[:, :1] + steps[None, :] * hashes[:, 1:2]
    return mixed % np.uint64(bits)


def _key_filter(keys: Sequence[str]) -> bytes:
    """A Bloom filter of the segment's keys: a lookup decodes only segments it admits."""
    import numpy as np

    bits = max(64, len(keys) * _FILTER_BITS_PER_KEY)
    field = np.zeros(bits, dtype=bool)
    if keys:
        field[_filter_positions(_key_hashes(keys), bits).ravel().astype(np.int64)] = True
    return bits.to_bytes(8, "little") + np.packbits(field, bitorder="little").tobytes()


def key_filter_may_hold(key_filter: bytes, key: str) -> bool:
    """False when ``key`` is surely not in the segment of this filter (empty: unknown)."""
    import numpy as np

    if len(key_filter) < 8:
        return True
    bits = int.from_bytes(key_filter[:8], "little")
    field = np.frombuffer(key_filter, dtype=np.uint8, offset=8)
    positions = _filter_positions(_key_hashes([key]), bits)[0].astype(np.int64)
    return bool(((field[positions // 8] >> (positions % 8)) & 1).all())


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

    def __len__(self) -> int:
        return len(self.start)

    def name_index(self, name: str) -> int:
        """The index of ``name`` in this segment's names, -1 when absent."""
        try:
            return self.names.index(name)
        except ValueError:
            return -1

    def key(self, row: int) -> str:
        rest = self.key_rest[row].as_py()
        return key_text(int(self.key_form[row]), rest, self.names[int(self.group[row])])


def decode_segment(format: str, payload: bytes) -> DecodedSegment:
    """The executions of a segment's payload; an unknown format is an error that says so."""
    if format != FORMAT:
        raise ValueError(
            f"task segment format {format!r} is not one this daskscope reads ({FORMAT!r}); "
            "upgrade daskscope"
        )
    import numpy as np
    import pyarrow as pa  # type: ignore[import-untyped]
    import pyarrow.ipc as ipc  # type: ignore[import-untyped]

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
    )
