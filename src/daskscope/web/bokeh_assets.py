"""Performance reports saved in Bokeh's CDN mode, rendered offline.

Such a report loads ``https://cdn.bokeh.org/bokeh/release/bokeh-<version>.min.js`` (and
its widgets, tables, ... scripts). When the installed ``bokeh`` package is that version,
its own copies (``bokeh/server/static/js/``) are served at ``/assets/bokeh/<version>/``
and the report's script addresses are rewritten to them as it is served; the stored file
stays as uploaded. Otherwise :func:`offline` says why the report cannot render here.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Offline", "offline", "rewrite", "script"]

#: A script element loading Bokeh from its CDN (only those: the report's data may quote
#: the address too, e.g. in a profile's source lines, and stays as it is)
_CDN = re.compile(
    rb"(?P<lead><script\b[^>]*?\bsrc=[\"'])https://cdn\.bokeh\.org/bokeh/(?:release|dev)/"
    rb"(?P<name>bokeh(?:-[a-z]+)?)-(?P<version>[0-9][0-9A-Za-z.+-]*?)(?:\.min)?\.js(?=[\"'])",
    re.IGNORECASE,
)
#: A link to an icon on another site, as distributed writes in its reports' head
_ICON = re.compile(
    rb"(?P<lead><link\b[^>]*?\brel=[\"'](?:shortcut )?icon[\"'][^>]*?\bhref=[\"'])https?://[^\"']*",
    re.IGNORECASE,
)
#: Only Bokeh's own bundles are served, by name
_SCRIPT = re.compile(r"^bokeh(?:-[a-z]+)?\.min\.js$")
INLINE_HINT = (
    "save the report with its scripts inline: performance_report(filename=..., mode='inline')"
)
_INLINE_SENTENCE = INLINE_HINT[0].upper() + INLINE_HINT[1:] + "."


@functools.cache
def _installed() -> tuple[str, Path] | None:
    """The installed bokeh's version and its scripts' folder (without importing bokeh)."""
    spec = importlib.util.find_spec("bokeh")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "server" / "static" / "js"
    if not folder.is_dir():
        return None
    return importlib.metadata.version("bokeh"), folder


def script(version: str, name: str) -> bytes | None:
    """The installed bokeh's ``name`` (e.g. ``bokeh-widgets.min.js``) if it is ``version``."""
    installed = _installed()
    if installed is None or installed[0] != version or not _SCRIPT.match(name):
        return None
    try:
        return (installed[1] / name).read_bytes()
    except OSError:
        return None


@dataclass(frozen=True)
class Offline:
    """Whether a report renders without the internet, and if not, why."""

    cdn_version: str | None  # the Bokeh version its CDN scripts are (None: none)
    renders: bool
    reason: str | None = None


def offline(content: bytes) -> Offline:
    """What :func:`rewrite` can do for this report."""
    found = [(m["name"].decode(), m["version"].decode()) for m in _CDN.finditer(content)]
    if not found:
        return Offline(None, True)
    versions = sorted({version for _, version in found})
    wanted = versions[0]
    installed = _installed()
    saved = (
        f"It was saved in CDN mode: it loads Bokeh {', '.join(versions)} from cdn.bokeh.org, "
        "which needs the internet"
    )
    if installed is None:
        reason = f"{saved}, and no bokeh is installed beside daskscope to serve instead. "
        return Offline(wanted, False, reason + _INLINE_SENTENCE)
    if len(versions) > 1 or installed[0] != wanted:
        reason = (
            f"{saved}, and the installed bokeh is {installed[0]}: install bokeh=={wanted} "
            "beside daskscope, or "
        )
        return Offline(wanted, False, reason + INLINE_HINT + ".")
    missing = [name for name, _ in found if script(wanted, f"{name}.min.js") is None]
    if missing:
        reason = f"{saved}, and the installed bokeh lacks {', '.join(missing)}. "
        return Offline(wanted, False, reason + _INLINE_SENTENCE)
    return Offline(wanted, True)


def rewrite(content: bytes) -> bytes:
    """The report with its Bokeh CDN scripts pointing at this server, when it has them
    (else left: its page says why it stays blank, see :func:`offline`), and its icon
    (Dask's, on docs.dask.org) made empty: the sandbox's policy would refuse it anyway,
    with an error in the console."""
    content = _ICON.sub(rb"\g<lead>data:,", content)
    state = offline(content)
    if state.cdn_version is None or not state.renders:
        return content
    return _CDN.sub(
        lambda m: b"%s/assets/bokeh/%s/%s.min.js" % (m["lead"], m["version"], m["name"]),
        content,
    )
