"""Where a notebook output points for the dashboard page of what it shows.

A link only when the server's address is known (``daskscope.public-url``, else
``daskscope.server`` in dask's config); otherwise the words to start one on this
store and the page's path, never a guessed address.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from daskscope import config
from daskscope.notebook.html import escape, link

__all__ = ["Dashboard", "dashboard"]


@dataclass(frozen=True)
class Dashboard:
    """The page ``path`` on the server at ``base`` (None: no server known, and
    ``how`` says how to open one on ``store_url``)."""

    path: str
    base: str | None
    store_url: str

    @property
    def url(self) -> str | None:
        return None if self.base is None else self.base.rstrip("/") + self.path

    @property
    def how(self) -> str:
        return (
            f"daskscope serve --database {shlex.quote(self.store_url)}, "
            f"then open http://127.0.0.1:8787{self.path}"
        )

    def text(self) -> str:
        url = self.url
        return f"dashboard: {url}" if url else f"dashboard: {self.how}"

    def html(self) -> str:
        url = self.url
        if url:
            return f'<p data-dashboard="link">Dashboard page: {link(url, url)}</p>'
        return (
            '<p class="ds-muted" data-dashboard="how">Dashboard page: no server is '
            "configured (<code>daskscope.public-url</code>); run "
            f"<code>{escape(self.how.split(', then')[0])}</code> and open "
            f"<code>http://127.0.0.1:8787{escape(self.path)}</code></p>"
        )


def dashboard(path: str, store_url: str) -> Dashboard:
    base = config.get("public-url") or config.get("server")
    return Dashboard(path, str(base) if base else None, store_url)
