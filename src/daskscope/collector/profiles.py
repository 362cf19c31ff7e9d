"""The workers' statistical profile, window after window, as profile records."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import distributed.profile
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


class ProfileWindows:
    """Asks the workers for their profile since the last window, and merges it.

    ``on_error(what, exc)`` hears of a failure of the last window taken in the
    background (:meth:`take_last`)."""

    def __init__(self, cluster_id: str, on_error: Callable[[str, BaseException], None]) -> None:
        self.cluster_id = cluster_id
        self.on_error = on_error
        #: where the next window starts
        self.since = 0.0
        #: the last window of workers about to leave, being taken
        self.last_words: asyncio.Future[None] | None = None

    async def collect_into(
        self, scheduler: Scheduler, add: Callable[[Record], None], timeout: float = TIMEOUT
    ) -> None:
        record = await self.collect(scheduler, timeout)
        if record is not None:
            add(record)

    def take_last(self, scheduler: Scheduler, add: Callable[[Record], None]) -> None:
        """Workers are about to leave: take their profile now, in the background, while
        they can still answer (unless it is being taken already)."""
        if self.last_words is None or self.last_words.done():
            self.last_words = asyncio.ensure_future(self._take_last(scheduler, add))

    async def _take_last(self, scheduler: Scheduler, add: Callable[[Record], None]) -> None:
        try:
            await self.collect_into(scheduler, add, LAST_TIMEOUT)
        except Exception as exc:
            self.on_error("profile", exc)

    async def last_taken(self, *, shield: bool = False) -> None:
        """Wait for the last window being taken, if any (``shield``: without cancelling
        it should this wait be cancelled)."""
        if self.last_words is not None:
            waited = asyncio.shield(self.last_words) if shield else self.last_words
            await asyncio.wait_for(waited, timeout=LAST_TIMEOUT + 1)

    async def collect(self, scheduler: Scheduler, timeout: float) -> ProfileRecord | None:
        """The workers' merged profile since the last window (None: nothing sampled).
        Each worker is asked on its own, with a timeout: a worker on its way out must
        not hold the others back."""
        start, stop = self.since, time()
        workers = list(scheduler.workers)
        if not workers or stop - start < 0.05:
            return None
        self.since = stop  # the next window starts here, whatever comes back

        async def one(address: str) -> Any:
            return await asyncio.wait_for(
                scheduler.rpc(address).profile(start=start, stop=stop), timeout
            )

        answers = await asyncio.gather(*map(one, workers), return_exceptions=True)
        trees = [t for t in answers if isinstance(t, dict)]
        tree = distributed.profile.merge(*trees) if trees else None
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
            started_at=start,
            stopped_at=stop,
            samples=int(tree["count"]),
            tree=tree,
        )
