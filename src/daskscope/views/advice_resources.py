"""Facts the resource advice rules read beyond the cluster detail (issue 14)."""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlparse

from daskscope.store import Store

__all__ = ["file_sizes", "resource_extra"]


def resource_extra(
    store: Store, cluster_id: str | None, computation_id: str | None, run_id: str | None
) -> dict[str, Any]:
    """What goes into ``AdviceFacts.extra`` for the rules of ``analysis/advice/resources.py``:
    ``file_sizes``, the size of each input file of a run that can be stat'ed here (the
    read-amplification rule compares the bytes read with it). Only for a SQLite store, a
    file on the machine that ran the workflow: a PostgreSQL store is a team server, where
    the names are other machines' paths (and a server must not tell its own files'
    sizes to whoever names them)."""
    if run_id is None or store.dialect != "sqlite":
        return {}
    return {"file_sizes": file_sizes(set(store.run_filenames(run_id)))}


def file_sizes(names: set[str]) -> dict[str, int]:
    """Bytes of each named file that is a local path (or ``file:`` URL) present here;
    remote files (``root://``, ``https://``, ...) and missing ones are left out: their
    size is not measured rather than guessed."""
    sizes: dict[str, int] = {}
    for name in sorted(names):
        url = urlparse(name)
        if url.scheme not in ("", "file") and len(url.scheme) > 1:  # "C:" is a drive
            continue
        path = url.path if url.scheme == "file" else name
        try:
            sizes[name] = os.stat(path).st_size
        except OSError:
            continue
    return sizes
