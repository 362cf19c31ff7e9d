"""``daskscope serve`` as a real process for the browser-facing security tests, and
what every test that starts one uses so that none outlives its test: :func:`launch`
(the server ends with the test process, however that ends) and :func:`stop` (it and
its workers end, by force after a while)."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx
import psutil

from conftest import free_port

_PR_SET_PDEATHSIG = 1  # prctl(2)
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform == "linux" else None


def launch(
    command: list[str],
    log: Path,
    *,
    env: dict[str, str] | None = None,
    before: Callable[[], None] | None = None,
) -> subprocess.Popen:
    """``command`` in a process of its own, its output appended to ``log``, that gets
    SIGTERM when this (test) process ends, however it ends (Linux's parent-death
    signal: a killed pytest leaves no server behind; uvicorn's supervisor then stops
    its workers). Strictly, when the calling *thread* ends: call it from the test's
    own thread. ``before`` runs in the child too, before the command (rlimits)."""
    parent = os.getpid()

    def in_child() -> None:
        if _LIBC is not None:
            _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
            if os.getppid() != parent:  # the parent died before the line above
                os._exit(1)
        if before is not None:
            before()

    with log.open("a") as out:
        return subprocess.Popen(
            command,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
            preexec_fn=in_child,
        )


def stop(process: subprocess.Popen, timeout: float = 30) -> None:
    """End ``process`` and every process under it (``serve --workers``' workers): SIGTERM
    to it, then, after ``timeout``, SIGKILL to whatever of them is left. Returns once
    they are all gone (or ``timeout`` more has passed)."""
    family: list[psutil.Process] = []
    if process.poll() is None:
        try:
            root = psutil.Process(process.pid)
            family = [root, *root.children(recursive=True)]
        except psutil.Error:
            pass  # ended meanwhile
        process.terminate()
        with suppress(subprocess.TimeoutExpired):
            process.wait(timeout)
    for member in family:
        # most have ended by now; psutil checks first that each is still the same process
        with suppress(psutil.Error):
            member.kill()
    process.wait(timeout)
    psutil.wait_procs(family[1:], timeout=timeout)


@contextmanager
def serve(
    database: str, log: Path, *options: str, env: dict[str, str] | None = None
) -> Iterator[str]:
    """The server on 127.0.0.1 at a free port until the block ends; yields its base URL."""
    port = free_port()
    command = [sys.executable, "-m", "daskscope.cli.main", "--database", database]
    command += ["serve", "--host", "127.0.0.1", "--port", str(port), *options]
    process = launch(command, log, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120  # a start takes seconds quiet, a minute at load 50
        while True:
            try:
                if httpx.get(f"{base}/openapi.json", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"daskscope serve did not start: {log.read_text()[-2000:]}")
            time.sleep(0.1)
        yield base
    finally:
        stop(process)


def server_processes() -> list[psutil.Process]:
    """uvicorn's worker processes among this test's descendants (spawned by
    multiprocessing: ``spawn_main`` in their command line)."""
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if "spawn_main" in " ".join(child.cmdline()):
                found.append(child)
        except psutil.Error:
            pass  # gone meanwhile
    return found


def process_serving(client_port: int, server_port: int) -> int | None:
    """The pid of the server process holding the connection from ``client_port``."""
    for process in server_processes():
        try:
            connections = process.net_connections(kind="tcp")
        except psutil.Error:
            continue
        for c in connections:
            if c.laddr and c.raddr and (c.laddr.port, c.raddr.port) == (server_port, client_port):
                return process.pid
    return None


def connections_to_each_process(
    base: str, log: Path, per_process: int, token: str, **options: Any
) -> dict[int, list[httpx.Client]]:
    """Kept-alive connections, ``per_process`` to each of the two processes of ``serve
    --workers 2`` (httpx clients with ``options``). Each has made a request with
    ``token`` (a server with authentication closes a connection after its answer unless
    a request on it carried a verified token or session: web/connections.py) and read
    /login (so it holds the CSRF cookie). The kernel gives a new connection to whichever
    process accepts first: they are opened until both have theirs."""
    port = urlparse(base).port
    assert port is not None
    by_process: dict[int, list[httpx.Client]] = defaultdict(list)
    spare: list[httpx.Client] = []
    deadline = time.monotonic() + 120
    try:
        while len(by_process) < 2 or any(len(c) < per_process for c in by_process.values()):
            assert time.monotonic() < deadline, (
                f"connections reached only {dict((k, len(v)) for k, v in by_process.items())}: "
                + log.read_text()[-2000:]
            )
            client = httpx.Client(base_url=base, timeout=60, **options)
            spare.append(client)
            ports = set()
            for response in (
                client.get("/api/v1/clusters", headers={"authorization": f"Bearer {token}"}),
                client.get("/login"),
            ):
                assert response.status_code == 200, response.text
                ports.add(response.extensions["network_stream"].get_extra_info("client_addr")[1])
            if len(ports) != 1:
                continue  # not kept alive after all
            pid = process_serving(ports.pop(), port)
            if pid is not None and len(by_process[pid]) < per_process:
                by_process[pid].append(spare.pop())
    finally:
        for client in spare:
            client.close()
    return dict(by_process)
