"""Send records to a daskscope server, keeping what it cannot take yet in a spool.

(Over 400 lines: one class whose delivery states, posting, spooling, draining, splitting
and a spool that fails, interlock to keep batches in order; it reads best whole.)

Delivery is at least once and in order: every batch goes to the spool's tail unless the
spool is empty and the server takes it at once; the spool drains oldest first, with
exponential backoff while the server is away, failing, or refusing for a reason that can
pass (a revoked token, a redeploy's 404). A batch too large for a proxy in front of the
server (413) is split and sent in parts. The server upserts by record id, so a batch
delivered twice is stored once.

A spool that cannot be used (its folder cannot be made, the disk is read-only) never
stops delivery: batches are then posted directly, and while the server is away the
collector keeps them in memory (``write`` raises, the plugin retries at its next flush).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from daskscope import config
from daskscope.collector.sink import SinkStats
from daskscope.collector.spool import Spool
from daskscope.model import Record, stamp_revisions
from daskscope.wire import encode_batches

__all__ = ["HttpSink", "NotDelivered", "split_payload"]

logger = logging.getLogger("daskscope")

#: "later": this batch only, once its cluster's record is there (425); the others go on
Outcome = Literal["ok", "rejected", "retry", "later"]

_FIRST_BACKOFF_S = 1.0
#: Between tries of a batch whose cluster is not on the server yet (its recorder
#: flushes every few seconds)
_EARLY_RETRY_S = 1.0
_MAX_BACKOFF_S = 60.0
#: 4xx answers that mean "later", not "never": timeouts and rate limits; a token
#: revoked or rotated (the user sends again with a new one); a server being redeployed
_RETRYABLE_CLIENT_ERRORS = {401, 403, 404, 408, 429}
#: "this batch later": its cluster's record has not reached the server yet. Batches
#: after it are still sent (one of them may be that record); a row never moves back, so
#: the order they arrive in does not matter (docs/server.md)
_TOO_EARLY = 425
_ADVICE = {
    401: "its token was revoked or replaced: create a new one (`daskscope token create "
    "--user NAME` on the server), set daskscope.token, and send what waits with "
    "`daskscope spool send --token NEW`",
    404: "it is being redeployed, or daskscope.server is not the server's base URL",
}
_ADVICE[403] = _ADVICE[401]


class NotDelivered(Exception):
    """The server cannot take a batch now and there is no spool to keep it in: the
    collector keeps the records in memory and tries again at its next flush."""


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
        self._spool_unusable = False
        self._backoff = 0.0
        self._retry_at = 0.0
        #: a smaller body limit learned from a 413 (a proxy's, lower than the server's)
        self._max_bytes: int | None = None
        self._warned: set[str] = set()
        #: spooled batches the server answered 425 (their cluster not there yet)
        self._early: set[Path] = set()
        #: what the server said it did with each batch of the last send_now (the parts
        #: of a split batch each): its JSON answer
        self.answers: list[dict[str, Any]] = []
        self.delivered_batches = 0
        self.rejected_batches = 0
        #: records the server stored their batch without (its database refused them)
        self.rejected_records = 0
        #: records delivered or spooled; writes that raised, and the last one's error
        self.records_written = 0
        self.failures = 0
        self.last_error: str | None = None

    def stats(self) -> SinkStats:
        return SinkStats(
            kind="server",
            records_written=self.records_written,
            batches_written=self.delivered_batches,
            failures=self.failures,
            rejected_batches=self.rejected_batches,
            rejected_records=self.rejected_records,
            spooled=self.spooled,
            last_error=self.last_error,
        )

    # -- the spool, when it can be used ----------------------------------------------

    def _ensure_client(self) -> None:
        import httpx

        if self._client is None:
            headers = {"Content-Type": "application/json"}
            if self.token:
                headers["Authorization"] = f"Bearer {self.token}"
            self._client = httpx.Client(headers=headers, timeout=self.timeout)

    def _usable_spool(self) -> Spool | None:
        if self._spool is None and not self._spool_unusable:
            try:
                self._spool = Spool(self.spool_dir)
            except OSError as exc:
                self._give_up_spool(exc)
                return None
            moved = self._spool.set_aside_strays()
            if moved:
                self._warn_stray(moved)
        return self._spool

    def _give_up_spool(self, exc: OSError) -> None:
        self._spool, self._spool_unusable = None, True
        self._warn_once(
            "spool",
            "daskscope cannot use the spool folder %s (%s): batches are posted straight "
            "to %s and, while it cannot take them, kept in the scheduler's memory only. "
            "Set daskscope.spool-dir (DASK_DASKSCOPE__SPOOL_DIR) to a writable folder on "
            "this host.",
            self.spool_dir,
            exc.strerror or type(exc).__name__,
            self.url,
        )

    def _warn_stray(self, moved: Sequence[Path]) -> None:
        self._warn_once(
            "stray",
            "daskscope set aside %d entr%s of its spool %s that %s no batch it can read "
            "(renamed *.unreadable, not deleted): look with `daskscope spool ls`, remove "
            "with `daskscope spool drop --unreadable`",
            len(moved),
            "y" if len(moved) == 1 else "ies",
            self.spool_dir,
            "is" if len(moved) == 1 else "are",
        )

    def _warn_once(self, kind: str, message: str, *args: Any) -> None:
        level = logging.INFO if kind in self._warned else logging.WARNING
        self._warned.add(kind)
        logger.log(level, message, *args)

    @property
    def spooled(self) -> int:
        return len(self._spool) if self._spool is not None else 0

    # -- the sink ----------------------------------------------------------------------

    def open(self) -> None:
        """At start: deliver what an earlier scheduler process left in the spool."""
        self._ensure_client()
        self.drain()

    def write(self, records: Sequence[Record]) -> None:
        """Deliver now or spool, in batches within the server's limits (config
        ``daskscope.ingest``); raises :class:`NotDelivered` only when a batch can
        neither be delivered nor spooled."""
        stamp_revisions(records)  # the server keeps a row's newest: a late copy is ignored
        try:
            self._write(records)
        except Exception as exc:
            self.failures += 1
            self.last_error = f"{type(exc).__name__}: {exc}"
            raise
        self.records_written += len(records)
        self.last_error = None

    def _write(self, records: Sequence[Record]) -> None:
        self._ensure_client()
        max_bytes = int(config.get("ingest.max-batch-bytes"))
        for payload in encode_batches(
            records,
            max_records=int(config.get("ingest.max-batch-records")),
            max_bytes=min(max_bytes, self._max_bytes or max_bytes),
        ):
            spool = self._usable_spool()
            if spool is None:
                # no spool: the flush interval paces the tries, not the backoff
                outcome = self._post(payload, force=True)
            else:
                outcome = self._post(payload) if self.drain() else "retry"
            if outcome == "ok":
                continue
            kept = self._spool_put(payload)
            if outcome == "rejected":
                self._say_rejected(kept)
            elif outcome == "later" and kept is not None:
                self._early.add(kept)
            elif kept is None:
                raise NotDelivered(
                    f"{self.url} cannot take a batch now and the spool {self.spool_dir} "
                    "cannot be used"
                )

    def _spool_put(self, payload: bytes) -> Path | None:
        spool = self._usable_spool()
        if spool is None:
            return None
        try:
            return spool.put(payload)
        except OSError as exc:
            self._give_up_spool(exc)
            return None

    def _say_rejected(self, kept: Path | None) -> None:
        if kept is None:
            logger.error("daskscope: the server refused a batch for good and no spool keeps it")
            return
        logger.error(
            "daskscope server refused a batch for good; kept it in %s (see `daskscope spool ls`)",
            Spool.reject(kept),
        )

    def drain(self, *, force: bool = False) -> bool:
        """Deliver spooled batches in order; True when none waits afterwards but those
        whose cluster is not on the server yet (or there is no spool). ``force``: try
        now, whatever the backoff says."""
        spool = self._usable_spool()
        if spool is None:
            return True
        try:
            with spool.draining() as mine:
                if not mine:
                    return False
                for path in spool.pending():
                    try:
                        payload = path.read_bytes()
                    except FileNotFoundError:  # delivered by another process meanwhile
                        continue
                    except OSError:
                        self._warn_stray([spool.set_aside(path)])
                        continue
                    outcome = self._post(payload, force=force)
                    if outcome == "ok":
                        spool.delivered(path)
                        self._early.discard(path)
                    elif outcome == "rejected":
                        self._say_rejected(path)
                    elif outcome == "later":
                        self._early.add(path)  # kept; the batches after it go on
                    else:
                        return False
        except OSError as exc:  # the folder went read-only or away under us
            self._give_up_spool(exc)
        return True

    def wait_for_cluster(self, timeout: float) -> bool:
        """Send again, until ``timeout`` seconds have passed, the batches this sink
        spooled because their cluster's record had not reached the server (a workflow
        run finished before its recorder's first flush); True when none is left."""
        deadline = time.monotonic() + timeout
        while True:
            self._early = {path for path in self._early if path.exists()}
            if not self._early:
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(_EARLY_RETRY_S, left))
            self.drain(force=True)

    def close(self) -> None:
        """One last try at what waits, whatever the backoff: the node may be gone soon."""
        if self._client is None:
            return
        try:
            self.drain(force=True)
        except Exception as exc:  # never raise into the collector's close
            logger.warning("daskscope: the last delivery at close failed: %s", exc)
        finally:
            self.disconnect()

    def disconnect(self) -> None:
        """Close the connection, sending nothing more."""
        if self._client is not None:
            self._client.close()
            self._client = None

    # -- one POST ----------------------------------------------------------------------

    def send_now(self, payload: bytes) -> Outcome:
        """One batch, now, whatever the backoff (``daskscope spool send``); what the
        server did with it is then in :attr:`answers`."""
        self._ensure_client()
        self.answers = []
        return self._post(payload, force=True)

    def _post(self, payload: bytes, *, force: bool = False) -> Outcome:
        """'ok', 'rejected' (never retry) or 'retry' (network, 5xx, a refusal that can
        pass, backoff active)."""
        import httpx

        if not force and time.monotonic() < self._retry_at:
            return "retry"
        try:
            try:
                response = self._client.post(self.url, content=payload)
            except httpx.RemoteProtocolError:
                # a kept-alive connection the server closed as we reused it: once more on
                # a new one (batches are idempotent)
                response = self._client.post(self.url, content=payload)
        except httpx.HTTPError as exc:
            return self._failed(type(exc).__name__)
        status = response.status_code
        if status < 300:
            self._backoff = 0.0
            self._retry_at = 0.0
            self.delivered_batches += 1
            self._note_answer(response)
            return "ok"
        if status == 413:
            return self._post_split(payload)
        if status == _TOO_EARLY:
            # not the server's state: no backoff, the batches after this one go on
            logger.info(
                "daskscope server %s does not have this batch's cluster yet; kept to send again",
                self.url,
            )
            return "later"
        if status >= 500 or status in _RETRYABLE_CLIENT_ERRORS:
            if status in _ADVICE:
                self._warn_once(
                    f"http-{status}",
                    "daskscope server %s answered %s: %s. Batches are kept and retried.",
                    self.url,
                    status,
                    _ADVICE[status],
                )
            return self._failed(f"HTTP {status}")
        self.rejected_batches += 1
        logger.error(
            "daskscope server %s refused a batch: %s %s",
            self.url,
            status,
            response.text[:500],
        )
        return "rejected"

    def _post_split(self, payload: bytes) -> Outcome:
        """A 413 (often a proxy's smaller body limit): send the batch in two halves,
        and make later batches no larger than those."""
        parts = split_payload(payload)
        if parts is None:  # one record larger than the limit: it never passes
            self.rejected_batches += 1
            logger.error(
                "daskscope server %s refused a single record of %d bytes as too large",
                self.url,
                len(payload),
            )
            return "rejected"
        self._max_bytes = max(1, len(payload) // 2)
        self._warn_once(
            "http-413",
            "daskscope server %s (or a proxy in front of it) refused a batch of %d bytes "
            "as too large; sending smaller batches",
            self.url,
            len(payload),
        )
        for part in parts:
            outcome = self._post(part, force=True)
            if outcome != "ok":
                return outcome
        return "ok"

    def _note_answer(self, response: Any) -> None:
        """What the server did with a batch (kept for send_now), and the records its
        database refused one by one (the rest was stored)."""
        try:
            answer = response.json()
        except ValueError:
            return
        if not isinstance(answer, dict):
            return
        self.answers.append(answer)
        del self.answers[:-64]  # only send_now's few are read; a recorder keeps none long
        rejected = answer.get("rejected") or []
        if rejected:
            self.rejected_records += len(rejected)
            logger.error(
                "daskscope server %s stored a batch without %d record(s) its database refused: %s",
                self.url,
                len(rejected),
                "; ".join(f"{r.get('id')} ({r.get('reason')})" for r in rejected[:10]),
            )

    def _failed(self, reason: str) -> Outcome:
        self._backoff = min(_MAX_BACKOFF_S, max(_FIRST_BACKOFF_S, self._backoff * 2))
        self._retry_at = time.monotonic() + self._backoff
        logger.info(
            "daskscope server %s unavailable (%s); retrying in %.0f s",
            self.url,
            reason,
            self._backoff,
        )
        return "retry"


def split_payload(payload: bytes) -> tuple[bytes, bytes] | None:
    """A batch as two batches of half its records each, in order (so a cluster record,
    always first, reaches the server before the records that need it); None when it
    holds fewer than two records or is no batch."""
    import msgspec

    try:
        document = msgspec.json.decode(payload)
    except msgspec.DecodeError:
        return None
    records = document.get("records") if isinstance(document, dict) else None
    if not isinstance(records, list) or len(records) < 2:
        return None
    half = len(records) // 2
    first = msgspec.json.encode({**document, "records": records[:half]})
    second = msgspec.json.encode({**document, "records": records[half:]})
    return first, second
