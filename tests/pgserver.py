"""A throwaway PostgreSQL server in a temporary directory, for tests and benchmarks.

The server binaries come from Debian's postgresql package; as root, initdb and pg_ctl run
as the postgres user (initdb refuses root).

A server ends with the process that made it, however that process ends (a failed test,
pytest killed): pg_ctl detaches the server, and PostgreSQL has no parent-death option,
so a small watcher process holds the read end of a pipe whose write end only the maker
holds. The kernel closes that end when the maker dies; the watcher then stops the server
and removes its directory (:data:`_WATCHER`).
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

PG_BIN = Path(os.environ.get("DASKSCOPE_PG_BIN", "/usr/lib/postgresql/15/bin"))


#: Ports the tests' servers listen on: below Linux's ephemeral range (32768-60999), which
#: the kernel hands out for port 0 (Dask's clusters in parallel tests) and outgoing
#: connections; a port taken from that range could be handed out again before the server
#: bound it ("address already in use", one CI run of test_limits, 2026-11-26).
_PORTS = range(20000, 32000)


def free_port() -> int:
    """A port nothing listens on now, outside the ephemeral range."""
    for _ in range(200):
        port = random.choice(_PORTS)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {_PORTS}")


#: The watcher: waits for the end of the pipe (its maker closed it, or died), then stops
#: the server if it still runs and removes its directory. Its own session: a Ctrl-C to
#: pytest's process group does not end it before it has done its work.
_WATCHER = """
import os, shutil, subprocess, sys
fd, root, stop = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
while os.read(fd, 1):
    pass
if os.path.exists(os.path.join(root, "data", "postmaster.pid")):
    subprocess.run(stop, capture_output=True)
shutil.rmtree(root, ignore_errors=True)
"""


def _as_postgres(*args: str | os.PathLike) -> list[str]:
    # initdb refuses to run as root: drop to the postgres OS user when we are root.
    cmd = [str(a) for a in args]
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


class PostgresServer:
    """A throwaway PostgreSQL server in a temporary directory; tests may stop and start it.
    It is stopped and removed when the process that made it ends, unless ``detached``
    (``bench/postgres.py start``, whose server outlives it)."""

    def __init__(self, *, detached: bool = False) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="daskscope-pg-"))
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres", "postgres")
        self.data, self.port = self.root / "data", free_port()
        self._watcher: subprocess.Popen | None = None
        self._lifeline: int | None = None
        if not detached:
            self._watch()
        self.url = f"postgresql+psycopg://postgres@127.0.0.1:{self.port}"
        subprocess.run(
            _as_postgres(PG_BIN / "initdb", "-D", self.data, "-U", "postgres", "-A", "trust",
                         "-E", "UTF8", "--locale=C", "--no-sync"),
            check=True, capture_output=True,
        )  # fmt: skip

    def start(self) -> None:
        options = f"-k {self.root} -h 127.0.0.1 -p {self.port} -c fsync=off -c full_page_writes=off"
        try:
            subprocess.run(
                _as_postgres(PG_BIN / "pg_ctl", "-D", self.data, "-o", options, "-l",
                             self.root / "log", "-w", "-t", "30", "start"),
                check=True, capture_output=True,
            )  # fmt: skip
        except subprocess.CalledProcessError as exc:
            log = (self.root / "log").read_text() if (self.root / "log").exists() else ""
            raise RuntimeError(f"could not start PostgreSQL: {exc.stderr.decode()}\n{log}") from exc

    def _watch(self) -> None:
        """Start the watcher (:data:`_WATCHER`) that ends the server with this process."""
        read, write = os.pipe()  # neither end inherited by what this process runs later
        stop = _as_postgres(PG_BIN / "pg_ctl", "-D", self.data, "-m", "immediate", "-w", "stop")
        try:
            self._watcher = subprocess.Popen(
                [sys.executable, "-I", "-c", _WATCHER, str(read), str(self.root), *stop],
                pass_fds=(read,),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        except BaseException:
            os.close(write)
            raise
        finally:
            os.close(read)
        self._lifeline = write

    def postmaster_pid(self) -> int:
        return int((self.data / "postmaster.pid").read_text().split()[0])

    def stop(self) -> None:
        """Stop at once, as a crash would (no clean shutdown)."""
        subprocess.run(
            _as_postgres(PG_BIN / "pg_ctl", "-D", self.data, "-m", "immediate", "-w", "stop"),
            capture_output=True,
        )

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)
        # the watcher finds nothing left to do, and ends
        lifeline, watcher = getattr(self, "_lifeline", None), getattr(self, "_watcher", None)
        if lifeline is not None:
            os.close(lifeline)
            self._lifeline = None
        if watcher is not None:
            watcher.wait(60)
            self._watcher = None
