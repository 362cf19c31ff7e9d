"""Helpers shared by the route modules."""

from __future__ import annotations

from fastapi import Request

from daskscope.store import Store

__all__ = ["store_of"]


def store_of(request: Request) -> Store:
    return request.app.state.store
