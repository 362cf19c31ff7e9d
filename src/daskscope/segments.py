"""The task log's segment format: task executions column-wise, as the recorder buffers
them (:class:`ExecutionColumns`) and as a :class:`~daskscope.model.TaskSegmentRecord`
keeps them (an Arrow IPC stream compressed with zstd, :data:`FORMAT`).

The recorder appends to plain Python arrays on the scheduler's event loop (no pyarrow
there); :func:`encode_segment` runs in its writer thread and :func:`decode_segment` in
whoever reads the store. Keys are kept compactly: a key is its group name (a dictionary
entry) and what remains of its text (``('inc-3f2a', 3)`` keeps ``3``).

One execution keeps its first compute action in the row itself (``start``/``stop``);
any other action (transfer with its source worker, disk read/write, deserialize, a second
compute) is a row of the segment's action columns pointing back to it.
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from daskscope.model import TaskSegmentRecord, stable_id

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "FORMAT",
    "NO_THREAD",
    "DecodedSegment",
    "ExecutionColumns",
    "decode_segment",
    "encode_segment",
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


class ExecutionColumns:
    """One segment's executions, column-wise, as the recorder appends them: strings
    (groups, prefixes, workers, actions, computation and span ids) interned to small
    ints in a table of the segment's own, so memory ends with the segment. Keys are kept
    as Dask gave them and turned into text in the writer thread."""

    __slots__ = (
        "action_name",
        "action_row",
        "action_source",
        "action_start",
        "action_stop",
        "computation",
        "group",
        "keys",
        "names",
        "nbytes",
        "prefix",
        "span",
        "start",
        "state",
        "stop",
        "thread",
        "worker",
    )

    def __init__(self) -> None:
        self.names: dict[str, int] = {}
        self.keys: list[Any] = []
        self.group = array("i")
        self.prefix = array("i")
        self.worker = array("i")
        self.thread = array("q")
        self.start = array("d")
        self.stop = array("d")
        self.state = array("b")
        self.nbytes = array("q")  # -1: unknown
        self.computation = array("i")  # -1: none
        self.span = array("i")  # -1: none
        self.action_row = array("i")
        self.action_name = array("i")
        self.action_start = array("d")
        self.action_stop = array("d")
        self.action_source = array("i")  # -1: none

    def __len__(self) -> int:
        return len(self.keys)

    def intern(self, text: str) -> int:
        names = self.names
        index = names.get(text)
        if index is None:
            index = names[text] = len(names)
        return index

    def append(
        self,
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
    ) -> None:
        """One execution, as the scheduler's transition hook reports it (``startstops``
        not empty: Dask always reports at least one action)."""
        intern = self.intern
        row = len(self.keys)
        start = stop = -1.0
        for ss in startstops:
            action = ss.get("action")
            if action == "compute" and start < 0:
                start, stop = ss["start"], ss["stop"]
                continue
            source = ss.get("source")
            self.action_row.append(row)
            self.action_name.append(intern(str(action)))
            self.action_start.append(ss["start"])
            self.action_stop.append(ss["stop"])
            self.action_source.append(-1 if source is None else intern(str(source)))
        if start < 0:  # no compute (a task that failed before): a zero-length one
            start = stop = min(ss["start"] for ss in startstops)
        self.keys.append(key)
        self.group.append(intern(group))
        self.prefix.append(intern(prefix))
        self.worker.append(intern(worker))
        self.thread.append(thread or NO_THREAD)
        self.start.append(start)
        self.stop.append(stop)
        self.state.append(ERRED if erred else MEMORY)
        self.nbytes.append(-1 if nbytes is None or erred else nbytes)
        self.computation.append(-1 if computation is None else intern(computation))
        self.span.append(-1 if span is None else intern(span))

    def sizeof(self) -> int:
        """Bytes the buffers hold (roughly: the keys are Dask's own objects)."""
        arrays = (getattr(self, name) for name in self.__slots__ if name not in ("keys", "names"))
        return sum(a.itemsize * len(a) for a in arrays) + 8 * len(self.keys)


# -- encoding (in the writer thread) -----------------------------------------------------


def encode_segment(
    cluster_id: str, number: int, columns: ExecutionColumns
) -> list[TaskSegmentRecord]:
    """``columns`` as segment records numbered from ``number`` (one, unless the payload
    would pass :data:`MAX_PAYLOAD_BYTES`: then halves, recursively)."""
    import numpy as np

    rows = np.arange(len(columns))
    return _encode_rows(cluster_id, number, columns, rows)


def _encode_rows(
    cluster_id: str, number: int, columns: ExecutionColumns, rows: npt.NDArray[Any]
) -> list[TaskSegmentRecord]:
    record = _encode_one(cluster_id, number, columns, rows)
    if len(record.payload) <= MAX_PAYLOAD_BYTES or len(rows) < 2:
        return [record]
    half = len(rows) // 2
    first = _encode_rows(cluster_id, number, columns, rows[:half])
    return first + _encode_rows(cluster_id, number + len(first), columns, rows[half:])


def _encode_one(
    cluster_id: str, number: int, columns: ExecutionColumns, rows: npt.NDArray[Any]
) -> TaskSegmentRecord:
    import numpy as np
    import pyarrow as pa  # type: ignore[import-untyped]

    names = np.array(list(columns.names), dtype=object)
    start = np.frombuffer(columns.start, dtype=np.float64)[rows]
    stop = np.frombuffer(columns.stop, dtype=np.float64)[rows]
    group = np.frombuffer(columns.group, dtype=np.int32)[rows]
    # the rows' own actions, renumbered to the rows' new places (sorted by start)
    order = np.argsort(start, kind="stable")
    rows, start, stop, group = rows[order], start[order], stop[order], group[order]
    a_row = np.frombuffer(columns.action_row, dtype=np.int32)
    new_place = np.full(len(columns), -1, dtype=np.int64)
    new_place[rows] = np.arange(len(rows))
    a_place = new_place[a_row] if len(a_row) else np.zeros(0, dtype=np.int64)
    a_keep = np.flatnonzero(a_place >= 0)
    a_keep = a_keep[np.argsort(a_place[a_keep], kind="stable")]
    a_start = np.frombuffer(columns.action_start, dtype=np.float64)[a_keep]
    a_stop = np.frombuffer(columns.action_stop, dtype=np.float64)[a_keep]
    first = float(min(start.min(), a_start.min() if len(a_start) else np.inf))
    last = float(max(stop.max(), a_stop.max() if len(a_stop) else -np.inf))
    base = float(np.floor(first / _US) * _US)  # whole microseconds: offsets are exact

    def offsets(times: npt.NDArray[np.float64]) -> pa.Array:
        return pa.array(np.rint((times - base) / _US).astype(np.int64))

    def interned(codes: npt.NDArray[np.int32]) -> pa.Array:
        # the segment's names, as Arrow dictionary indices (-1: null)
        mask = codes < 0
        return pa.DictionaryArray.from_arrays(
            pa.array(codes, mask=mask, type=pa.int32()), dictionary
        )

    dictionary = pa.array(names.tolist() if len(names) else [], type=pa.string())
    keys = [columns.keys[i] for i in rows.tolist()]
    group_names = names[group] if len(names) else np.zeros(0, dtype=object)
    forms, rests = _key_columns(keys, group_names.tolist())
    start_off = offsets(start)
    table = pa.table(
        {
            "key_form": pa.array(forms, type=pa.int8()),
            "key_rest": pa.array(rests, type=pa.string()),
            "group": interned(group),
            "prefix": interned(np.frombuffer(columns.prefix, dtype=np.int32)[rows]),
            "worker": interned(np.frombuffer(columns.worker, dtype=np.int32)[rows]),
            "thread": pa.array(np.frombuffer(columns.thread, dtype=np.int64)[rows]),
            "start_us": start_off,
            "duration_us": pa.array(np.rint((stop - start) / _US).astype(np.int64)),
            "state": pa.array(np.frombuffer(columns.state, dtype=np.int8)[rows]),
            "nbytes": _nullable(np.frombuffer(columns.nbytes, dtype=np.int64)[rows]),
            "computation": interned(np.frombuffer(columns.computation, dtype=np.int32)[rows]),
            "span": interned(np.frombuffer(columns.span, dtype=np.int32)[rows]),
        }
    )
    actions = pa.table(
        {
            "row": pa.array(a_place[a_keep].astype(np.int32)),
            "action": interned(np.frombuffer(columns.action_name, dtype=np.int32)[a_keep]),
            "start_us": offsets(a_start),
            "duration_us": pa.array(np.rint((a_stop - a_start) / _US).astype(np.int64)),
            "source": interned(np.frombuffer(columns.action_source, dtype=np.int32)[a_keep]),
        }
    )
    payload = _ipc_bytes(table, actions, base)
    used_groups = sorted({str(n) for n in set(group_names.tolist())})
    return TaskSegmentRecord(
        id=segment_id(cluster_id, number),
        cluster_id=cluster_id,
        segment=number,
        first_start=first,
        last_stop=last,
        executions=len(rows),
        format=FORMAT,
        payload=payload,
        groups=used_groups,
        key_filter=_key_filter(
            key_text(f, r, g) for f, r, g in zip(forms, rests, group_names.tolist(), strict=True)
        ),
    )


def _key_columns(keys: list[Any], groups: list[str]) -> tuple[list[int], list[str]]:
    forms: list[int] = []
    rests: list[str] = []
    for key, group in zip(keys, groups, strict=True):
        form, rest = key_parts(str(key), group)
        forms.append(form)
        rests.append(rest)
    return forms, rests


def _nullable(values: npt.NDArray[np.int64]) -> Any:
    import pyarrow as pa  # type: ignore[import-untyped]

    return pa.array(values, mask=values < 0, type=pa.int64())


def _ipc_bytes(table: Any, actions: Any, base: float) -> bytes:
    """The two tables as two IPC streams (each has its own schema), the first's length
    in front; the time base in the schemas' metadata."""
    import pyarrow as pa  # type: ignore[import-untyped]
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


def _key_hashes(key: str) -> tuple[int, int]:
    digest = hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=16).digest()
    return int.from_bytes(digest[:8], "little"), int.from_bytes(digest[8:], "little") | 1


def _key_filter(keys: Iterable[str]) -> bytes:
    """A Bloom filter of the segment's keys: a lookup decodes only segments it admits."""
    import numpy as np

    hashes = [_key_hashes(k) for k in keys]
    bits = max(64, len(hashes) * _FILTER_BITS_PER_KEY)
    field = np.zeros((bits + 7) // 8, dtype=np.uint8)
    if hashes:
        h = np.array(hashes, dtype=np.uint64)
        for i in range(_FILTER_HASHES):
            positions = (h[:, 0] + np.uint64(i) * h[:, 1]) % np.uint64(bits)
            np.bitwise_or.at(field, (positions // 8).astype(np.int64), 1 << (positions % 8))
    return bits.to_bytes(8, "little") + field.tobytes()


def key_filter_may_hold(key_filter: bytes, key: str) -> bool:
    """False when ``key`` is surely not in the segment of this filter (empty: unknown)."""
    if len(key_filter) < 8:
        return True
    bits = int.from_bytes(key_filter[:8], "little")
    h1, h2 = _key_hashes(key)
    mask = 2**64 - 1
    for i in range(_FILTER_HASHES):
        position = ((h1 + i * h2) & mask) % bits
        if not key_filter[8 + position // 8] & (1 << (position % 8)):
            return False
    return True


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
    return DecodedSegment(
        names=names,
        key_form=np.asarray(rows.column("key_form").combine_chunks(), dtype=np.int8),
        key_rest=rows.column("key_rest").combine_chunks(),
        group=codes(rows, "group"),
        prefix=codes(rows, "prefix"),
        worker=codes(rows, "worker"),
        thread=ints(rows, "thread"),
        start=start,
        stop=start + ints(rows, "duration_us") * _US,
        state=np.asarray(rows.column("state").combine_chunks(), dtype=np.int8),
        nbytes=ints(rows, "nbytes", -1),
        computation=codes(rows, "computation"),
        span=codes(rows, "span"),
        action_row=np.asarray(ints(actions, "row"), dtype=np.int32),
        action_name=codes(actions, "action"),
        action_start=a_start,
        action_stop=a_start + ints(actions, "duration_us") * _US,
        action_source=codes(actions, "source"),
    )
