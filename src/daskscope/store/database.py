"""An open database: the engine, its URL and this process's caches of it.

The store's query modules take a :class:`Database` (they need nothing more, and so do
not import :mod:`.engine`, which imports them: :class:`~daskscope.store.engine.Store`,
the one door the layers above use, is a Database with every read as a method).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

import sqlalchemy as sa

__all__ = ["IMMEDIATE", "Database", "as_engine", "display_url"]

#: Connection option asking the SQLite begin hook for a write lock up front.
IMMEDIATE = "daskscope_sqlite_immediate"

T = TypeVar("T")


class Database:
    """An open database: its engine and URL, and what this process remembers about it
    between calls (its caches), which lives and dies with the object: two stores never
    share an entry, whatever their URLs or ids (a cache keyed on ``id(store)`` could hand
    a new store a closed one's values)."""

    def __init__(self, engine: sa.Engine, url: sa.URL) -> None:
        self.engine = engine
        self.url = url
        #: when rows past their retention were last removed, by kind ("audit", "login"):
        #: at most once per period per process and store
        self.pruned_at: dict[str, float] = {}
        # the caches of the layers above (views, web), by name: see kept()
        self._kept: dict[str, Any] = {}
        self._kept_lock = threading.Lock()

    def kept(self, name: str, make: Callable[[], T]) -> T:
        """The cache called ``name`` of this store, made by ``make()`` at the first ask.
        The layers above keep their caches here (the views' built values, the web's
        tokens and addresses) with their own bounds and invalidation; the store drops
        them all when it is closed."""
        with self._kept_lock:
            try:
                found: T = self._kept[name]
            except KeyError:
                found = self._kept[name] = make()
            return found

    def forget_kept(self, name: str | None = None) -> None:
        """Drop the cache ``name`` (None: every cache of this store)."""
        with self._kept_lock:
            if name is None:
                self._kept.clear()
            else:
                self._kept.pop(name, None)

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    @property
    def display_url(self) -> str:
        """The URL with any password replaced by ``***``: safe for messages and logs."""
        return display_url(self.url)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.display_url}>"

    def close(self) -> None:
        self.forget_kept()
        self.engine.dispose()

    def __enter__(self: T) -> T:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def as_engine(store_or_engine: Database | sa.Engine) -> sa.Engine:
    if isinstance(store_or_engine, Database):
        return store_or_engine.engine
    if isinstance(store_or_engine, sa.Engine):
        return store_or_engine
    raise TypeError(f"expected a daskscope Store or an SQLAlchemy Engine, got {store_or_engine!r}")


def display_url(url: sa.URL) -> str:
    return url.render_as_string(hide_password=True)
