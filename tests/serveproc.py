"""``daskscope serve`` as a real process for the browser-facing security tests."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

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
        deadline = time.monotonic() + 30
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
