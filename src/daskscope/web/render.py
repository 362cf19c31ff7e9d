"""Jinja2 pages: one environment, formatting filters (those of :mod:`daskscope.format`),
and the page helper."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import jinja2
from fastapi import Request
from fastapi.responses import HTMLResponse
from markupsafe import Markup

from daskscope import format

__all__ = ["code_css", "highlight", "page", "render_page"]

_TEMPLATES = Path(__file__).with_name("templates")


def highlight(code: str, marked: int | None = None) -> Markup:
    """Python source as HTML with pygments classes (styles from ``/assets/code.css``);
    line ``marked`` (1-based) in a ``<span class="hll">``."""
    from pygments import highlight as pygmentize
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import PythonLexer

    formatter = HtmlFormatter(cssclass="code", hl_lines=[marked] if marked else [])
    return Markup(pygmentize(code, PythonLexer(), formatter))


def code_css() -> str:
    from pygments.formatters import HtmlFormatter

    css: str = HtmlFormatter(style="friendly").get_style_defs(".code")
    return css


@functools.cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(_TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    # Every number reads as daskscope.format writes it (the page scripts too)
    env.filters.update(
        bytes=format.bytes_text,
        duration=format.duration_text,
        utc=format.timestamp_text,
        number=format.number_text,
        count=format.count_text,
        money=format.money_text,
        percent=format.percent_text,
        value=format.value_text,
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
