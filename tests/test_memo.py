"""views/memo.py pauses Python's cyclic garbage collector while it builds a view, and
puts it back as it found it: after nested builds, builds in several threads at once, a
build that raises, and when it was off before."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator

import pytest

from daskscope.store import Store, open_store
from daskscope.views import memo


@pytest.fixture(autouse=True)
def collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


@pytest.fixture
def store() -> Iterator[Store]:
    """A real store (in memory): memo keeps its values in it."""
    with open_store("sqlite://") as opened:
        yield opened


def test_a_build_runs_with_the_collector_paused(store: Store) -> None:
    seen = []

    def inner() -> str:
        seen.append(("inner", gc.isenabled()))
        return "inner"

    def outer() -> str:
        seen.append(("outer", gc.isenabled()))
        memo.memoized(store, "inner", 1, inner)  # a build inside a build
        seen.append(("outer after", gc.isenabled()))
        return "outer"

    assert memo.memoized(store, "outer", 1, outer) == "outer"
    assert seen == [("outer", False), ("inner", False), ("outer after", False)]
    assert gc.isenabled()
    # no fingerprint: built each time, paused all the same
    assert memo.memoized(store, "x", None, lambda: gc.isenabled()) is False
    assert gc.isenabled()


def test_a_failing_build_puts_the_collector_back(store: Store) -> None:
    def fails() -> None:
        raise RuntimeError("no view")

    with pytest.raises(RuntimeError, match="no view"):
        memo.memoized(store, "k", 1, fails)
    assert gc.isenabled()


def test_off_before_stays_off(store: Store) -> None:
    gc.disable()
    assert memo.memoized(store, "k", 1, lambda: 1) == 1
    assert not gc.isenabled()


def test_builds_in_threads_at_once(store: Store) -> None:
    started = threading.Barrier(3)
    second_done = threading.Event()
    during = []

    def first() -> int:
        started.wait()
        second_done.wait(10)
        during.append(gc.isenabled())  # the other build ended: still paused for this one
        return 1

    def second() -> int:
        started.wait()
        return 2

    threads = [
        threading.Thread(target=memo.memoized, args=(store, "a", 1, first)),
        threading.Thread(target=lambda: (memo.memoized(store, "b", 1, second), second_done.set())),
    ]
    for t in threads:
        t.start()
    started.wait()
    for t in threads:
        t.join(10)
    assert during == [False]
    assert gc.isenabled()


def test_the_switch_leaves_the_collector_running(store: Store) -> None:
    memo.PAUSE_COLLECTOR = False
    try:
        assert memo.memoized(store, "k", 1, lambda: gc.isenabled()) is True
    finally:
        memo.PAUSE_COLLECTOR = True
