"""Jinja2 pages: one environment, formatting filters, and the page helper."""

from __future__ import annotations

import datetime as dt
import functools
from pathlib import Path
from typing import Any

import jinja2
from fastapi import Request
from fastapi.responses import HTMLResponse
from markupsafe import Markup

__all__ = ["code_css", "highlight", "page", "render_page"]

_TEMPLATES = Path(__file__).with_name("templates")


def human_bytes(value: Any) -> str:
    if value is None:
        return "-"
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return str(value)


def human_duration(value: Any) -> str:
    if value is None:
        return "-"
    s = float(value)
    if s < 60:
        return f"{s:.1f} s"
    if s < 3600:
        return f"{int(s // 60)} min {int(s % 60)} s"
    if s < 86400:
        return f"{int(s // 3600)} h {int(s % 3600 // 60)} min"
    return f"{int(s // 86400)} d {int(s % 86400 // 3600)} h"


def utc(value: Any) -> str:
    if value is None:
        return "-"
    return dt.datetime.fromtimestamp(float(value), dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def number(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:,.2f}"
    return f"{int(value):,}"


def money(value: Any, currency: str = "USD") -> str:
    return "-" if value is None else f"{float(value):,.2f} {currency}"


def highlight(code: str) -> Markup:
    """Python source as HTML with pygments classes (styles from ``/assets/code.css``)."""
    from pygments import highlight as pygmentize
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import PythonLexer

    return Markup(pygmentize(code, PythonLexer(), HtmlFormatter(cssclass="code")))


def code_css() -> str:
    from pygments.formatters import HtmlFormatter

    return HtmlFormatter(style="friendly").get_style_defs(".code")


@functools.cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(_TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters.update(
        bytes=human_bytes,
        duration=human_duration,
        utc=utc,
        number=number,
        money=money,
        highlight=highlight,
    )
    return env


def render_page(request: Request, template: str, **context: Any) -> str:
    nav = request.url.path.split("/")[1] if request.url.path != "/" else ""
    # The viewer is unset when a request failed before authentication (unknown route)
    viewer = getattr(request.state, "viewer", None)
    return (
        environment()
        .get_template(template)
        .render(request=request, nav=nav, viewer=viewer, **context)
    )


def page(request: Request, template: str, **context: Any) -> HTMLResponse:
    return HTMLResponse(render_page(request, template, **context))
