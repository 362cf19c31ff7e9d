"""The tests' throwaway PostgreSQL servers (tests/pgserver.py) end with the process that
made them, however it ends: a killed test run leaves no server behind (issue 27)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from pgserver import PG_BIN

TESTS = Path(__file__).parent

#: A process that makes and starts a server, says which, and waits to be killed
MAKER = f"""
import sys, time
sys.path.insert(0, {str(TESTS)!r})
from pgserver import PostgresServer
server = PostgresServer()
server.start()
print(server.postmaster_pid(), server.root, flush=True)
time.sleep(600)
"""


def _gone(process: psutil.Process) -> bool:
    try:
        # a zombie has ended: only its parent (init here) has yet to collect it
        return process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_a_server_ends_with_the_process_that_made_it(tmp_path: Path) -> None:
    if not (PG_BIN / "initdb").exists():
        pytest.skip(f"PostgreSQL server binaries not found in {PG_BIN}")
    errors = tmp_path / "maker.log"
    with errors.open("w") as log:
        maker = subprocess.Popen(
            [sys.executable, "-c", MAKER], stdout=subprocess.PIPE, stderr=log, text=True
        )
    try:
        assert maker.stdout is not None
        said = maker.stdout.readline().split()
        assert len(said) == 2, errors.read_text()
        postmaster, root = psutil.Process(int(said[0])), Path(said[1])
        assert postmaster.is_running() and (root / "data").is_dir()
    finally:
        os.kill(maker.pid, signal.SIGKILL)  # no teardown, no finally: as pytest killed
        maker.wait(30)
        if maker.stdout is not None:
            maker.stdout.close()
    deadline = time.monotonic() + 120  # seconds at most, a minute on a loaded machine
    while not (_gone(postmaster) and not root.exists()):
        assert time.monotonic() < deadline, f"server {postmaster.pid} still runs in {root}"
        time.sleep(0.2)
