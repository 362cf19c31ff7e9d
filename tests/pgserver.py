"""A throwaway PostgreSQL server in a temporary directory, for tests and benchmarks.

The server binaries come from Debian's postgresql package; as root, initdb and pg_ctl run
as the postgres user (initdb refuses root).
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
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


def _as_postgres(*args: str | os.PathLike) -> list[str]:
    # initdb refuses to run as root: drop to the postgres OS user when we are root.
    cmd = [str(a) for a in args]
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


class PostgresServer:
    """A throwaway PostgreSQL server in a temporary directory; tests may stop and start it."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="daskscope-pg-"))
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres", "postgres")
        self.data, self.port = self.root / "data", free_port()
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
