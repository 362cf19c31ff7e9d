"""A SQLite store written by a child process, so that SQLite can never take the
scheduler (the user's process) down with it.

SQLite maps a WAL database's ``-shm`` file into memory. When that file is truncated or
made unwritable (``chattr +i``) while mapped, the next access raises SIGBUS and kills
the process that mapped it — no Python code can catch that (docs/configuration.md). Here
only this child maps it; the parent sees the child die, reports a failed write (records
stay in the collector's memory) and starts a new child for the next write.

Protocol on the child's stdin/stdout: frames of a 4-byte big-endian length and a
payload. The parent sends wire batches (:func:`daskscope.wire.encode_batch`), which the
child writes with :func:`daskscope.store.batches.write_batch`; it answers each with a
JSON object: ``{"stored": n, "rejected": [...], "tables": {table: rows upserted}}`` or
``{"error": message, "retryable": bool}``. Its first answer, before any batch, says
whether the store opened and which file it is (``{"ready": true, "database": path}``),
that the URL names a store in memory, which it leaves to the parent (``{"in_memory":
true}``, and it ends), or why it could not (``{"error": message, "bad_url": bool}``).
The child alone parses the URL: the scheduler never imports SQLAlchemy for it.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import struct
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

__all__ = ["StoreProcess", "StoreProcessDied"]

_HEADER = struct.Struct(">I")


class StoreProcessDied(RuntimeError):
    """The child writing the store ended without answering."""


def _send(stream: IO[bytes], payload: bytes) -> None:
    stream.write(_HEADER.pack(len(payload)) + payload)
    stream.flush()


def _receive(stream: IO[bytes]) -> bytes | None:
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        return None
    (size,) = _HEADER.unpack(header)
    payload = stream.read(size)
    return payload if len(payload) == size else None


class StoreProcess:
    """The parent's handle on one child writing to the store at ``url``."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._process: subprocess.Popen[bytes] | None = None
        #: the file the child opened (None: the URL names a store in memory)
        self.database: str | None = None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def start(self) -> None:
        """Start the child and wait until it has opened (created, migrated) the store;
        raises :class:`daskscope.store.StoreError` with the child's message if it cannot.
        A store in memory is not opened: the child ends, and :attr:`database` stays None."""
        from daskscope.store.errors import BadDatabaseURL, DatabaseUnreachable

        package_root = str(Path(__file__).resolve().parents[2])
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (package_root, env.get("PYTHONPATH", "")) if p
        )
        self._process = subprocess.Popen(
            [sys.executable, "-m", "daskscope.collector.store_process", self.url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            # its own session: a Ctrl-C meant for the scheduler must not stop the writer
            # before the scheduler's last flush
            start_new_session=True,
        )
        answer = self._answer()
        if "error" in answer:
            self.close()
            raise (BadDatabaseURL if answer.get("bad_url") else DatabaseUnreachable)(
                answer["error"]
            )
        self.database = answer.get("database")

    def write(self, payload: bytes) -> dict[str, Any]:
        """Send one wire batch; the child's answer (see the module's docstring)."""
        assert self._process is not None and self._process.stdin is not None
        with contextlib.suppress(OSError):  # the child is gone: _answer says how
            _send(self._process.stdin, payload)
        return self._answer()

    def _answer(self) -> dict[str, Any]:
        assert self._process is not None and self._process.stdout is not None
        payload = _receive(self._process.stdout)
        if payload is None:
            code = self._process.wait()
            self._process = None
            raise StoreProcessDied(_death(code))
        answer: dict[str, Any] = json.loads(payload)
        return answer

    def close(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        try:
            if process.stdin is not None:
                process.stdin.close()  # the child ends at end of input
            process.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            process.kill()
            process.wait()
        finally:
            if process.stdout is not None:
                process.stdout.close()


def _death(code: int) -> str:
    if code == -signal.SIGBUS:
        return (
            "the process writing the SQLite store died of SIGBUS: its -shm file was "
            "truncated or made unwritable while in use (docs/configuration.md); the "
            "records are kept and written once the store can be written again"
        )
    if code < 0:
        return f"the process writing the store died of signal {-code}"
    return f"the process writing the store ended with exit code {code}"


# -- the child --------------------------------------------------------------------------


def _serve(url: str, stdin: IO[bytes], stdout: IO[bytes]) -> int:
    from daskscope.store import BadDatabaseURL, Rejected, StoreError, WriteFailed
    from daskscope.store.batches import open_for_batches, write_batch
    from daskscope.store.engine import parse_url

    try:
        database = parse_url(url).database
        if database in (None, "", ":memory:"):
            _send(stdout, json.dumps({"in_memory": True}).encode())
            return 0
        # once per cluster, before the first flush waits on it
        store = open_for_batches(url)
    except StoreError as exc:
        refusal = {"error": str(exc), "bad_url": isinstance(exc, BadDatabaseURL)}
        _send(stdout, json.dumps(refusal).encode())
        return 1
    _send(stdout, json.dumps({"ready": True, "database": database}).encode())
    while (payload := _receive(stdin)) is not None:
        rejected: list[Rejected] = []
        try:
            written = write_batch(store, payload, rejected=rejected)
            answer: dict[str, Any] = {
                "stored": written.stored,
                "rejected": [[r.table, r.record_id, r.reason] for r in rejected],
                # the batch's rows by table: a record sent twice in a batch is one row
                "tables": written.tables,
            }
        except WriteFailed as exc:
            answer = {"error": str(exc), "retryable": exc.retryable}
        except Exception as exc:
            answer = {"error": f"{type(exc).__name__}: {exc}", "retryable": True}
        if "error" in answer:
            # A connection SQLite opened while the file was unwritable (e.g. an immutable
            # -shm) stays read-only for good: the next write opens new ones.
            store.engine.dispose()
        _send(stdout, json.dumps(answer).encode())
    store.close()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    import logging

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    # the parent logs what matters (refused records, failures), once
    logging.getLogger("daskscope").setLevel(logging.ERROR)
    (url,) = argv if argv is not None else sys.argv[1:]
    # the answers get the real stdout to themselves; anything else printed goes to stderr
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    return _serve(url, sys.stdin.buffer, answers)


if __name__ == "__main__":
    sys.exit(main())
