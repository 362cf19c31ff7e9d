"""Bounded resources (issue 10, point 8) and concurrent upserts (point 7), against real
``daskscope serve`` processes: half-open connections, bodies refused before they are
read, ingest batches waiting without their bodies, report quotas, 30 overlapping
batches on PostgreSQL."""

from __future__ import annotations

import concurrent.futures
import json
import random
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

from daskscope.store import open_store, table_counts
from daskscope.store.identity import add_user, create_account, create_token
from daskscope.wire import encode_batch
from pgserver import free_port
from serveproc import launch, stop
from test_ingest import group

FD_LIMIT = 1024  # a common default; the server inherits it from the shell


@contextmanager
def serving(
    database: str, tmp_path: Path, *options: str, env: dict[str, str] | None = None
) -> Iterator[tuple[str, subprocess.Popen]]:
    """``daskscope serve`` limited to FD_LIMIT open files; yields its URL and process."""
    port = free_port()
    command = [sys.executable, "-m", "daskscope.cli.main", "--database", database]
    command += ["serve", "--host", "127.0.0.1", "--port", str(port), *options]

    def limit_files() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (FD_LIMIT, FD_LIMIT))

    process = launch(command, tmp_path / "server.log", env=env, before=limit_files)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{url}/openapi.json", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert process.poll() is None and time.monotonic() < deadline, "serve did not start"
            time.sleep(0.1)
        yield url, process
    finally:
        stop(process)


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'server.db'}"
    open_store(url).close()
    return url


def test_half_open_connections_do_not_hang_the_server(sqlite_url: str, tmp_path: Path) -> None:
    env = {"DASK_DASKSCOPE__SERVE__HEADER_TIMEOUT": "2s"}
    with serving(sqlite_url, tmp_path, env=env) as (url, _):
        port = int(url.rsplit(":", 1)[1])
        idle = []
        for _ in range(1100):  # more than the server may open
            s = socket.socket()
            s.settimeout(10)
            try:
                s.connect(("127.0.0.1", port))
                s.sendall(b"GET /api/v1/clusters HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # no end
            except OSError:
                s.close()
                continue
            idle.append(s)
        try:
            # a normal request is answered while they hang on (retried: the server may
            # first be closing connections past its cap, or past their deadline)
            answered = None
            for _ in range(30):
                try:
                    answered = httpx.get(f"{url}/api/v1/clusters", timeout=5)
                    break
                except httpx.HTTPError:
                    time.sleep(0.5)  # refused at once while the cap is being enforced
            assert answered is not None and answered.status_code == 200
            # and each half-open connection was closed by the server
            closed = 0
            for s in idle:
                try:
                    closed += s.recv(1) == b""
                except OSError:
                    closed += 1
            assert closed == len(idle)
        finally:
            for s in idle:
                s.close()


def _raw_post(url: str, path: str, head: str, body: bytes) -> bytes:
    """Send a request head and as much of ``body`` as the server reads; its answer."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=20) as s:
        s.sendall(f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\n{head}\r\n".encode())
        try:
            for start in range(0, len(body), 65536):
                s.sendall(body[start : start + 65536])
        except OSError:
            pass  # the server answered and closed: what we want
        answer = b""
        while b"\r\n\r\n" not in answer:
            data = s.recv(65536)
            if not data:
                break
            answer += data
        return answer


def test_bodies_are_refused_before_they_are_read(sqlite_url: str, tmp_path: Path) -> None:
    with serving(sqlite_url, tmp_path, "--auth") as (url, _):
        # a declared GiB: refused on the headers, nothing of it sent
        head = "Content-Type: multipart/form-data; boundary=x\r\nContent-Length: 1073741824\r\n"
        answer = _raw_post(url, "/login", head, b"")
        assert answer.startswith(b"HTTP/1.1 413"), answer[:300]
        # streamed without a length: cut off once it passes the limit (64 KiB), long
        # before the 8 MiB this client would send
        chunk = b"--x\r\n" + b"a" * 65536
        body = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(128))
        head = "Content-Type: multipart/form-data; boundary=x\r\nTransfer-Encoding: chunked\r\n"
        # past the CSRF check, which answers on the headers alone, to the form reader
        head += f"Cookie: daskscope_csrf=check\r\nOrigin: {url}\r\n"
        answer = _raw_post(url, "/login", head, body)
        assert answer.startswith(b"HTTP/1.1 413"), answer[:300]
        assert b"max-request-bytes" in answer or b"64" in answer


def _big_refused_batch(mib: int) -> bytes:
    """About ``mib`` MiB of records that decode and are then refused (wrong version):
    the server reads and parses the body, and writes nothing."""
    text = "x" * (2**20)
    records = [
        {"kind": "event", "data": {"id": f"e{i}", "cluster_id": "c", "at": 1.8e9,
                                   "kind": "note", "detail": {"text": text}}}
        for i in range(mib)
    ]  # fmt: skip
    return json.dumps({"records": records, "version": 7}).encode()


def _peak_rss_during(process: subprocess.Popen, work: concurrent.futures.Future) -> int:
    peak, proc = 0, psutil.Process(process.pid)
    while not work.done():
        peak = max(peak, proc.memory_info().rss)
        time.sleep(0.01)
    return peak


def test_ingest_batches_wait_for_a_slot_before_their_body_is_read(
    sqlite_url: str, tmp_path: Path
) -> None:
    body = _big_refused_batch(31)
    with serving(sqlite_url, tmp_path) as (url, process):
        baseline = psutil.Process(process.pid).memory_info().rss

        def one() -> int:
            headers = {"content-type": "application/json"}
            return httpx.post(f"{url}/api/v1/ingest", content=body, headers=headers, timeout=300)

        with concurrent.futures.ThreadPoolExecutor(20) as pool:
            all_done = pool.submit(
                lambda: [r.status_code for r in pool.map(lambda _: one(), range(20))]
            )
            peak = _peak_rss_during(process, all_done)
            statuses = all_done.result()
    assert statuses == [422] * 20
    grown = (peak - baseline) / 2**20
    print(f"\n20 concurrent 31 MiB batches: server RSS {baseline / 2**20:.0f} MiB at rest, "
          f"peak {peak / 2**20:.0f} MiB (+{grown:.0f} MiB)")  # fmt: skip
    # three slots: at most a few bodies in memory at once, not twenty (620 MiB of bytes)
    assert grown < 20 * 31 / 2


def test_report_uploads_have_a_quota_per_account(sqlite_url: str, tmp_path: Path) -> None:
    with open_store(sqlite_url) as store:
        create_account(store, "atlas")
        add_user(store, "ana", account="atlas")
        token = create_token(store, "ana")
    env = {
        "DASK_DASKSCOPE__MAX_REPORT_BYTES_PER_ACCOUNT": "3000",
        "DASK_DASKSCOPE__REPORTS_DIR": str(tmp_path / "reports"),
    }
    with serving(sqlite_url, tmp_path, "--auth", env=env) as (url, _):
        headers = {"Authorization": f"Bearer {token}"}
        # shaped as distributed.performance_report writes (uploads must look like one)
        report = (
            b'<html><head><title>Dask Performance Report</title><script type="application/json">'
            + b"r" * 1000
            + b"</script></head></html>"
        )
        statuses = []
        for i in range(3):
            files = {"file": (f"r{i}.html", report, "text/html")}
            response = httpx.post(f"{url}/api/v1/reports", files=files, headers=headers, timeout=60)
            statuses.append(response.status_code)
    assert statuses == [201, 201, 413], response.text
    assert "max-report-bytes-per-account" in response.json()["error"]["message"]


def test_thirty_overlapping_batches_on_postgresql_all_stored(
    postgres_url: str, tmp_path: Path
) -> None:
    from conftest import _admin

    server_url = postgres_url.rsplit("/", 1)[0]
    _admin(server_url, "CREATE DATABASE overlap")
    database = f"{server_url}/overlap"
    open_store(database).close()
    groups = [group(i) for i in range(400)]
    batches = []
    rng = random.Random(10)
    for _ in range(30):
        chosen = rng.sample(groups, 300)  # overlapping, each in its own order
        batches.append(encode_batch(chosen))
    env = {"DASK_DASKSCOPE__INGEST__CONCURRENCY": "6"}
    with serving(database, tmp_path, env=env) as (url, _):
        headers = {"content-type": "application/json"}
        with concurrent.futures.ThreadPoolExecutor(30) as pool:
            responses = list(
                pool.map(
                    lambda b: httpx.post(
                        f"{url}/api/v1/ingest", content=b, headers=headers, timeout=120
                    ),
                    batches,
                )
            )
    assert [r.status_code for r in responses] == [200] * 30, [r.text for r in responses]
    with open_store(database) as store:
        assert table_counts(store)["task_groups"] == 400
