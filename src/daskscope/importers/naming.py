"""Dask keys and names as a dump or a report spells them: tuples come back as lists, and
objects as their repr."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["dask_key", "group_of", "prefix_of", "repr_address"]

_WORKER_REPR = re.compile(r"<WorkerState '([^']+)'")


def dask_key(value: Any) -> Any:
    """A key as Dask had it: msgpack and YAML turn a tuple key into a list."""
    if isinstance(value, list):
        return tuple(dask_key(v) for v in value)
    return value


def group_of(key: Any) -> str:
    """The name of the key's task group, as the scheduler names it."""
    from distributed.utils import key_split_group

    return str(key_split_group(key))


def prefix_of(name: Any) -> str:
    """The task prefix of a key or a group name."""
    from dask.utils import key_split

    return str(key_split(name))


def repr_address(value: Any) -> str | None:
    """The address in a dumped worker reference: a dump writes a ``WorkerState`` held by
    a task as its repr (``<WorkerState 'tcp://…', name: 0, …>``), a plain address as
    itself."""
    if not isinstance(value, str):
        return None
    found = _WORKER_REPR.match(value)
    if found:
        return found.group(1)
    return value if "://" in value else None
