"""Helpers shared by the route modules."""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse

from daskscope.store import Store

__all__ = ["json_response", "store_of"]


def store_of(request: Request) -> Store:
    return request.app.state.store


def json_response(data: Any) -> JSONResponse:
    """Plain data straight to JSON: skips FastAPI's recursive ``jsonable_encoder``,
    which costs more than the query for the larger payloads (weekly usage, details)."""
    return JSONResponse(data)
