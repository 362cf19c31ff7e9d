"""The building blocks of the notebook's HTML: escaped text, tables, fine-metric bars
and the one stylesheet, all inline.

A notebook's output must stand alone wherever it is opened (JupyterLab, VS Code's
renderer, a notebook saved and sent): no script, no request to any host, only HTML
and CSS scoped under ``.daskscope-nb`` so it changes nothing else on the page.
Numbers arrive already formatted by :mod:`daskscope.format` (the views' texts).
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence

__all__ = ["STYLE", "Bar", "bars", "escape", "frame", "link", "note", "table"]

#: scoped to the output's root; colours that read on light and dark notebook themes
STYLE = """<style>
.daskscope-nb{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;font-size:13px;
  line-height:1.4;max-width:980px}
.daskscope-nb h3{font-size:15px;margin:.2em 0 .3em}
.daskscope-nb h4{font-size:13px;margin:.8em 0 .2em}
.daskscope-nb .ds-muted{opacity:.7}
.daskscope-nb .ds-badge{display:inline-block;padding:0 .5em;border-radius:.6em;font-size:11px;
  border:1px solid currentColor;margin-left:.2em;vertical-align:middle}
.daskscope-nb table{border-collapse:collapse;margin:.2em 0 .4em}
.daskscope-nb th,.daskscope-nb td{padding:.1em .7em .1em 0;text-align:left;border:none;
  vertical-align:top;white-space:nowrap}
.daskscope-nb thead th{border-bottom:1px solid rgba(127,127,127,.5);font-weight:600}
.daskscope-nb td.ds-num,.daskscope-nb th.ds-num{text-align:right;
  font-variant-numeric:tabular-nums}
.daskscope-nb .ds-cols{display:flex;flex-wrap:wrap;gap:0 2.5em}
.daskscope-nb .ds-bar,.daskscope-nb .ds-key{border-radius:2px}
.daskscope-nb .ds-legend{display:flex;flex-wrap:wrap;gap:.1em 1.2em;margin:.2em 0}
.daskscope-nb .ds-better{color:#1a7f37}.daskscope-nb .ds-worse{color:#cf222e}
</style>"""


# The bars' own shape inline too: a notebook opened untrusted (JupyterLab) loses its
# <style> elements but keeps style attributes
_TRACK = (
    "display:flex;height:14px;width:420px;max-width:60vw;overflow:hidden;"
    "background-color:rgba(127,127,127,.15);"
)
_PART = "display:block;height:14px;"
_KEY = "display:inline-block;width:.8em;height:.8em;margin-right:.3em;"


def escape(text: object) -> str:
    return html.escape(str(text), quote=True)


def frame(body: str, *, name: str) -> str:
    """The output's root element: the stylesheet, then ``body``; ``name`` says what it
    shows (a ``data-daskscope`` attribute a reader or test can find it by)."""
    return f'<div class="daskscope-nb" data-daskscope="{escape(name)}">{STYLE}{body}</div>'


def table(
    header: Sequence[str] | None,
    rows: Iterable[Sequence[str]],
    *,
    numeric: Sequence[bool] = (),
    name: str = "",
    escaped: bool = False,
) -> str:
    """A table of text cells (escaped unless ``escaped``); ``numeric[i]`` right-aligns
    column i; ``name`` becomes its ``data-table``."""

    def cell(tag: str, i: int, text: str) -> str:
        cls = ' class="ds-num"' if i < len(numeric) and numeric[i] else ""
        return f"<{tag}{cls}>{text if escaped else escape(text)}</{tag}>"

    head = ""
    if header is not None:
        head = "<thead><tr>" + "".join(cell("th", i, h) for i, h in enumerate(header))
        head += "</tr></thead>"
    body = "".join(
        "<tr>" + "".join(cell("td", i, c) for i, c in enumerate(row)) + "</tr>" for row in rows
    )
    attr = f' data-table="{escape(name)}"' if name else ""
    return f"<table{attr}>{head}<tbody>{body}</tbody></table>"


class Bar:
    """One bar: its label, the text of its total, and its parts ``(activity, value,
    text)`` drawn in the activities' colours."""

    def __init__(self, label: str, total_text: str, parts: Sequence[tuple[str, float, str]]):
        self.label, self.total_text, self.parts = label, total_text, list(parts)

    @property
    def total(self) -> float:
        return sum(max(v, 0.0) for _, v, _ in self.parts)


def bars(
    rows: Sequence[Bar], colours: Mapping[str, str], *, name: str, scale: float | None = None
) -> str:
    """Stacked horizontal bars on one scale (the largest total unless ``scale``), each
    part a coloured ``<span>`` whose title says its activity and value, then a legend
    of the activities drawn. Plain HTML and CSS: no script, no image."""
    longest = scale if scale is not None else max((b.total for b in rows), default=0.0)
    lines = []
    drawn: list[str] = []
    for bar in rows:
        parts = []
        for activity, value, text in bar.parts:
            if value <= 0 or longest <= 0:
                continue
            if activity not in drawn:
                drawn.append(activity)
            width = 100.0 * value / longest
            colour = escape(colours.get(activity, "#999"))
            parts.append(
                f'<span data-activity="{escape(activity)}" data-value="{value!r}" '
                f'title="{escape(activity)}: {escape(text)}" '
                f'style="{_PART}width:{width:.3f}%;background-color:{colour}"></span>'
            )
        lines.append(
            f'<tr data-bar="{escape(bar.label)}"><td>{escape(bar.label)}</td>'
            f'<td class="ds-num">{escape(bar.total_text)}</td>'
            f'<td class="ds-track"><div class="ds-bar" style="{_TRACK}">{"".join(parts)}</div>'
            "</td></tr>"
        )
    legend = "".join(
        f'<span><span class="ds-key" style="{_KEY}background-color:'
        f'{escape(colours.get(a, "#999"))}"></span>{escape(a)}</span>'
        for a in drawn
    )
    return (
        f'<table class="ds-bars" data-bars="{escape(name)}"><tbody>{"".join(lines)}</tbody></table>'
        f'<div class="ds-legend">{legend}</div>'
    )


def link(url: str, text: str) -> str:
    return f'<a href="{escape(url)}" target="_blank" rel="noopener">{escape(text)}</a>'


def note(text: str) -> str:
    return f'<p class="ds-muted">{escape(text)}</p>'
