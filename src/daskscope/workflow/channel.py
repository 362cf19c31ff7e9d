"""A side channel for chunk records from process pools (coffea's ``FuturesExecutor``).

The collector listens on a Unix socket; its address and key travel with the processor
instance (pickled into every child, also into a pool that existed before the
collector). A child sends each record and waits for the acknowledgement, so a record
is in the collector before the chunk's result reaches the parent: no extraction call,
nothing added to the user's output.

Imports nothing heavy: this module runs in pool children.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import tempfile
import threading
from collections.abc import Callable
from multiprocessing.connection import Client, Connection, Listener
from typing import Any

__all__ = ["ChunkListener", "send"]

_POLL_S = 0.2


class ChunkListener:
    """Receives chunk records on a Unix socket and hands them to ``receiver``."""

    def __init__(self, receiver: Callable[[dict[str, Any]], None]) -> None:
        self.receiver = receiver
        self.authkey = secrets.token_bytes(16)
        self._dir = tempfile.mkdtemp(prefix="daskscope-")
        self.address = os.path.join(self._dir, "chunks.sock")
        self._listener = Listener(self.address, family="AF_UNIX", authkey=self.authkey)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._accepting = threading.Thread(
            target=self._accept, name="daskscope-chunk-listener", daemon=True
        )
        self._accepting.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn = self._listener.accept()
            except Exception:  # closed, or a peer without the key
                if self._stop.is_set():
                    return
                continue
            thread = threading.Thread(
                target=self._serve, args=(conn,), name="daskscope-chunk-conn", daemon=True
            )
            self._threads.append(thread)
            thread.start()

    def _serve(self, conn: Connection) -> None:
        # Polls so that closing the listener ends the thread even while a long-lived
        # pool process keeps its connection open
        with contextlib.closing(conn):
            while not self._stop.is_set():
                try:
                    if not conn.poll(_POLL_S):
                        continue
                    record = conn.recv()
                except (EOFError, OSError):
                    return
                with contextlib.suppress(Exception):
                    self.receiver(record)
                try:
                    conn.send(True)
                except OSError:
                    return

    @property
    def route(self) -> tuple[str, bytes]:
        return self.address, self.authkey

    def close(self) -> None:
        self._stop.set()
        # accept() blocks: one connection of our own wakes it up
        with contextlib.suppress(Exception):
            Client(self.address, family="AF_UNIX", authkey=self.authkey).close()
        with contextlib.suppress(Exception):
            self._listener.close()
        self._accepting.join(timeout=2)
        for thread in self._threads:
            thread.join(timeout=2 * _POLL_S + 1)
        with contextlib.suppress(OSError):
            os.unlink(self.address)
        with contextlib.suppress(OSError):
            os.rmdir(self._dir)


# One connection per (process, address): a pool process sends many chunks
_connections: dict[tuple[int, str], Connection] = {}
_lock = threading.Lock()


def send(route: tuple[str, bytes], record: dict[str, Any]) -> bool:
    """Send one record and wait for its acknowledgement; False when nobody listens."""
    address, authkey = route
    key = (os.getpid(), address)
    with _lock:
        for _ in range(2):  # a cached connection may be dead: retry once with a new one
            conn = _connections.get(key)
            try:
                if conn is None:
                    if not os.path.exists(address):
                        return False
                    conn = _connections[key] = Client(address, family="AF_UNIX", authkey=authkey)
                conn.send(record)
                conn.recv()
                return True
            except Exception:
                _connections.pop(key, None)
                if conn is not None:
                    with contextlib.suppress(Exception):
                        conn.close()
    return False
