"""Who may send ingest bodies, and for how long (issue 24, point 3): slow bodies of one
account leave another's batches answered, a body that trickles in is answered 408, an
unauthenticated request holds nothing (web/admission.py, web/limits.py); and the fair
gate itself, on its own."""

from __future__ import annotations

import asyncio
import select
import socket
import time
from pathlib import Path

import httpx

from daskscope.web.admission import FairGate, GateFull
from daskscope.wire import encode_batch
from factories import make_cluster
from test_connections import DEADLINE_S, _address, _closed_by_server, _head, serving, team
from test_ingest import group


def _batch(groups: int) -> bytes:
    """A valid batch: a cluster and ``groups`` of its task groups."""
    return encode_batch([make_cluster("c", id="c"), *(group(i) for i in range(groups))])


def _ingest_head(url: str, token: str | None, length: int) -> bytes:
    host, port = _address(url)
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    return (
        f"POST /api/v1/ingest HTTP/1.1\r\nHost: {host}:{port}\r\n{auth}"
        f"Content-Type: application/json\r\nContent-Length: {length}\r\n"
        # uvicorn answers 100 Continue when the route starts reading the body: past
        # authentication and admission, which is what this test waits for
        "Expect: 100-continue\r\n\r\n"
    ).encode()


def test_slow_bodies_of_one_account_leave_another_accounts_ingest_answered(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'server.db'}"
    token_a, token_b = team(url, "atlas", "cms")
    # bodies may be slow for as long as this test lasts: nothing here waits for them to
    # time out
    env = {"DASK_DASKSCOPE__SERVE__BODY_TIMEOUT": "600s"}
    with serving(url, tmp_path / "serve.log", "--auth", env=env) as (base, _):
        address = _address(base)
        slow, refused = [], []
        try:
            # account A: six batches of 10 MiB whose bodies come a byte at a time
            for _ in range(6):
                s = socket.create_connection(address, timeout=DEADLINE_S)
                s.sendall(_ingest_head(base, token_a, 10 * 2**20))
                slow.append(s)
            # and three without a token
            for _ in range(3):
                s = socket.create_connection(address, timeout=DEADLINE_S)
                s.sendall(_ingest_head(base, None, 10 * 2**20))
                refused.append(s)
            # Wait until three of A's are being read (as many as the three slots the
            # server had before; A's half of the body memory holds three of 10 MiB)
            reading = _being_read(slow, 3)
            for s in reading:
                s.sendall(b"{")
            # the unauthenticated ones were refused on their headers, without a read
            for s in refused:
                head = _head(s)
                assert head.startswith(b"HTTP/1.1 401"), head
            # account B's batch is stored, while A's bodies still trickle
            batch = _batch(20)
            headers = {"Authorization": f"Bearer {token_b}", "content-type": "application/json"}
            answer = httpx.post(
                f"{base}/api/v1/ingest", content=batch, headers=headers, timeout=DEADLINE_S
            )
            assert answer.status_code == 200, answer.text
            assert answer.json()["records"] == 21
            for s in reading:
                s.sendall(b" ")
                assert not _closed_by_server(s)  # still being read: B did not wait for them
        finally:
            for s in slow + refused:
                s.close()


def test_a_body_that_trickles_in_is_answered_408(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'server.db'}"
    (token,) = team(url, "atlas")
    env = {"DASK_DASKSCOPE__SERVE__BODY_TIMEOUT": "1s"}
    with serving(url, tmp_path / "serve.log", "--auth", env=env) as (base, _):
        with socket.create_connection(_address(base), timeout=DEADLINE_S) as s:
            s.sendall(_ingest_head(base, token, 1000))
            assert _head(s).startswith(b"HTTP/1.1 100")
            deadline = time.monotonic() + DEADLINE_S
            while not _closed_by_server_or_answered(s):
                assert time.monotonic() < deadline, "a trickling body was waited for"
                try:
                    s.sendall(b" ")
                except OSError:
                    break
                time.sleep(0.2)  # the trickle's pace
            head = _head(s)
        assert head.startswith(b"HTTP/1.1 408"), head  # the collector retries 408
        assert b"body-timeout" in head or b"connection: close" in head.lower()
        # and the server takes the next batch
        batch = _batch(5)
        headers = {"Authorization": f"Bearer {token}", "content-type": "application/json"}
        answer = httpx.post(f"{base}/api/v1/ingest", content=batch, headers=headers, timeout=60)
        assert answer.status_code == 200, answer.text


def _being_read(sockets: list[socket.socket], count: int) -> list[socket.socket]:
    """The first ``count`` of ``sockets`` whose request the server answered 100 Continue
    (whichever they are: the server takes them in no set order)."""
    reading: list[socket.socket] = []
    deadline = time.monotonic() + DEADLINE_S
    while len(reading) < count:
        waiting = [s for s in sockets if s not in reading]
        ready, _, _ = select.select(waiting, [], [], max(0.0, deadline - time.monotonic()))
        assert ready, f"only {len(reading)} of {count} bodies are being read"
        for s in ready:
            head = _head(s)
            assert head.startswith(b"HTTP/1.1 100"), head
            reading.append(s)
    return reading[:count]


def _closed_by_server_or_answered(sock: socket.socket) -> bool:
    """Whether the server has sent something (an answer) or closed: peeks, reads nothing."""
    ready, _, _ = select.select([sock], [], [], 0)
    return bool(ready)


# The gate on its own


def _grants(gate: FairGate, requests: list[tuple[str, int]], hold: int) -> list[int]:
    """The order in which ``requests`` (account, weight), all waiting at once behind a
    holder of weight ``hold``, are granted; each is released as soon as it is granted."""
    order: list[int] = []

    async def main() -> None:
        release = asyncio.Event()

        async def first() -> None:
            async with gate.hold("holder", hold):
                await release.wait()

        async def one(i: int, account: str, weight: int) -> None:
            async with gate.hold(account, weight):
                order.append(i)
                await asyncio.sleep(0)

        holder = asyncio.create_task(first())
        await asyncio.sleep(0)
        tasks = [asyncio.create_task(one(i, *r)) for i, r in enumerate(requests)]
        await asyncio.sleep(0)
        release.set()
        await asyncio.gather(holder, *tasks)

    asyncio.run(main())
    return order


def test_waiting_accounts_take_turns() -> None:
    gate = FairGate(10, slots=1)
    requests = [("a", 1)] * 4 + [("b", 1)] * 2 + [("c", 1)]
    # a, b and c in turn, though a came first with four
    assert _grants(gate, requests, 1) == [0, 4, 6, 1, 5, 2, 3]


def test_an_account_holds_at_most_its_share() -> None:
    async def main() -> list[str]:
        gate = FairGate(100, share=50)
        got: list[str] = []
        release = asyncio.Event()

        async def one(account: str, weight: int) -> None:
            async with gate.hold(account, weight):
                got.append(account)
                await release.wait()

        tasks = [asyncio.create_task(one("a", 30)) for _ in range(3)]
        tasks.append(asyncio.create_task(one("b", 30)))
        for _ in range(5):
            await asyncio.sleep(0)
        held = list(got)
        release.set()
        await asyncio.gather(*tasks)
        return held

    # a's second would pass its half; b goes ahead of it
    assert asyncio.run(main()) == ["a", "b"]


def test_a_large_batch_is_not_starved_by_small_ones() -> None:
    gate = FairGate(10, slots=3)
    # the large one (index 0) waits for the holder to leave; the small ones queued after
    # it wait with it rather than overtake it for ever
    assert _grants(gate, [("a", 10), ("b", 1), ("c", 1)], 5)[0] == 0


def test_a_waiter_that_gives_up_frees_its_turn() -> None:
    async def main() -> bool:
        gate = FairGate(10, slots=1)
        release = asyncio.Event()

        async def holder() -> None:
            async with gate.hold("a", 1):
                await release.wait()

        async def wait(account: str) -> None:
            async with gate.hold(account, 1):
                pass

        first = asyncio.create_task(holder())
        await asyncio.sleep(0)
        quitter = asyncio.create_task(wait("b"))
        patient = asyncio.create_task(wait("c"))
        await asyncio.sleep(0)
        quitter.cancel()
        release.set()
        await asyncio.gather(first, patient)
        return gate.used == 0 and gate.count == 0 and not gate.queues

    assert asyncio.run(main())


def test_an_account_with_too_many_waiting_is_told_to_come_back() -> None:
    async def main() -> str:
        gate = FairGate(1, slots=1, max_waiting=2)
        release = asyncio.Event()

        async def one(account: str) -> None:
            async with gate.hold(account, 1):
                await release.wait()

        tasks = [asyncio.create_task(one("a")) for _ in range(3)]  # one holds, two wait
        await asyncio.sleep(0)
        try:
            async with gate.hold("a", 1):
                return "let in"
        except GateFull:
            return "refused"
        finally:
            release.set()
            await asyncio.gather(*tasks)

    assert asyncio.run(main()) == "refused"
