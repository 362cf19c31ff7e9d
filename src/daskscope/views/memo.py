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
its own. The values are kept by the Store object itself (``Store.kept``): dropped when it
is closed, never given to another store.

A build pauses Python's cyclic garbage collector (:func:`collector_paused`): building a
view of 10,000 groups makes hundreds of thousands of small objects, each of which
counts towards the collector's next pass, and each full pass walks every object the
server holds (its kept views, the task log's caches); with the collector running, a
cold 10,000-group critical path took twice as long (docs/benchmarks.md). Reference
counting frees what a build drops as usual; cycles wait for the collector's next pass.
"""

from __future__ import annotations

import gc
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from daskscope.store import Store

__all__ = ["MAX_ENTRIES", "PAUSE_COLLECTOR", "clear", "collector_paused", "memoized", "stats"]

T = TypeVar("T")

#: Values kept per store
MAX_ENTRIES = 64
#: Their weights kept per store, in all (about 1 KB a unit: 100 MB)
MAX_WEIGHT = 100_000

_lock = threading.Lock()
#: key -> (fingerprint, value, weight), oldest first
_Kept = OrderedDict[Hashable, tuple[Hashable, object, int]]
#: the name of the views' cache in ``Store.kept``
_NAME = "views.memo"
_counts = {"hits": 0, "builds": 0}

#: Whether a build pauses the cyclic collector (False: it runs as usual; a benchmark
#: compares both)
PAUSE_COLLECTOR = True
_paused = 0  # builds under way that paused it
_resume = False  # whether the first of them found it running


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic collector off for the block, and back on after the last of the
    blocks running at once (in any thread) ends, if it was on before the first."""
    global _paused, _resume
    if not PAUSE_COLLECTOR:
        yield
        return
    with _lock:
        if _paused == 0:
            _resume = gc.isenabled()
            gc.disable()
        _paused += 1
    try:
        yield
    finally:
        with _lock:
            _paused -= 1
            if _paused == 0 and _resume:
                gc.enable()


def _kept(store: Store) -> _Kept:
    return store.kept(_NAME, _Kept)


def memoized(
    store: Store,
    key: Hashable,
    fingerprint: Hashable | None,
    build: Callable[[], T],
    weight: Callable[[T], int] = lambda value: 1,
) -> T:
    """``build()``, or the value built for ``key`` in ``store`` under the same
    ``fingerprint`` (None: build, keep nothing); ``weight(value)`` counts towards
    :data:`MAX_WEIGHT`."""
    if fingerprint is None:
        with collector_paused():
            return build()
    with _lock:
        entries = _kept(store)
        found = entries.get(key)
        if found is not None and found[0] == fingerprint:
            entries.move_to_end(key)
            _counts["hits"] += 1
            return found[1]  # type: ignore[return-value]
    with collector_paused():
        value = build()
    heavy = max(1, weight(value))
    with _lock:
        _counts["builds"] += 1
        entries = _kept(store)
        entries[key] = (fingerprint, value, heavy)
        entries.move_to_end(key)
        total = sum(entry[2] for entry in entries.values())
        while len(entries) > 1 and (len(entries) > MAX_ENTRIES or total > MAX_WEIGHT):
            total -= entries.popitem(last=False)[1][2]
    return value


def clear(store: Store) -> None:
    """Forget what is kept for ``store``."""
    with _lock:
        store.forget_kept(_NAME)


def stats() -> dict[str, int]:
    """Values given again (``hits``) and built (``builds``) since the process started."""
    with _lock:
        return dict(_counts)
