"""Profile windows over a worker's cycles whose stamps are out of order.

A worker stamps each 1 s profile cycle with its estimate of the scheduler's clock. When
the scheduler's event loop stalls for seconds, a heartbeat's round trip takes that
long, the estimate jumps for one heartbeat and comes back, and one cycle is stamped
later than the cycles after it (seen on real clusters: +2.7 s, then -0.7 s). Dask picks
the cycles it returns by bisecting the stamps, so windows asked by stamp alone missed or
repeated cycles there. Here the worker's side is Dask's own code
(``Worker.get_profile``, ``Worker.get_profile_metadata``) over a history of known
cycles, each with a count of its own power of two: a window's count says exactly which
cycles it holds. A real cluster whose scheduler stalls is in test_recorder_lifecycle."""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

import pytest
from distributed import profile
from distributed.worker import Worker

from daskscope.collector.profiles import ProfileWindows, _cuts, _first_not_taken


class WorkerState:
    """What Dask's profile handlers read of a worker: its finished cycles and the one
    under way."""

    def __init__(self) -> None:
        self.profile_history: deque[tuple[float, dict[str, Any]]] = deque(maxlen=3600)
        self.profile_keys_history: deque[tuple[float, dict[str, Any]]] = deque(maxlen=3600)
        self.profile_recent = profile.create()
        self.profile_keys: dict[str, Any] = {}
        self.scheduler_delay = 0.0

    def cycle(self, stamp: float, count: int) -> None:
        tree = profile.create()
        tree["count"] = count
        self.profile_history.append((stamp, tree))
        self.profile_keys_history.append((stamp, {}))


class Handlers:
    """The scheduler's rpc to that worker, answered by Dask's own handlers."""

    def __init__(self, worker: WorkerState, fail_every: int = 0) -> None:
        self.worker = worker
        #: every n-th ask for a profile fails, as a worker's answer that times out
        self.fail_every = fail_every
        self.asked = 0

    async def profile_metadata(self, start: float, stop: float | None) -> dict[str, Any]:
        return await Worker.get_profile_metadata(self.worker, start=start, stop=stop)  # type: ignore[arg-type]

    async def profile(self, start: float, stop: float | None) -> dict[str, Any]:
        self.asked += 1
        if self.fail_every and self.asked % self.fail_every == 0:
            raise OSError("the worker did not answer")
        return await Worker.get_profile(self.worker, start=start, stop=stop)  # type: ignore[arg-type]


class Scheduler:
    def __init__(self, worker: WorkerState, fail_every: int = 0) -> None:
        self.workers = {"tcp://w": None}
        self.handlers = Handlers(worker, fail_every)

    def rpc(self, address: str) -> Handlers:
        return self.handlers


def windows_over(stamps: list[float], fail_every: int = 0) -> tuple[list[int], int]:
    """The counts of the windows taken as the cycles stamped ``stamps`` end one after
    the other (one window after each), then of the two last windows (as at a cluster's
    close: its workers retired, then the scheduler closing); cycle i counts 2**i.
    Also the samples the windows say they left out."""
    worker = WorkerState()
    scheduler = Scheduler(worker, fail_every)
    windows = ProfileWindows("c", on_error=lambda what, exc: None)
    counts = []

    async def take(last: bool) -> None:
        # a window is asked for at least 0.05 s after the one before, in real time:
        # here a moment later, so the window's own start is put back
        windows.since = stamps[0] - 0.5
        taken = await windows.collect(scheduler, timeout=5, last=last)  # type: ignore[arg-type]
        counts.append(int(taken.samples) if taken is not None else 0)

    async def run() -> None:
        for i, stamp in enumerate(stamps):
            worker.cycle(stamp, 2**i)
            await take(last=False)
        await take(last=True)  # the workers are retired
        await take(last=True)  # the scheduler closes

    asyncio.run(run())
    return counts, windows.samples_left_out


@pytest.mark.parametrize(
    "stamps",
    [
        [100.0, 101.0, 102.0, 103.0, 104.0, 105.0, 106.0],  # in order
        [100.0, 101.0, 102.0, 104.7, 104.0, 105.0, 106.0, 107.0],  # one stamped late
        [100.0, 101.0, 103.7, 104.6, 103.0, 104.0, 105.0, 106.0, 107.0],  # two
        [100.0, 101.0, 102.0, 103.0, 104.0, 105.0, 106.6, 106.0],  # at the end
    ],
    ids=["in-order", "one-late", "two-late", "late-at-the-end"],
)
def test_every_cycle_is_in_exactly_one_window(stamps: list[float]) -> None:
    counts, left_out = windows_over(stamps)
    assert left_out == 0
    assert sum(counts) == 2 ** len(stamps) - 1, [bin(c) for c in counts]
    assert no_cycle_twice(counts)


@pytest.mark.parametrize(
    "stamps",
    [
        [100.0, 101.0, 104.5, 105.5, 106.5, 104.0, 105.0, 106.0, 107.0, 108.0, 109.0],
        # a jump of 5.5 s: the cycles stamped before the late ones lie further back
        # than the 2 cycles a window looks back by default
        [100.0, 101.0, 107.5, 108.5, 109.5, 104.0, 105.0, 106.0, 107.0, 108.0, 109.0, 110.0],
    ],
    ids=["jump-3.5s", "jump-5.5s"],
)
@pytest.mark.parametrize("fail_every", [0, 2], ids=["answered", "every-other-ask-fails"])
def test_cycles_that_cannot_be_asked_for_are_left_out_and_counted(
    stamps: list[float], fail_every: int
) -> None:
    """Three cycles stamped late, then three stamped before them: a window took the
    first late one before the others came (two newest are held back), and the cycles
    stamped before it cannot be found without it. A window whose ask fails (every other
    one here) leaves its cycles to the next: none is lost or taken twice."""
    counts, left_out = windows_over(stamps, fail_every)
    assert no_cycle_twice(counts)
    assert sum(counts) + left_out == 2 ** len(stamps) - 1, [bin(c) for c in counts]
    assert left_out > 0


def no_cycle_twice(counts: list[int]) -> bool:
    return all(a & b == 0 for i, a in enumerate(counts) for b in counts[i + 1 :])


def test_cuts_are_where_bisection_finds_a_position_exactly() -> None:
    assert _cuts([1.0, 2.0, 3.0]) == [True, True, True, True]
    # 4.7 was stamped late: no position between it and 4.0 is found by bisecting
    assert _cuts([1.0, 2.0, 4.7, 4.0, 5.0]) == [True, True, True, False, True, True]
    assert _cuts([]) == [True]


def test_the_first_cycle_not_taken_follows_the_last_taken() -> None:
    assert _first_not_taken([1.0, 2.0, 4.7, 4.0, 5.0], 4.7) == 3  # by its exact stamp
    assert _first_not_taken([1.0, 2.0, 4.7, 4.0, 5.0], 1.5) == 1  # a time, no stamp
    assert _first_not_taken([1.0, 2.0], 9.0) == 2
