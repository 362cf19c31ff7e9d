"""Views that take long to build kept per store, for as long as what they read is
unchanged.

A computation of 10,000 task groups takes a second or more to read and to work out (its
critical path, its groups for a graph); its page, its JSON and its graph ask for the
same again at every request, paging or searching. A built value is kept with a
*fingerprint* of what it was built from (:func:`daskscope.store.groups.computation_fingerprint`:
counts, sums and revisions the database adds up in milliseconds), and given again only
while the fingerprint is the same: a new write to the computation, its groups, the
cluster's task log or spans builds it anew. Bounded per store: the last
:data:`MAX_ENTRIES` values, and values of at most :data:`MAX_WEIGHT` in all (a value's
weight is what it holds: a view of 10,000 groups weighs 10,000); a server process has
its own.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, TypeVar
from weakref import WeakKeyDictionary

__all__ = ["MAX_ENTRIES", "clear", "memoized", "stats"]

T = TypeVar("T")

#: Values kept per store
MAX_ENTRIES = 64
#: Their weights kept per store, in all (about 1 KB a unit: 100 MB)
MAX_WEIGHT = 100_000

_lock = threading.Lock()
_kept: WeakKeyDictionary[Any, OrderedDict[Hashable, tuple[Hashable, Any, int]]] = (
    WeakKeyDictionary()
)
_counts = {"hits": 0, "builds": 0}


def memoized(
    store: Any,
    key: Hashable,
    fingerprint: Hashable | None,
    build: Callable[[], T],
    weight: Callable[[T], int] = lambda value: 1,
) -> T:
    """``build()``, or the value built for ``key`` in ``store`` under the same
    ``fingerprint`` (None: build, keep nothing); ``weight(value)`` counts towards
    :data:`MAX_WEIGHT`."""
    if fingerprint is None:
        return build()
    with _lock:
        entries = _kept.get(store)
        found = entries.get(key) if entries is not None else None
        if found is not None and found[0] == fingerprint:
            entries.move_to_end(key)  # type: ignore[union-attr]
            _counts["hits"] += 1
            return found[1]  # type: ignore[no-any-return]
    value = build()
    heavy = max(1, weight(value))
    with _lock:
        _counts["builds"] += 1
        entries = _kept.setdefault(store, OrderedDict())
        entries[key] = (fingerprint, value, heavy)
        entries.move_to_end(key)
        total = sum(entry[2] for entry in entries.values())
        while len(entries) > 1 and (len(entries) > MAX_ENTRIES or total > MAX_WEIGHT):
            total -= entries.popitem(last=False)[1][2]
    return value


def clear(store: Any = None) -> None:
    """Forget what is kept for ``store`` (None: for every store)."""
    with _lock:
        if store is None:
            _kept.clear()
        else:
            _kept.pop(store, None)


def stats() -> dict[str, int]:
    """Values given again (``hits``) and built (``builds``) since the process started."""
    with _lock:
        return dict(_counts)
