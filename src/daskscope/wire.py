"""The JSON form of a batch of records, as the collector sends it to a daskscope server.

``{"version": 1, "records": [{"kind": "task_group", "data": {"id": ..., ...}}, ...]}``:
each record is its kind and its dataclass fields. msgspec encodes it (in the scheduler)
and decodes it (in the server): decoding checks every field against its type and the
rules the record declares for it (``daskscope.shape``) in one pass over the bytes, which is
what keeps a team server's ingest cheap (docs/benchmarks.md).
"""

from __future__ import annotations

import dataclasses
import functools
import operator
import re
import threading
import typing
from collections.abc import Iterable, Iterator, Sequence
from typing import Annotated, Any

import msgspec

from daskscope.model import RECORD_TYPES, Record, record_to_dict
from daskscope.shape import Column, RecordField, record_fields
from daskscope.text import escape_value

__all__ = [
    "PART_BYTES",
    "WIRE_VERSION",
    "NotJSON",
    "Part",
    "WireBatch",
    "WireError",
    "decode_batch",
    "decode_parts",
    "decode_rows_json",
    "encode_batch",
    "encode_batches",
    "wire_struct",
]

WIRE_VERSION = 1


class _Item(msgspec.Struct, frozen=True):
    kind: str
    data: Any


# str for what JSON cannot hold: Dask annotations may carry arbitrary objects, and a
# string beats a crash in the scheduler. Non-finite floats become null (not measured).
_encoder = msgspec.json.Encoder(enc_hook=str)


def encode_batch(records: Iterable[Record]) -> bytes:
    records = list(records)
    try:
        return _encoder.encode(
            {"version": WIRE_VERSION, "records": [_Item(r.KIND, r) for r in records]}
        )
    except UnicodeEncodeError:
        # A lone surrogate (Dask allows them in keys and text) has no UTF-8 form: send
        # the batch escaped as the store would keep it (daskscope.text)
        items = [_Item(r.KIND, escape_value(record_to_dict(r))) for r in records]
        return _encoder.encode({"version": WIRE_VERSION, "records": items})


def encode_batches(
    records: Sequence[Record], *, max_records: int, max_bytes: int
) -> Iterator[bytes]:
    """``records`` as batches a server takes: at most ``max_records`` records and, by
    halving, ``max_bytes`` bytes each (a single larger record goes alone: the server
    will say no to that one only). In order, but clusters first: a server takes a
    cluster's records once it knows the cluster."""
    records = sorted(records, key=lambda r: r.KIND != "cluster")  # stable
    max_records = max(1, max_records)
    for start in range(0, len(records), max_records):
        yield from _within_bytes(records[start : start + max_records], max_bytes)


def _within_bytes(records: Sequence[Record], max_bytes: int) -> Iterator[bytes]:
    payload = encode_batch(records)
    if len(payload) <= max_bytes or len(records) == 1:
        yield payload
        return
    half = len(records) // 2
    yield from _within_bytes(records[:half], max_bytes)
    yield from _within_bytes(records[half:], max_bytes)


class WireError(ValueError):
    """A batch that cannot be accepted; ``field`` names where (e.g. ``records[3].nbytes``)."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class NotJSON(WireError):
    """The body is not JSON at all."""


#: Epoch seconds accepted for times: 1970 to about 2255
_MAX_EPOCH = 2**33
_MAX_TEXT = 10_000_000
#: Short text (ids, owners: what the store indexes): a PostgreSQL btree entry holds
#: about 2,700 bytes, so longer text would fail the insert instead of being refused here
_MAX_SHORT_TEXT = 512
#: Bytes of one binary field (a task-log segment: ~50,000 executions at tens of bytes
#: each, with room to spare); a server's body limit applies as well
MAX_BYTES_FIELD = 64 * 2**20
#: Integers a BIGINT column holds
_MAX_INT = 2**63 - 1
#: No measured quantity comes near this (a million cores for a million years is 3e19
#: core seconds), and sums of many such values stay far from float overflow
_MAX_FLOAT = 1e30


def _constrained(f: RecordField) -> Any:
    """The field's type with the wire's rules, as the record declares them (daskscope.shape):
    no negative counts, sizes or durations where declared non-negative, epoch-second
    times, numbers a database column and a sum hold, bounded text (short where the
    store indexes it)."""
    kind, shape = f.hint, f.shape
    rules: dict[str, Any] = {}
    if shape.nonnegative:
        rules["ge"] = 0
    if shape.column is Column.TIME:
        rules["ge"], rules["le"] = 0, _MAX_EPOCH
    elif kind in (int, int | None):
        rules["le"] = _MAX_INT
        rules.setdefault("ge", -_MAX_INT)
    elif kind in (float, float | None):
        rules["le"] = _MAX_FLOAT
        rules.setdefault("ge", -_MAX_FLOAT)
    if kind in (str, str | None):
        rules["max_length"] = _MAX_SHORT_TEXT if shape.short else _MAX_TEXT
    if kind is bytes:
        return Annotated[bytes, msgspec.Meta(max_length=MAX_BYTES_FIELD)]
    if kind == dict[str, float]:
        return dict[str, Annotated[float, msgspec.Meta(ge=-_MAX_FLOAT, le=_MAX_FLOAT)]]
    if kind == dict[str, int]:
        return dict[str, Annotated[int, msgspec.Meta(ge=-_MAX_INT, le=_MAX_INT)]]
    if not rules:
        return kind
    if kind in (str, int, float):
        return Annotated[kind, msgspec.Meta(**rules)]
    (inner,) = (arg for arg in typing.get_args(kind) if arg is not type(None))  # X | None
    return Annotated[inner, msgspec.Meta(**rules)] | None


@functools.cache
def wire_struct(cls: type) -> type:
    """A msgspec Struct with record kind ``cls``'s fields, defaults and declared rules;
    unknown fields refused. Not tracked by the garbage collector: a batch makes many,
    and they hold no cycles."""
    fields: list[tuple[Any, ...]] = []
    for f in record_fields(cls):
        kind, default = _constrained(f), f.field
        if default.default is not dataclasses.MISSING:
            fields.append((f.name, kind, default.default))
        elif default.default_factory is not dataclasses.MISSING:
            fields.append((f.name, kind, msgspec.field(default_factory=default.default_factory)))
        else:
            fields.append((f.name, kind))
    return msgspec.defstruct(
        f"Wire{cls.__name__}", fields, kw_only=True, forbid_unknown_fields=True, gc=False
    )


class _Head(msgspec.Struct, frozen=True, gc=False, forbid_unknown_fields=True):
    """A record as the batch's first reading leaves it: its kind, and its data as the
    JSON text it came as (a view of the body, not a copy)."""

    kind: str
    data: msgspec.Raw


class _Decoding:
    """The decoders of a batch's first reading (one for each record limit) and of each
    record kind's data.

    Built once, under a lock: msgspec fills in a Struct type's decoding information
    while it builds the first decoder for it, and a server thread decoding with that
    type meanwhile crashed the process (seen under load)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._heads: dict[int, msgspec.json.Decoder[Any]] = {}
        self._of_kind: dict[str, msgspec.json.Decoder[Any]] = {}

    def heads(self, max_records: int) -> msgspec.json.Decoder[Any]:
        """The first reading of a batch: its version, and each record's kind and data."""
        decoder = self._heads.get(max_records)
        if decoder is None:
            with self._lock:
                decoder = self._heads.get(max_records)
                if decoder is None:
                    batch = msgspec.defstruct(
                        "Heads",
                        [
                            ("version", typing.Literal[WIRE_VERSION]),
                            (
                                "records",
                                Annotated[list[_Head], msgspec.Meta(max_length=max_records)],
                            ),
                        ],
                        forbid_unknown_fields=True,
                    )
                    decoder = self._heads[max_records] = msgspec.json.Decoder(batch)
        return decoder

    def of_kind(self, kind: str) -> msgspec.json.Decoder[Any]:
        """A JSON array of the data of records of ``kind``, checked field by field."""
        decoder = self._of_kind.get(kind)
        if decoder is None:
            with self._lock:
                decoder = self._of_kind.get(kind)
                if decoder is None:
                    record: Any = wire_struct(RECORD_TYPES[kind])
                    decoder = self._of_kind[kind] = msgspec.json.Decoder(list[record])
        return decoder


_decoding = _Decoding()
# "\\ud800" not followed by a low surrogate escape, or a low one alone; msgspec refuses
# both (rightly: they are no Unicode text) with a message about truncated input
_LONE_SURROGATE_ESCAPE = re.compile(
    rb"(?<!\\)\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F])|"
    rb"(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}"
)


#: JSON bytes of records decoded at a time while a batch is written: its rows take
#: about three times their JSON in memory, so a 31 MiB batch decoded whole held 93 MiB
#: of rows (docs/benchmarks.md, "Ingest memory")
PART_BYTES = 2 * 2**20
#: Parts start with the records others refer to: clusters, then workflow runs
_KIND_ORDER = {"cluster": 0, "workflow_run": 1}


@dataclasses.dataclass(frozen=True, slots=True)
class Part:
    """Some of a batch's records, decoded and checked: their rows by kind, and each
    row's index in the batch as sent."""

    rows: dict[str, list[dict[str, Any]]]
    indices: dict[str, list[int]]

    def in_order(self) -> list[tuple[int, str, dict[str, Any]]]:
        """Every row as ``(index, kind, row)``, in the order sent."""
        return sorted(
            (
                (index, kind, row)
                for kind, rows in self.rows.items()
                for index, row in zip(self.indices[kind], rows, strict=True)
            ),
            key=operator.itemgetter(0),
        )


class WireBatch:
    """A batch read whole once (its JSON, version, record count and kinds checked) and
    its records decoded and checked part by part (:meth:`parts`), so that only a part's
    rows are held at a time; a record that fails its check raises :class:`WireError`
    when its part is decoded, and the caller's transaction undoes the parts before."""

    def __init__(self, heads: list[_Head]):
        self._heads = heads

    def __len__(self) -> int:
        return len(self._heads)

    @functools.cached_property
    def splits(self) -> list[list[int]]:
        """The records' indices in parts of about :data:`PART_BYTES` of JSON: clusters
        first, then workflow runs (which the others refer to), then the rest, each in
        batch order."""
        heads, part_bytes = self._heads, PART_BYTES
        if sum(len(head.data) for head in heads) <= part_bytes:
            return [list(range(len(heads)))]
        order = sorted(range(len(heads)), key=lambda i: _KIND_ORDER.get(heads[i].kind, 2))
        splits, start, size = [], 0, 0
        for end, index in enumerate(order, 1):
            size += len(heads[index].data)
            if size >= part_bytes or end == len(order):
                splits.append(sorted(order[start:end]))
                start, size = end, 0
        return splits

    def parts(self, *, whole: bool = False) -> Iterator[Part]:
        """The records decoded a part at a time (:attr:`splits`), or ``whole``."""
        if whole:
            yield self._decoded(range(len(self._heads)))
            return
        for indices in self.splits:
            yield self._decoded(indices)

    def rows(self) -> list[tuple[str, dict[str, Any]]]:
        """Every record as a ``(kind, row)`` pair, in the order sent."""
        (whole,) = self.parts(whole=True)
        return [(kind, row) for _, kind, row in whole.in_order()]

    def _decoded(self, indices: Iterable[int]) -> Part:
        heads = self._heads
        by_kind: dict[str, list[int]] = {}
        for index in indices:
            by_kind.setdefault(heads[index].kind, []).append(index)
        as_dict = msgspec.structs.asdict
        rows: dict[str, list[dict[str, Any]]] = {}
        for kind, of_kind in by_kind.items():
            # one JSON array of the kind's data: one decoder call, not one a record
            array = b"[" + b",".join([heads[i].data for i in of_kind]) + b"]"
            try:
                decoded = _decoding.of_kind(kind).decode(array)
            except msgspec.ValidationError as exc:
                raise _part_error(str(exc), of_kind) from None
            rows[kind] = [as_dict(item) for item in decoded]
            if kind == "profile":
                for index, row in zip(of_kind, rows[kind], strict=True):
                    _check_profile_tree(row["tree"], f"records[{index}].data.tree")
        return Part(rows, by_kind)


def decode_parts(body: bytes, *, max_records: int = 100_000) -> WireBatch:
    """The batch in a request body, read once: raises :class:`NotJSON` for a body that
    is no JSON, and :class:`WireError` for a wrong version, too many records or an
    unknown kind; each record's fields are checked as its part is decoded."""
    try:
        batch = _decoding.heads(max_records).decode(body)
    except msgspec.ValidationError as exc:
        raise _wire_error(str(exc), max_records) from None
    except RecursionError:
        raise NotJSON(
            "body", "is nested too deeply to read; send plain records (docs/server.md)"
        ) from None
    except msgspec.DecodeError as exc:
        if _LONE_SURROGATE_ESCAPE.search(body):
            raise NotJSON(
                "body",
                "is not Unicode text: it holds a lone surrogate escape (\\udXXX without its "
                "pair); send the six characters themselves, escaped as \\\\udXXX, as "
                "daskscope's collector does (daskscope.text)",
            ) from None
        raise NotJSON("body", f"is not JSON: {exc}") from None
    for index, head in enumerate(batch.records):
        if head.kind not in RECORD_TYPES:
            raise WireError(
                f"records[{index}].kind",
                f"unknown record kind {head.kind!r}; known: {sorted(RECORD_TYPES)}",
            )
    return WireBatch(batch.records)


def decode_rows_json(
    body: bytes, *, max_records: int = 100_000
) -> list[tuple[str, dict[str, Any]]]:
    """The batch in a request body as ``(kind, row)`` pairs, each row a dict of every
    field of its record kind (what the store writes); raises :class:`WireError`, and
    nothing is returned partially, so a rejected batch stores nothing."""
    return decode_parts(body, max_records=max_records).rows()


_IN_ARRAY = re.compile(r" - at `\$\[(\d+)\]")


def _part_error(message: str, indices: list[int]) -> WireError:
    """msgspec's message about ``$[k]`` of an array of one kind's data, about
    ``records[i].data`` of the batch as sent."""
    found = _IN_ARRAY.search(message)
    if found is not None:
        index = indices[int(found.group(1))]
        message = _IN_ARRAY.sub(f" - at `$.records[{index}].data", message, count=1)
    return _wire_error(message, len(indices))


#: Deeper than real stacks (Python stops at 1000 frames, and each frame is two JSON
#: levels); the pages walk profile trees recursively
MAX_PROFILE_DEPTH = 256


def _check_profile_tree(tree: Any, field: str) -> None:
    """A profile tree is ``{count, description, children: {identifier: node}}`` (Dask's
    shape); anything else would be stored and then break every page that draws it."""
    pending: list[tuple[Any, int]] = [(tree, 0)]
    while pending:
        node, depth = pending.pop()
        where = f"{field} (a node at depth {depth})"
        if depth > MAX_PROFILE_DEPTH:
            raise WireError(field, f"deeper than {MAX_PROFILE_DEPTH} frames; prune the tree")
        if not isinstance(node, dict):
            raise WireError(where, "each node must be an object")
        count = node.get("count", 0)
        if type(count) is not int or not 0 <= count <= _MAX_INT:
            raise WireError(where, "'count' must be a non-negative integer")
        if not isinstance(node.get("description", {}), dict):
            raise WireError(where, "'description' must be an object")
        children = node.get("children", {})
        if not isinstance(children, dict):
            raise WireError(where, "'children' must be an object of nodes by identifier")
        pending.extend((child, depth + 1) for child in children.values())


def decode_batch(body: bytes, *, max_records: int = 100_000) -> list[Record]:
    """:func:`decode_rows_json` as record dataclasses."""
    rows = decode_rows_json(body, max_records=max_records)
    return [RECORD_TYPES[kind](**row) for kind, row in rows]


def _wire_error(message: str, max_records: int) -> WireError:
    """msgspec's message (``Expected `int`, got `str` - at `$.records[0].data.n```)
    turned round: the field first, named as the wire format names fields."""
    problem, _, where = message.rpartition(" - at `$")
    if not problem:  # about the body itself
        problem, where = message, "`"
    path = where[:-1].lstrip(".")
    problem = problem.replace("`", "'")
    if problem.startswith(("Object contains unknown field", "Object missing required field")):
        name = problem.split("'")[1]
        known = "unknown field" if path else "unknown field: a batch has 'version' and 'records'"
        if path.startswith("records"):
            known = "unknown field for this record kind"
        path = f"{path}.{name}" if path else name
        problem = known if "unknown" in problem else "required field missing"
    elif path == "version":
        problem = f"must be {WIRE_VERSION} (this server reads wire version {WIRE_VERSION})"
    elif path == "records" and "length <=" in problem:
        problem = f"at most {max_records} records a batch; split it"
    elif path.endswith(".kind") and problem.startswith("Invalid value"):
        given = problem.removeprefix("Invalid value ")
        problem = f"unknown record kind {given}; known: {sorted(RECORD_TYPES)}"
    return WireError(path or "body", problem)
