"""Which ingest batches a server takes now: fairly between accounts, within a memory
budget.

A batch passes two gates, both after its token was verified (a request without one is
answered 401 on its headers: web/auth.py), so an unauthenticated connection never holds
either:

- **receive**: from before its body is read until its write is done, a batch holds its
  declared length (``Content-Length``; without one, the largest batch; at least 1 MiB)
  of ``ingest.body-memory`` (default twice ``ingest.max-batch-bytes``). One account
  holds at most half of it: whatever one account sends, slowly or in bulk, the other
  half is there for the others. A body that must trickle in holds only this, and only
  until its deadline (web/limits.py: 408). At most :data:`MAX_WAITING` of an account's
  batches wait here; more are answered 429 at once (collectors keep and resend them).
- **decode**: at most ``ingest.concurrency`` batches are decoded and written at once, and
  their bodies together are at most ``ingest.max-batch-bytes``: decoding a body into
  records and rows costs several times its size (a 31 MiB batch: about 170 MiB more, on
  PostgreSQL; docs/benchmarks.md), so large batches go one at a time. Only complete
  bodies get here: no slow sender holds it.

A gate's waiters hold only their connection. Accounts waiting take turns (round robin),
each account's batches in the order they came; a batch too large for what is free keeps
its turn, so small batches do not starve it. One larger than a whole gate goes alone.

Memory given back: when decoding falls idle after large batches, glibc is asked to
return free pages to the system (``malloc_trim``), and ``serve`` gives its processes two
malloc arenas instead of eight a core, and maps blocks of 1 MiB and more on their own
(:func:`bound_allocator`). Measured in docs/benchmarks.md ("Ingest memory").
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import functools
import os
from collections import deque
from collections.abc import AsyncIterator, Hashable
from dataclasses import dataclass, field

from dask.utils import parse_bytes
from starlette.datastructures import Headers

from daskscope import config
from daskscope.web.errors import HTTPError

__all__ = [
    "Admission",
    "FairGate",
    "GateFull",
    "bound_allocator",
    "declared_length",
    "release_memory",
]

#: The least a body holds of the receive gate: it bounds how many bodies one account
#: can have coming at once (32 at the default limits), each a connection held
MIN_WEIGHT = 2**20
#: Batches of one account that may wait for the receive gate; more are answered 429 at
#: once (collectors keep them and retry): waiting requests hold connections too
MAX_WAITING = 64
#: Bytes decoded since the last trim worth trimming for (a trim walks the heap: ms)
TRIM_AFTER_BYTES = 4 * 2**20
#: The title of the 429 that refuses a batch past MAX_WAITING
BUSY = "Too many batches waiting"


class GateFull(Exception):
    """Too many of an account's batches already wait."""


@dataclass(eq=False)
class _Waiter:
    account: Hashable
    weight: int
    future: asyncio.Future[None] | None = field(default=None)


class FairGate:
    """Holders of a shared budget: at most ``slots`` of them (None: any number), their
    weights summing to at most ``capacity`` (one heavier waits until the gate is empty
    and then goes alone), each account's at most ``share`` (None: no per-account cap; an
    account holding nothing may always take one), waiting accounts in turn, at most
    ``max_waiting`` of an account's waiting (more raise :class:`GateFull`)."""

    def __init__(
        self,
        capacity: int,
        *,
        slots: int | None = None,
        share: int | None = None,
        max_waiting: int | None = None,
    ):
        self.capacity = max(1, capacity)
        self.slots = slots
        self.share = share
        self.max_waiting = max_waiting
        self.used = 0
        self.count = 0
        self.held: dict[Hashable, int] = {}
        # accounts with waiters, in turn order: one served goes to the end
        self.queues: dict[Hashable, deque[_Waiter]] = {}

    @contextlib.asynccontextmanager
    async def hold(self, account: Hashable, weight: int) -> AsyncIterator[None]:
        waiter = _Waiter(account, max(0, weight))
        if not self.queues and self._fits(waiter) == "yes":
            self._take(waiter)  # nobody waits: no future, no turn
        else:
            queue = self.queues.get(account, ())
            if self.max_waiting is not None and len(queue) >= self.max_waiting:
                raise GateFull(f"{len(queue)} batches of this account wait already")
            waiter.future = asyncio.get_running_loop().create_future()
            self.queues.setdefault(account, deque()).append(waiter)
            self._dispatch()
            try:
                await waiter.future
            except BaseException:
                if waiter.future.done() and not waiter.future.cancelled():
                    self._release(waiter)  # granted just as it was given up
                else:
                    self._forget(waiter)
                raise
        try:
            yield
        finally:
            self._release(waiter)

    def _fits(self, waiter: _Waiter) -> str:
        """'yes'; 'account': its own account's share is full; 'gate': the gate is."""
        if self.slots is not None and self.count >= self.slots:
            return "gate"
        if self.used and self.used + waiter.weight > self.capacity:
            return "gate"
        if self.share is not None:
            mine = self.held.get(waiter.account, 0)
            if mine and mine + waiter.weight > self.share:
                return "account"
        return "yes"

    def _take(self, waiter: _Waiter) -> None:
        self.used += waiter.weight
        self.count += 1
        self.held[waiter.account] = self.held.get(waiter.account, 0) + waiter.weight

    def _release(self, waiter: _Waiter) -> None:
        self.used -= waiter.weight
        self.count -= 1
        left = self.held[waiter.account] - waiter.weight
        if left:
            self.held[waiter.account] = left
        else:
            del self.held[waiter.account]
        self._dispatch()

    def _forget(self, waiter: _Waiter) -> None:
        queue = self.queues.get(waiter.account)
        if queue is not None and waiter in queue:
            queue.remove(waiter)
            if not queue:
                del self.queues[waiter.account]
        self._dispatch()  # it may have been what others waited behind

    def _dispatch(self) -> None:
        """Grant waiters in turn while they fit. An account whose own share is full lets
        the next go first; one that waits for the gate keeps its turn, and everyone waits
        with it (no batch waits for ever behind a stream of smaller ones)."""
        granted = True
        while granted and self.queues:
            granted = False
            for account, queue in list(self.queues.items()):
                waiter = queue[0]
                fit = self._fits(waiter)
                if fit == "account":
                    continue
                if fit == "gate":
                    return
                queue.popleft()
                del self.queues[account]
                if queue:
                    self.queues[account] = queue  # to the end: the others' turn first
                self._take(waiter)
                assert waiter.future is not None
                if not waiter.future.done():
                    waiter.future.set_result(None)
                granted = True
                break


class Admission:
    """The two gates of ingest (see the module docstring), from the config."""

    def __init__(self, *, per_account: bool) -> None:
        batch = max_batch_bytes()
        memory = config.get("ingest.body-memory")
        budget = _bytes(memory) if memory is not None else 2 * batch
        self.receive = FairGate(
            budget, share=budget // 2 if per_account else None, max_waiting=MAX_WAITING
        )
        slots = max(1, int(config.get("ingest.concurrency")))
        self.decode = FairGate(batch, slots=slots)
        self._decoded = 0

    @contextlib.asynccontextmanager
    async def receiving(self, account: Hashable, length: int) -> AsyncIterator[None]:
        """Hold the receive gate for a body of ``length`` bytes, until the block ends."""
        try:
            async with self.receive.hold(account, max(MIN_WEIGHT, length)):
                yield
        except GateFull as exc:  # raised on entering: nothing else raises it
            raise HTTPError(429, f"{exc}: send this one again later", title=BUSY) from None

    @contextlib.asynccontextmanager
    async def decoding(self, account: Hashable, length: int) -> AsyncIterator[None]:
        """Hold a decode slot for a complete body of ``length`` bytes."""
        try:
            async with self.decode.hold(account, length):
                yield
        finally:
            self._decoded += length
            if self.decode.count == 0 and self._decoded >= TRIM_AFTER_BYTES:
                self._decoded = 0
                # off the event loop, and nobody waits for it
                asyncio.get_running_loop().run_in_executor(None, release_memory)


def max_batch_bytes() -> int:
    return int(config.get("ingest.max-batch-bytes"))


def _bytes(value: object) -> int:
    return int(parse_bytes(value if isinstance(value, str) else str(value)))


def declared_length(headers: Headers, limit: int) -> int:
    """A request's ``Content-Length`` when it declares one (BodyLimit refused any past
    ``limit``), else ``limit``: a chunked body may grow to it."""
    length = headers.get("content-length", "")
    return min(int(length), limit) if length.isdigit() else limit


@functools.cache
def _glibc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
        if libc is not None:
            libc.malloc_trim.argtypes, libc.malloc_trim.restype = [ctypes.c_size_t], ctypes.c_int
            libc.mallopt.argtypes, libc.mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to ask
        return None
    return libc


#: glibc's mallopt parameters: the number of malloc arenas, and the size from which a
#: block is mapped on its own (given back whole when freed)
_M_ARENA_MAX, _M_MMAP_THRESHOLD = -8, -3
#: Arenas a server process's allocator may have (glibc's default: 8 a core)
MALLOC_ARENAS = 2
#: Blocks this large or larger are mapped on their own. glibc's default starts at
#: 128 KiB but rises to the largest block freed, up to 32 MiB: after one batch, bodies
#: and the store's JSON documents were carved from the heap and left holes in it.
MMAP_THRESHOLD = 2**20


def bound_allocator() -> None:
    """Few malloc arenas, and large blocks mapped on their own, for this process and the
    worker processes it starts (glibc only; set ``MALLOC_ARENA_MAX`` or
    ``MALLOC_MMAP_THRESHOLD_`` yourself to choose otherwise). Each thread that decodes a
    batch otherwise gets an arena of its own, and what was freed in it stays with the
    process: six 31 MiB batches left 150 MiB held even after a trim, 50 to 70 MiB with
    one or two arenas; with both settings the peaks of docs/benchmarks.md fell by 30 to
    70 MiB more."""
    libc = _glibc()
    for variable, parameter, value in (
        ("MALLOC_ARENA_MAX", _M_ARENA_MAX, MALLOC_ARENAS),
        ("MALLOC_MMAP_THRESHOLD_", _M_MMAP_THRESHOLD, MMAP_THRESHOLD),
    ):
        if variable in os.environ:
            continue
        os.environ[variable] = str(value)  # read by each new process at its start
        if libc is not None:
            libc.mallopt(parameter, value)  # this one has started already


def release_memory() -> None:
    """Give the C heap's free pages back to the system where the allocator can (glibc).
    Decoding runs on worker threads, each with its own malloc arena; freed memory stays
    in them otherwise."""
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)
