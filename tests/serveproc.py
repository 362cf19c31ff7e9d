"""``daskscope serve`` as a real process for the browser-facing security tests."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx
import psutil

from conftest import free_port


@contextmanager
def serve(
    database: str, log: Path, *options: str, env: dict[str, str] | None = None
) -> Iterator[str]:
    """The server on 127.0.0.1 at a free port until the block ends; yields its base URL."""
    port = free_port()
    command = [sys.executable, "-m", "daskscope.cli.main", "--database", database]
    command += ["serve", "--host", "127.0.0.1", "--port", str(port), *options]
    with log.open("a") as out:
        process = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}
        )
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
        process.terminate()
        process.wait(timeout=20)


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
