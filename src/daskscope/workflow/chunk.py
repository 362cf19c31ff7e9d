"""One chunk of a workflow run: the single form a chunk has, from capture to the view.

``@track_metrics`` builds a :class:`Chunk`; it travels as :meth:`Chunk.to_wire` (a plain
dict: the Dask event log, the side channel and saved runs carry no classes) and is
rebuilt with :meth:`Chunk.from_wire`; the store keeps it as a ``WorkflowChunkRecord``
(:meth:`Chunk.record`) and gives it back with :meth:`Chunk.from_row`. The seed's dict
(``collector.chunk_metrics``) is :meth:`Chunk.as_dict`, derived, never kept.

Imports nothing heavy: this module runs inside Dask workers and pool children.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from daskscope.model import WorkflowChunkRecord

__all__ = ["STORED_COLUMNS", "Chunk", "plain"]

#: The fields the store keeps as columns; every other field goes into ``detail``
STORED_COLUMNS = (
    "started_at", "stopped_at", "dataset", "filename", "entry_start", "entry_stop", "events",
    "bytes_read", "wall_s", "cpu_s", "memory_before_bytes", "memory_after_bytes",
    "memory_peak_bytes", "worker", "task_key",
)  # fmt: skip


@dataclass(kw_only=True)
class Chunk:
    """One call of a ``@track_metrics`` function (one attempt of one chunk of input).

    Every field is in ``docs/workflow.md`` ("Chunk metrics"); None is not measured.
    """

    chunk_id: str
    #: "ok", or "failed" when the call raised (``error_type``, ``error`` say what)
    status: str = "ok"
    #: epoch seconds (UTC)
    started_at: float | None = None
    stopped_at: float | None = None
    wall_s: float | None = None
    cpu_s: float | None = None
    memory_before_bytes: int | None = None
    memory_after_bytes: int | None = None
    memory_peak_bytes: int | None = None
    events: int | None = None
    bytes_read: int | None = None
    dataset: str | None = None
    filename: str | None = None
    treename: str | None = None
    entry_start: int | None = None
    entry_stop: int | None = None
    fileuuid: Any = None
    #: uproot's compressed / uncompressed bytes of the chunk's whole tree (every basket
    #: of every branch, from the branches' metadata): a property of the file, not of
    #: the chunk; the run sums it once per file
    tree_compressed_bytes: int | None = None
    tree_uncompressed_bytes: int | None = None
    #: per section: kind, count, wall_s, cpu_s / memory_delta_bytes, memory_after_bytes
    sections: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: custom fields set with ``current_chunk().set(...)``
    fields: dict[str, Any] = field(default_factory=dict)
    pid: int | None = None
    #: where it ran on Dask
    task_key: str | None = None
    task_prefix: str | None = None
    span_id: str | None = None
    worker: str | None = None
    #: the run it belongs to (the processor's route)
    collector_id: str | None = None
    error_type: str | None = None
    error: str | None = None
    #: 1, 2, ... per chunk of input in time order (set when the run's figures are made)
    attempt: int | None = None

    @property
    def ok(self) -> bool:
        return self.status != "failed"

    def to_wire(self) -> dict[str, Any]:
        """A plain dict of every field (what msgpack, pickle and JSON carry)."""
        out = {f.name: getattr(self, f.name) for f in _FIELDS}
        out["sections"] = {k: dict(v) for k, v in self.sections.items()}
        out["fields"] = dict(self.fields)
        return out

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> Chunk:
        """The chunk a wire dict (or a saved run's entry) describes; other keys (the
        seed's aliases of older saved runs) are left out."""
        known = {k: plain(data[k]) for k in _NAMES if k in data}
        known["sections"] = dict(known.get("sections") or {})
        known["fields"] = dict(known.get("fields") or {})
        known.setdefault("chunk_id", "")
        return cls(**known)

    def as_dict(self) -> dict[str, Any]:
        """The seed's dict: every field, ``duration``/``num_events`` beside ``wall_s``/
        ``events``, and the custom fields also at the top level where the name is free."""
        out = self.to_wire()
        out["duration"], out["num_events"] = self.wall_s, self.events
        for key, value in self.fields.items():
            out.setdefault(key, value)
        return out

    def record(self, run_id: str, cluster_id: str | None, index: int) -> WorkflowChunkRecord:
        """The store's record of this chunk (the ``index``-th of run ``run_id``)."""
        from daskscope.model import WorkflowChunkRecord, stable_id

        wire = self.to_wire()
        return WorkflowChunkRecord(
            id=stable_id(run_id, "chunk", self.chunk_id or index),
            run_id=run_id,
            cluster_id=cluster_id,
            chunk_index=index,
            detail={k: v for k, v in wire.items() if k not in STORED_COLUMNS},
            **{k: wire[k] for k in STORED_COLUMNS},
        )

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Chunk:
        """The chunk a stored row (``store.runs.run_detail``'s ``chunks``) holds."""
        return cls.from_wire({**(row.get("detail") or {}), **{k: row[k] for k in STORED_COLUMNS}})


def plain(value: Any) -> Any:
    """Something msgpack and JSON both carry: containers of str, numbers, bools, None,
    of exactly those types (a numpy scalar becomes its Python number, a tuple a list), so
    that a saved or stored run reads back with the same types. A float that is not a
    number (NaN, ±inf) becomes None: JSON has no such number."""
    if value is None or type(value) in (str, bool, int):
        return value
    if type(value) is float:
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    for base in (int, float, str):  # subclasses: numpy's float64, an IntEnum, ...
        if isinstance(value, base):
            return plain(base(value))
    try:  # numpy scalars
        return plain(value.item())
    except Exception:
        return str(value)


_FIELDS = dataclasses.fields(Chunk)
_NAMES = frozenset(f.name for f in _FIELDS)
