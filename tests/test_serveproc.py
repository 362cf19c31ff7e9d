"""``daskscope serve`` processes started by tests (tests/serveproc.py) end with the test
process, however it ends: a killed test run leaves no server behind (issue 27)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

TESTS = Path(__file__).parent

#: A process that starts a server, says which, and waits to be killed
STARTER = """
import sys, time
from pathlib import Path
sys.path.insert(0, {tests!r})
from serveproc import launch
command = [sys.executable, "-m", "daskscope.cli.main", "--database", {url!r}, "serve",
           "--host", "127.0.0.1", "--port", "0"]
print(launch(command, Path({log!r})).pid, flush=True)
time.sleep(600)
"""


def test_a_server_ends_with_the_process_that_started_it(tmp_path: Path) -> None:
    code = STARTER.format(
        tests=str(TESTS), url=f"sqlite:///{tmp_path / 'store.db'}", log=str(tmp_path / "log")
    )
    starter = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert starter.stdout is not None
        server = psutil.Process(int(starter.stdout.readline()))
        assert server.is_running()
    finally:
        os.kill(starter.pid, signal.SIGKILL)  # no teardown, no finally: as pytest killed
        starter.wait(30)
        if starter.stdout is not None:
            starter.stdout.close()
    deadline = time.monotonic() + 120  # a second or less, more on a loaded machine
    while True:
        try:
            if server.status() == psutil.STATUS_ZOMBIE:  # ended; init collects it
                break
        except psutil.NoSuchProcess:
            break
        assert time.monotonic() < deadline, f"server {server.pid} still runs"
        time.sleep(0.2)
