"""What the process and the input tell about a chunk: resident memory, its high-water
mark, and (by duck typing, coffea never imported) events, file, entry range and the
bytes uproot requested. Runs inside workers: imports nothing heavy."""

from __future__ import annotations

import os
from typing import Any

__all__ = ["bytes_requested", "describe_events", "maxrss", "peak", "rss", "tree_bytes"]

_process: Any = None


def rss() -> int | None:
    global _process
    try:
        # One psutil.Process per pid: building it costs more than the reading itself
        if _process is None or _process.pid != os.getpid():
            import psutil

            _process = psutil.Process()
        return int(_process.memory_info().rss)
    except Exception:
        return None


def maxrss() -> int | None:
    # The process's high-water mark; kibibytes on Linux.
    try:
        import resource

        return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024
    except Exception:
        return None


def peak(
    rss0: int | None, rss1: int | None, max0: int | None, max1: int | None, seen: int
) -> int | None:
    # A rise of the process's high-water mark happened during this chunk: it is the
    # chunk's peak. Otherwise the highest value we saw ourselves is the best we know.
    if max0 is not None and max1 is not None and max1 > max0:
        return max1
    values = [v for v in (rss0, rss1, seen or None) if v is not None]
    return max(values) if values else None


def describe_events(events: Any) -> dict[str, Any]:
    """What the input says about the chunk, by duck typing (coffea is never imported).

    ``static`` holds events, dataset, file and entry range; ``bytes_read`` is a callable
    reading uproot's count of bytes requested through the chunk's file handle (coffea
    opens one handle per chunk), or None.
    """
    static: dict[str, Any] = {}
    out: dict[str, Any] = {"static": static, "bytes_read": None, "tree_bytes": None}
    if events is None:
        return out
    metadata = getattr(events, "metadata", None)
    if isinstance(metadata, dict):
        static["events"] = _length(events)
        static["dataset"] = metadata.get("dataset")
        static["filename"] = metadata.get("filename")
        static["treename"] = metadata.get("treename")
        static["entry_start"] = metadata.get("entrystart")
        static["entry_stop"] = metadata.get("entrystop")
        static["fileuuid"] = metadata.get("fileuuid")
    try:
        factory = events.attrs.get("@events_factory")
        source = factory.file_handle.file.source
        if hasattr(source, "num_requested_bytes"):
            out["bytes_read"] = lambda: int(source.num_requested_bytes)
        treename = static.get("treename")
        if treename:
            key = (static.get("filename"), treename, str(static.get("fileuuid")))
            out["tree_bytes"] = lambda: _tree_bytes_once(key, factory.file_handle)
    except Exception:
        pass
    return out


def bytes_requested(events: Any) -> int | None:
    """uproot's count of bytes requested so far through ``events``' file handle."""
    try:
        source = events.attrs.get("@events_factory").file_handle.file.source
        return int(source.num_requested_bytes)
    except Exception:
        return None


def tree_bytes(file_handle: Any, treename: str) -> tuple[int, int] | None:
    """(compressed, uncompressed) bytes of every basket of the tree, TKey headers
    included: uproot's ``TTree.compressed_bytes``/``uncompressed_bytes``, read from the
    branches' metadata (``fZipBytes``/``fTotBytes``) — no basket is read. Called after
    the chunk's bytes are counted, so a lookup never adds to them."""
    try:
        tree = file_handle[treename]
        return int(tree.compressed_bytes), int(tree.uncompressed_bytes)
    except Exception:
        return None


#: (file, tree, uuid) -> its sizes, per process: a file's chunks look its tree up once
_TREE_SIZES: dict[tuple[Any, str, str], tuple[int, int] | None] = {}
_TREE_SIZES_KEPT = 256


def _tree_bytes_once(key: tuple[Any, str, str], file_handle: Any) -> tuple[int, int] | None:
    if key not in _TREE_SIZES:
        if len(_TREE_SIZES) >= _TREE_SIZES_KEPT:
            _TREE_SIZES.pop(next(iter(_TREE_SIZES)))
        _TREE_SIZES[key] = tree_bytes(file_handle, key[1])
    return _TREE_SIZES[key]


def _length(events: Any) -> int | None:
    try:
        return len(events)
    except Exception:
        return None
