"""``POST /api/v1/ingest``: batches of records from collectors anywhere.

A batch is checked whole: 4xx never send this batch again (the message names the
field), except 425: its cluster's record has not arrived yet, send it again later; 503
the store is unavailable, try again later (the collector's spool does). 2xx stored,
except any record the database itself refused (a value out of its range): those are
listed under ``rejected`` with their index and id, and the rest is stored. A record no
newer than its stored row (an old batch delivered late, a replay) changes nothing and
is counted under ``superseded``: a row only moves forward.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import sqlalchemy as sa
from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from daskscope import config
from daskscope.model import RECORD_TYPES
from daskscope.store import RecordConflict, Rejected, Store, WriteFailed, write_parts
from daskscope.store.errors import short_reason
from daskscope.store.identity import ClusterNotYetKnown, ForeignRecord, Identity, claim_rows
from daskscope.store.schema import TABLE_FOR
from daskscope.text import escape_text
from daskscope.web.admission import Admission, declared_length
from daskscope.web.auth import viewer_of
from daskscope.web.errors import HTTPError, redact
from daskscope.web.routes.common import store_of
from daskscope.web.tokencache import TokenRevoked, verify_in_transaction
from daskscope.wire import NotJSON, WireBatch, WireError, decode_parts

__all__ = ["api", "pages"]

pages = APIRouter(include_in_schema=False)
api = APIRouter(tags=["ingest"])


#: The titles of its refusals (422, 409, 503): they say more than the status's phrase
REFUSED, CONFLICTS, UNAVAILABLE = (
    "Batch refused",
    "Batch conflicts with stored data",
    "Store unavailable",
)


#: Seconds a sender waits before sending again a batch whose cluster is not known yet
#: (a recorder writes its cluster record at start and every few seconds)
CLUSTER_RETRY_AFTER_S = 5


def max_batch_bytes() -> int:
    return int(config.get("ingest.max-batch-bytes"))


async def read_limited_body(request: Request, limit: int) -> list[bytes]:
    """The body in the chunks it came in (joined only when its turn to be decoded comes:
    joining holds it twice for a moment), refusing with 413 as soon as it passes
    ``limit`` (whatever the header says)."""
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > limit:
        raise HTTPError(413, f"a batch may have {limit} bytes; this one has {length}")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise HTTPError(413, f"a batch may have {limit} bytes; split it")
        chunks.append(chunk)
    return chunks


def _batch_schema() -> dict[str, Any]:
    from daskscope.model import RECORD_TYPES
    from daskscope.wire import WIRE_VERSION

    record = {
        "type": "object",
        "required": ["kind", "data"],
        "properties": {
            "kind": {"type": "string", "enum": sorted(RECORD_TYPES)},
            "data": {"type": "object", "description": "the record's fields (docs/metrics.md)"},
        },
    }
    return {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "required": ["version", "records"],
                    "properties": {
                        "version": {"type": "integer", "enum": [WIRE_VERSION]},
                        "records": {"type": "array", "items": record},
                    },
                }
            }
        },
    }


@api.post(
    "/ingest",
    summary="Store a batch of records from a collector",
    openapi_extra={"requestBody": _batch_schema()},
    responses={
        400: {"description": "the body is not JSON"},
        413: {"description": "the batch is too large"},
        401: {"description": "a token is needed (servers with authentication)"},
        409: {"description": "a record belongs to another account; the message names it"},
        425: {"description": "its cluster's record has not arrived yet; send it again later"},
        422: {"description": "a record is invalid; the message names the field"},
        503: {"description": "the store is unavailable; retry later"},
    },
)
async def ingest(request: Request) -> dict[str, Any]:
    # Reached only with a verified token (web/auth.py). Its account's share of the body
    # memory is taken before the body is read, so waiting batches hold a socket, not
    # their body (20 of 31 MiB each reached a 1.7 GiB peak before), and a slow body holds
    # only its own account's share until its deadline (web/limits.py: 408). Decoding and
    # writing is work for a thread, a few complete batches at a time and large ones
    # alone: more would contend for the GIL and the database's locks, and decoding costs
    # several times a body in memory (web/admission.py, docs/benchmarks.md).
    admission: Admission = request.app.state.ingest_admission
    viewer, limit = viewer_of(request), max_batch_bytes()
    account = viewer.account if viewer is not None else None
    async with admission.receiving(account, declared_length(request.headers, limit)):
        chunks = await read_limited_body(request, limit)
        async with admission.decoding(account, sum(map(len, chunks))):
            body = b"".join(chunks)
            chunks.clear()
            return await run_in_threadpool(
                store_batch, store_of(request), body, viewer, _bearer_token(request)
            )


def _bearer_token(request: Request) -> str | None:
    """The request's bearer token, which the write checks again (web/tokencache.py)."""
    scheme, _, value = request.headers.get("authorization", "").partition(" ")
    return (value.strip() or None) if scheme.lower() == "bearer" else None


def store_batch(
    store: Store, body: bytes, viewer: Identity | None, token: str | None = None
) -> dict[str, Any]:
    """Decode, check and write one batch: all of it or, with an HTTP error, none. The
    body is read whole once, then decoded, checked and written a part at a time in one
    transaction (wire.WireBatch): a batch's rows take several times its body."""
    batch = parse_batch(body)
    whole = False

    def parts(conn: sa.Connection) -> Iterator[dict[sa.Table, list[dict[str, Any]]]]:
        if viewer is not None and token is not None:
            # the token (taken from memory before the route) is still the viewer's
            verify_in_transaction(conn, store, token, viewer)
        seen: set[tuple[str, Any]] = set()
        several = not whole and len(batch.splits) > 1
        for part in batch.parts(whole=whole):
            if several:
                ids = {(kind, row["id"]) for kind, rows in part.rows.items() for row in rows}
                if not seen.isdisjoint(ids):
                    raise _RepeatedAcrossParts
                seen |= ids
            if viewer is not None:
                # the token, not the collector, says whose clusters these are
                claim_rows(conn, part.rows, viewer, order=part.in_order)
            yield {TABLE_FOR[RECORD_TYPES[kind]]: rows for kind, rows in part.rows.items()}

    rejected: list[Rejected] = []
    superseded: dict[str, int] = {}
    try:
        try:
            stored = write_parts(store, parts, len(batch), rejected=rejected, superseded=superseded)
        except _RepeatedAcrossParts:
            # an id sent twice, in two parts: the last is kept only when both are
            # written together (rare: a collector sends each row once a batch)
            rejected.clear()
            superseded.clear()
            whole = True
            stored = write_parts(store, parts, len(batch), rejected=rejected, superseded=superseded)
    except WireError as exc:  # a record's fields, found as its part was decoded
        raise HTTPError(422, str(exc), title=REFUSED) from None
    except ClusterNotYetKnown as exc:
        # order must not matter: the sender keeps the batch and sends it again
        raise HTTPError(
            425, str(exc), headers={"Retry-After": str(CLUSTER_RETRY_AFTER_S)}
        ) from None
    except ForeignRecord as exc:
        raise HTTPError(409, str(exc), title=CONFLICTS) from None
    except TokenRevoked as exc:
        raise HTTPError(401, f"{exc}; nothing of this batch was stored") from None
    except RecordConflict as exc:
        rows = batch.rows()  # rare: decoded whole again, to say which record
        index = next(i for i, (_, row) in enumerate(rows) if row["id"] == exc.record_id)
        raise HTTPError(
            409,
            f"records[{index}].data.id: this record id belongs to another cluster; "
            "nothing of this batch was stored",
            title=CONFLICTS,
        ) from None
    except WriteFailed as exc:
        # the server's log has the details; the caller learns nothing of the store
        if exc.retryable:
            raise HTTPError(
                503,
                "the store cannot be written now; nothing of this batch was stored; retry later",
                title=UNAVAILABLE,
            ) from None
        raise HTTPError(
            422,
            f"the store refused this batch ({redact(short_reason(exc.__cause__ or exc))}); "
            "nothing of it was stored",
            title=REFUSED,
        ) from None
    return {
        "stored": stored,
        "records": len(batch),
        "superseded": sum(superseded.values()),
        "superseded_by_table": superseded,
        "rejected": _located(rejected, batch.rows) if rejected else [],
    }


class _RepeatedAcrossParts(Exception):
    """A record id sent twice in a batch, the two in different parts."""


def _located(
    rejected: list[Rejected], rows_of: Callable[[], list[tuple[str, dict[str, Any]]]]
) -> list[dict[str, Any]]:
    """Each record the database refused, with its index in the batch as sent (rare: the
    batch is decoded whole again to find them)."""
    rows = rows_of()
    where = {
        (TABLE_FOR[RECORD_TYPES[kind]].name, escape_text(str(row["id"]))): i
        for i, (kind, row) in reversed(list(enumerate(rows)))
    }
    return [
        {"index": where.get((r.table, r.record_id)), "id": r.record_id, "reason": redact(r.reason)}
        for r in rejected
    ]


def parse_batch(body: bytes) -> WireBatch:
    try:
        return decode_parts(body, max_records=int(config.get("ingest.max-batch-records")))
    except NotJSON as exc:
        raise HTTPError(400, f"the body {exc.message}") from None
    except WireError as exc:
        raise HTTPError(422, str(exc), title=REFUSED) from None
