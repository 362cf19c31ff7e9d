"""Connections of a real ``daskscope serve`` (issue 24, point 5): the file limit raised
above the connection cap, a cap full of unfinished request heads giving way to normal
requests, and no connection without a verified token or session kept past its
deadlines (web/connections.py)."""

from __future__ import annotations

import resource
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import psutil
import pytest

from daskscope.store import open_store
from daskscope.store.identity import add_user, create_account, create_token
from pgserver import free_port
from serveproc import launch, stop

DEADLINE_S = 120  # generous: a loaded 2-core machine, and nothing here is timed


@contextmanager
def serving(
    database: str,
    log: Path,
    *options: str,
    env: dict[str, str] | None = None,
    files: tuple[int, int] | None = None,
) -> Iterator[tuple[str, subprocess.Popen]]:
    """``daskscope serve`` started with ``files`` as its (soft, hard) open-file limits;
    yields its URL and process."""
    port = free_port()
    command = [sys.executable, "-m", "daskscope.cli.main", "--database", database]
    command += ["serve", "--host", "127.0.0.1", "--port", str(port), *options]

    def limit_files() -> None:
        if files is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, files)

    process = launch(command, log, env=env, before=limit_files)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + DEADLINE_S
        while True:
            try:
                if httpx.get(f"{url}/openapi.json", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert process.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, f"serve did not start: {log.read_text()}"
            time.sleep(0.1)
        yield url, process
    finally:
        stop(process)


def team(url: str, *accounts: str) -> list[str]:
    """One member in each of ``accounts`` of the store at ``url``; their tokens."""
    tokens = []
    with open_store(url) as store:
        for account in accounts:
            create_account(store, account)
            add_user(store, f"{account}-member", account=account)
            tokens.append(create_token(store, f"{account}-member"))
    return tokens


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'server.db'}"
    open_store(url).close()
    return url


def _address(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").split(":")
    return host, int(port)


def _closed_by_server(sock: socket.socket) -> bool:
    """Whether the server closed ``sock`` (what it sent before is read and dropped)."""
    sock.setblocking(False)
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return True
    except BlockingIOError:
        return False
    except OSError:
        return True  # reset
    finally:
        sock.setblocking(True)


def _head(sock: socket.socket) -> bytes:
    """The next response's status line and headers."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    return data.split(b"\r\n\r\n", 1)[0]


def _own_file_limit(at_least: int) -> None:
    """This process opens that many sockets: raise its own soft limit if need be."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < at_least:
        if hard != resource.RLIM_INFINITY and hard < at_least:
            pytest.skip(f"this test opens {at_least} sockets; the hard file limit is {hard}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (at_least, hard))


def test_serve_raises_its_file_limit_and_says_so(sqlite_url: str, tmp_path: Path) -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 4096:
        pytest.skip(f"the hard file limit here is {hard}; this test gives serve 4096")
    log = tmp_path / "serve.log"
    with serving(sqlite_url, log, files=(1024, 4096)) as (_, process):
        soft, hard = psutil.Process(process.pid).rlimit(resource.RLIMIT_NOFILE)
        said = log.read_text()
    assert (soft, hard) == (4096, 4096)
    assert "open files: at most 4096 a process, raised from 1024" in said
    assert "connections: at most 1000 a process" in said  # below the limit, as configured


def test_a_cap_full_of_unfinished_heads_gives_way_to_normal_requests(
    sqlite_url: str, tmp_path: Path
) -> None:
    (token,) = team(sqlite_url, "atlas")
    log = tmp_path / "serve.log"
    _own_file_limit(2048)
    # a file limit it cannot raise, and unfinished heads that would be kept for long
    env = {"DASK_DASKSCOPE__SERVE__HEADER_TIMEOUT": "600s"}
    with serving(sqlite_url, log, "--auth", env=env, files=(1024, 1024)) as (url, process):
        hanging = []
        for _ in range(1100):  # more than the cap
            s = socket.socket()
            s.settimeout(DEADLINE_S)
            try:
                s.connect(_address(url))
                s.sendall(b"GET /api/v1/clusters HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # no end
            except OSError:
                s.close()  # closed for a newer one already
                continue
            hanging.append(s)
        try:
            # each normal request, on a connection of its own, is answered at once: the
            # oldest unfinished head is closed to make room for it
            headers = {"Authorization": f"Bearer {token}"}
            for _ in range(5):
                with httpx.Client(timeout=DEADLINE_S, headers=headers) as client:
                    assert client.get(f"{url}/api/v1/clusters").status_code == 200
            open_now = psutil.Process(process.pid).num_fds()
        finally:
            for s in hanging:
                s.close()
    assert open_now < 1024
    said = log.read_text()
    assert "Too many open files" not in said, said[-3000:]
    assert "connections: at most 576 a process" in said  # 1024 - 64 - 3 * 128


def test_no_connection_without_a_token_outlives_its_deadlines(
    sqlite_url: str, tmp_path: Path
) -> None:
    (token,) = team(sqlite_url, "atlas")
    env = {
        "DASK_DASKSCOPE__SERVE__BODY_TIMEOUT": "2s",
        "DASK_DASKSCOPE__SERVE__HEADER_TIMEOUT": "2s",
    }
    with serving(sqlite_url, tmp_path / "serve.log", "--auth", env=env) as (url, _):
        address = _address(url)
        form = (
            "POST /logout HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: daskscope_csrf=any\r\n"
            "Content-Type: application/x-www-form-urlencoded\r\n"
        )
        # logouts whose body trickles in, a byte at a time
        trickling = []
        for _ in range(50):
            s = socket.create_connection(address, timeout=DEADLINE_S)
            s.sendall(f"{form}Content-Length: 1000\r\n\r\n".encode())
            trickling.append(s)
        closed: set[int] = set()
        deadline = time.monotonic() + DEADLINE_S
        while len(closed) < len(trickling) and time.monotonic() < deadline:
            for i, s in enumerate(trickling):
                if i in closed:
                    continue
                try:
                    s.sendall(b"x")
                except OSError:
                    closed.add(i)
                    continue
                if _closed_by_server(s):
                    closed.add(i)
            time.sleep(0.5)  # the trickle's pace, not a wait for the server
        for s in trickling:
            s.close()
        assert len(closed) == len(trickling), f"{len(trickling) - len(closed)} still open"

        # a whole request without a token: answered, and the connection closed
        with socket.create_connection(address, timeout=DEADLINE_S) as s:
            s.sendall(f"{form}Content-Length: 9\r\n\r\ncsrf=none".encode())
            head = _head(s)
            assert head.startswith(b"HTTP/1.1 403"), head
            assert b"connection: close" in head.lower(), head
            assert s.recv(65536) is not None  # the body, then the end
            deadline = time.monotonic() + DEADLINE_S
            while not _closed_by_server(s):
                assert time.monotonic() < deadline, "the server kept the connection"
                time.sleep(0.1)

        # with a token: kept alive for the next request, as before
        with httpx.Client(headers={"Authorization": f"Bearer {token}"}) as client:
            first = client.get(f"{url}/api/v1/clusters")
            second = client.get(f"{url}/api/v1/clusters")
        assert first.status_code == second.status_code == 200
        assert first.headers.get("connection") != "close"
