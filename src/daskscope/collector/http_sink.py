"""Send records to a daskscope server, keeping what it cannot take yet in a spool.

Delivery is at least once and in order: every batch goes to the spool's tail unless the
spool is empty and the server takes it at once; the spool drains oldest first, with
exponential backoff while the server is away or failing. The server upserts by record
id, so a batch delivered twice is stored once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from daskscope import config
from daskscope.collector.spool import Spool
from daskscope.model import Record
from daskscope.wire import encode_batches

__all__ = ["HttpSink"]

logger = logging.getLogger("daskscope")

_FIRST_BACKOFF_S = 1.0
_MAX_BACKOFF_S = 60.0
#: 4xx answers that mean "later", not "never"
_RETRYABLE_CLIENT_ERRORS = {408, 425, 429}


class HttpSink:
    def __init__(
        self, server: str, token: str | None, spool_dir: str | Path, timeout: float = 10.0
    ):
        self.url = server.rstrip("/") + "/api/v1/ingest"
        self.token = token
        self.spool_dir = Path(spool_dir)
        self.timeout = timeout
        self._client: Any = None
        self._spool: Spool | None = None
        self._backoff = 0.0
        self._retry_at = 0.0
        self.delivered_batches = 0
        self.rejected_batches = 0
        #: records the server stored their batch without (its database refused them)
        self.rejected_records = 0

    def _ensure(self) -> Spool:
        import httpx

        if self._client is None:
            headers = {"Content-Type": "application/json"}
            if self.token:
                headers["Authorization"] = f"Bearer {self.token}"
            self._client = httpx.Client(headers=headers, timeout=self.timeout)
        if self._spool is None:
            self._spool = Spool(self.spool_dir)
        return self._spool

    def open(self) -> None:
        """At start: deliver what an earlier scheduler process left in the spool."""
        self._ensure()
        self.drain()

    @property
    def spooled(self) -> int:
        return len(self._spool) if self._spool is not None else 0

    def write(self, records: Sequence[Record]) -> None:
        """Deliver now or spool, in batches within the server's limits (config
        ``daskscope.ingest``); raises only when the spool itself cannot be written."""
        spool = self._ensure()
        for payload in encode_batches(
            records,
            max_records=int(config.get("ingest.max-batch-records")),
            max_bytes=int(config.get("ingest.max-batch-bytes")),
        ):
            outcome = self._post(payload) if self.drain() else "retry"
            if outcome == "ok":
                continue
            path = spool.put(payload)
            if outcome == "rejected":
                logger.error(
                    "daskscope server refused a batch for good; kept it in %s", spool.reject(path)
                )

    def drain(self) -> bool:
        """Deliver spooled batches in order; True when the spool is empty afterwards."""
        spool = self._ensure()
        with spool.draining() as mine:
            if not mine:
                return False
            for path in spool.pending():
                try:
                    payload = path.read_bytes()
                except FileNotFoundError:  # delivered by another process meanwhile
                    continue
                outcome = self._post(payload)
                if outcome == "ok":
                    spool.delivered(path)
                elif outcome == "rejected":
                    kept = spool.reject(path)
                    logger.error("daskscope server refused a batch for good; kept it in %s", kept)
                else:
                    return False
        return True

    def _post(self, payload: bytes) -> str:
        """'ok', 'rejected' (never retry) or 'retry' (network, 5xx, backoff active)."""
        import httpx

        if time.monotonic() < self._retry_at:
            return "retry"
        try:
            try:
                response = self._client.post(self.url, content=payload)
            except httpx.RemoteProtocolError:
                # a kept-alive connection the server closed as we reused it: once more on
                # a new one (batches are idempotent)
                response = self._client.post(self.url, content=payload)
        except httpx.HTTPError as exc:
            return self._failed(f"{type(exc).__name__}: {exc}")
        if response.status_code < 300:
            self._backoff = 0.0
            self._retry_at = 0.0
            self.delivered_batches += 1
            self._note_rejected(response)
            return "ok"
        if (
            400 <= response.status_code < 500
            and response.status_code not in _RETRYABLE_CLIENT_ERRORS
        ):
            self.rejected_batches += 1
            logger.error(
                "daskscope server %s refused a batch: %s %s",
                self.url,
                response.status_code,
                response.text[:500],
            )
            return "rejected"
        return self._failed(f"HTTP {response.status_code}")

    def _note_rejected(self, response: Any) -> None:
        """Records the server's database refused one by one (the rest was stored)."""
        try:
            rejected = response.json().get("rejected") or []
        except ValueError:
            return
        if rejected:
            self.rejected_records += len(rejected)
            logger.error(
                "daskscope server %s stored a batch without %d record(s) its database refused: %s",
                self.url,
                len(rejected),
                "; ".join(f"{r.get('id')} ({r.get('reason')})" for r in rejected[:10]),
            )

    def _failed(self, reason: str) -> str:
        self._backoff = min(_MAX_BACKOFF_S, max(_FIRST_BACKOFF_S, self._backoff * 2))
        self._retry_at = time.monotonic() + self._backoff
        logger.info(
            "daskscope server %s unavailable (%s); retrying in %.0f s",
            self.url,
            reason,
            self._backoff,
        )
        return "retry"

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
