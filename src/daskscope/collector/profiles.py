"""The workers' statistical profile, window after window, as profile records."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

import dask.config
import distributed.profile
from dask.utils import parse_timedelta
from distributed.metrics import time

from daskscope.analysis.flamegraph import count_innermost
from daskscope.collector import snapshot
from daskscope.model import ProfileRecord, Record, stable_id
from daskscope.wire import MAX_PROFILE_DEPTH

if TYPE_CHECKING:
    from distributed.scheduler import Scheduler

__all__ = ["ProfileWindows"]

#: How long a worker may take to send its profile window (a leaving worker: less)
TIMEOUT = 10.0
LAST_TIMEOUT = 3.0
#: How far before the last cycle taken a window looks for cycles stamped out of order,
#: in cycles, beyond the largest jump of the stamps it saw last time (a cycle stamped
#: late is that much ahead of the cycles after it)
LOOK_BACK_CYCLES = 2
#: Newest finished cycles a window leaves for later: asking up to the newest adds the
#: cycle under way, and a cycle stamped late (see _cuts) is followed by cycles stamped
#: before it; a window taken between them must not have taken it yet
HOLD_BACK = 2


class ProfileWindows:
    """Asks the workers for their profile since the last window, and merges it.

    A worker keeps its profile in cycles (``distributed.worker.profile.cycle``, 1 s),
    each stamped when it ended, plus the cycle under way. Dask's ``profile(start, stop)``
    returns the cycles stamped in ``[start, stop]``, one more after ``stop``, and the
    cycle under way when that reaches the end: windows of time asked one after the other
    count the cycles at their edges twice (up to half the samples again, measured). So
    each window takes whole cycles only, by their stamps (the worker's
    ``profile_metadata``): every finished cycle after the last one taken but the
    :data:`HOLD_BACK` newest. Dask finds them by bisecting the stamps, which are out of
    order after its estimate of the scheduler's clock jumped (:func:`_cuts`): a window
    asks only for runs of cycles that bisection finds exactly. The last window of
    workers about to leave takes everything, the cycle under way included; a worker that
    then stays skips its next cycle, already counted in part.

    A window's record is dated by the cycles it holds, not by when it was asked for:
    from the start of its first cycle to the stamp of its last (stamps are in the
    scheduler's time, ``Worker.scheduler_delay`` applied), so that a computation finds
    the samples taken while it ran.

    ``on_error(what, exc)`` hears of a failure of the last window taken in the
    background (:meth:`take_last`)."""

    def __init__(self, cluster_id: str, on_error: Callable[[str, BaseException], None]) -> None:
        self.cluster_id = cluster_id
        self.on_error = on_error
        #: where the next window starts (the stamps of cycles before it are not taken)
        self.since = 0.0
        #: each worker's stamp of the last cycle taken; after a last window, the worker's
        #: clock then, with True: skip the first cycle stamped after it
        self._taken: dict[str, tuple[float, bool]] = {}
        #: workers whose entry in _taken is the stamp of a cycle taken (else: when the
        #: worker was first asked, before any cycle of it was taken)
        self._stamped: set[str] = set()
        #: how far the next window of each worker looks back (see LOOK_BACK_CYCLES)
        self._look_back: dict[str, float] = {}
        #: the last window of workers about to leave, being taken
        self.last_words: asyncio.Future[None] | None = None
        #: one window at a time: a periodic one and the last words may overlap in time,
        #: and each must see the cycles the other took
        self._one_at_a_time = asyncio.Lock()
        #: samples of cycles no window can take, stamped out of order (see _cuts)
        self.samples_left_out = 0

    async def collect_into(
        self,
        scheduler: Scheduler,
        add: Callable[[Record], None],
        timeout: float = TIMEOUT,
        *,
        last: bool = False,
    ) -> None:
        async with self._one_at_a_time:
            record = await self.collect(scheduler, timeout, last=last)
        if record is not None:
            add(record)

    def take_last(self, scheduler: Scheduler, add: Callable[[Record], None]) -> None:
        """Workers are about to leave: take their profile now, in the background, while
        they can still answer (unless it is being taken already)."""
        if self.last_words is None or self.last_words.done():
            self.last_words = asyncio.ensure_future(self._take_last(scheduler, add))

    async def _take_last(self, scheduler: Scheduler, add: Callable[[Record], None]) -> None:
        try:
            await self.collect_into(scheduler, add, LAST_TIMEOUT, last=True)
        except Exception as exc:
            self.on_error("profile", exc)

    async def last_taken(self, *, shield: bool = False) -> None:
        """Wait for the last window being taken, if any (``shield``: without cancelling
        it should this wait be cancelled)."""
        if self.last_words is not None:
            waited = asyncio.shield(self.last_words) if shield else self.last_words
            await asyncio.wait_for(waited, timeout=LAST_TIMEOUT + 1)

    async def collect(
        self, scheduler: Scheduler, timeout: float, *, last: bool = False
    ) -> ProfileRecord | None:
        """The workers' merged profile since the last window (None: nothing sampled);
        ``last``: every cycle, the one under way included. Each worker is asked on its
        own, with a timeout: a worker on its way out must not hold the others back."""
        start, stop = self.since, time()
        workers = list(scheduler.workers)
        for gone in self._taken.keys() - set(workers):
            del self._taken[gone]
            self._stamped.discard(gone)
            self._look_back.pop(gone, None)
        # a last window is taken however close to the one before: that one left the
        # newest cycles and the one under way for later
        if not workers or (stop - start < 0.05 and not last):
            return None
        self.since = stop

        async def one(address: str) -> Any:
            window = self._worker_window(scheduler, address, start, last)
            return await asyncio.wait_for(window, timeout)

        answers = await asyncio.gather(*map(one, workers), return_exceptions=True)
        taken = [a for a in answers if isinstance(a, Taken) and a.tree.get("count")]
        tree = distributed.profile.merge(*(t.tree for t in taken)) if taken else None
        if not tree or not tree.get("count"):
            return None
        # Dask leaves the innermost frame of each sample uncounted: counted here, before
        # pruning (a cut frame's samples stay in its ancestors)
        count_innermost(tree)
        # the store and the server take trees of bounded depth
        snapshot.prune_profile(tree, MAX_PROFILE_DEPTH)
        return ProfileRecord(
            id=stable_id(self.cluster_id, "profile", start),
            cluster_id=self.cluster_id,
            started_at=min(t.since for t in taken),
            stopped_at=max(t.until for t in taken),
            samples=int(tree["count"]),
            tree=tree,
        )

    async def _worker_window(
        self, scheduler: Scheduler, address: str, start: float, last: bool
    ) -> Taken | None:
        """One worker's cycles not taken yet (None: none to take now); a worker first
        seen: its cycles stamped after ``start``."""
        rpc = scheduler.rpc(address)
        taken = self._taken.get(address)
        after, skip = taken if taken is not None else (start, False)
        # looking back from the last cycle taken finds a later cycle stamped before it
        cycle = _cycle()
        look_back = self._look_back.get(address, LOOK_BACK_CYCLES * cycle)
        look_from = start if taken is None else after - look_back
        *cycles, (now, _) = (await rpc.profile_metadata(start=look_from, stop=None))["counts"]
        stamps = [t for t, _ in cycles]  # the last, ``now``: the cycle under way
        # a stamp that jumped ahead by more than a cycle: the cycles after it may be
        # stamped before it by as much, so the next window looks back that far too
        jump = max((b - a for a, b in itertools.pairwise(stamps)), default=cycle) - cycle
        self._look_back[address] = max(jump, 0.0) + LOOK_BACK_CYCLES * cycle
        first = base = _first_not_taken(stamps, after)
        if skip and first < len(stamps):  # counted in part by the last window: its rest is lost
            first += 1
        cuts = _cuts(stamps)
        while not cuts[first]:
            # a cycle stamped before one taken already: Dask's bisection cannot find
            # it without those (HOLD_BACK makes this rare): left out, and counted
            self.samples_left_out += cycles[first][1]
            first += 1
        if first > base:  # the cycles passed over are done with, whatever comes next
            after, skip = stamps[first - 1], False
            self._taken[address] = (after, skip)
        # the first cycle taken began at the last stamp taken; a worker's first, one
        # cycle before its stamp
        head = stamps[first] if first < len(stamps) else now
        since = after if address in self._stamped else min(after, head - cycle)
        if last:
            if first == len(stamps):  # Dask answers nothing without a finished cycle
                self._taken[address] = (after, True)
                return None
            tree = await rpc.profile(start=min(stamps[first:]), stop=None)
            self._taken[address] = (stamps[-1], True)  # taken once it has come back
            self._stamped.add(address)
            return Taken(tree, min(since, min(stamps[first:])), now)
        # the window ends where Dask's bisection finds both its last cycle and the next
        # one exactly, HOLD_BACK cycles before the newest
        end = next(
            (e for e in range(len(stamps) - HOLD_BACK, first, -1) if cuts[e] and cuts[e - 1]),
            None,
        )
        if end is None:
            # known from here on: its cycles after ``after`` are taken by a later window
            self._taken[address] = (after, skip)
            return None
        tree = await rpc.profile(start=min(stamps[first:]), stop=min(stamps[end - 1 :]))
        self._taken[address] = (stamps[end - 1], False)  # taken once it has come back
        self._stamped.add(address)
        return Taken(tree, min(since, min(stamps[first:end])), max(stamps[first:end]))


def _first_not_taken(stamps: list[float], after: float) -> int:
    """Where the cycles after ``after`` begin: after the cycle stamped ``after`` (the
    last one taken), or, for a time that is no stamp, where every later stamp is newer."""
    with contextlib.suppress(ValueError):
        return stamps.index(after) + 1
    position = len(stamps)
    while position and stamps[position - 1] > after:
        position -= 1
    return position


def _cuts(stamps: list[float]) -> list[bool]:
    """For each position 0..len(stamps): whether every stamp before it is older than
    every stamp from it on. Dask finds the cycles to return by bisecting their stamps,
    which finds such a position exactly; a worker's stamps are in order unless its
    estimate of the scheduler's clock jumped (a heartbeat's round trip through an event
    loop that stalled for seconds), and then the positions among those out of order
    are no cuts."""
    newest_before = -math.inf
    oldest_from = [math.inf] * (len(stamps) + 1)
    for i in range(len(stamps) - 1, -1, -1):
        oldest_from[i] = min(stamps[i], oldest_from[i + 1])
    cuts = []
    for i in range(len(stamps) + 1):
        cuts.append(newest_before < oldest_from[i])
        if i < len(stamps):
            newest_before = max(newest_before, stamps[i])
    return cuts


class Taken(NamedTuple):
    """One worker's part of a window: its tree, and the time its cycles cover."""

    tree: dict[str, Any]
    since: float
    until: float


def _cycle() -> float:
    cycle = parse_timedelta(dask.config.get("distributed.worker.profile.cycle"), default="ms")
    return float(cycle or 1.0)
