"""The one escaping of text that a database or JSON cannot hold.

Dask allows any Python string in task keys, span tags, code and exception text: NUL
characters and lone surrogates included. PostgreSQL refuses NUL in ``text`` and
``jsonb``; UTF-8 encoders (SQLite's driver, psycopg, JSON) refuse lone surrogates; SQLite
holds NUL but its own functions (``length``, ``LIKE``, the shell) stop at it. So every
such code point is written as the six characters ``\\uXXXX`` (lower-case hex, as JSON
and Python spell it) before it reaches a database or the wire; all other text, however
long or exotic, is stored as it is. The escape is for reading, not reversible: a text
that already held the six characters ``\\u0000`` reads back the same as one that held a
NUL. Record ids are computed from the original text, so two keys that differ only
there still are two records.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

__all__ = ["escape_rows", "escape_text", "escape_value"]

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
# str for what JSON cannot hold, as the writer and the wire do
_probe = msgspec.json.Encoder(enc_hook=str)


def _replace(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def escape_text(text: str) -> str:
    """``text`` with NUL and lone surrogates written as ``\\uXXXX``."""
    if _UNSTORABLE.search(text) is None:
        return text
    return _UNSTORABLE.sub(_replace, text)


def escape_value(value: Any) -> Any:
    """:func:`escape_text` applied to every string in ``value`` (dict keys, lists and
    tuples included); other values are returned as they are."""
    if isinstance(value, str):
        return escape_text(value)
    if isinstance(value, Mapping):
        return {escape_value(k): escape_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [escape_value(v) for v in value]
    return value


def needs_escape(rows: Any) -> bool:
    """Whether anything in ``rows`` holds text to escape. One JSON encoding of the whole
    batch (microseconds a record): the encoder refuses lone surrogates and spells NUL
    ``\\u0000``. A text holding those six characters itself is a false alarm that only
    costs the slow path."""
    try:
        document = _probe.encode(rows)
    except UnicodeEncodeError:
        return True
    return b"\\u0000" in document


def escape_rows(rows: Sequence[dict[str, Any]]) -> Sequence[dict[str, Any]]:
    """``rows`` (dicts of column values) with every string escaped; the same list when
    nothing needed it (the common case costs one JSON encoding)."""
    if not needs_escape(rows):
        return rows
    return [{name: escape_value(value) for name, value in row.items()} for row in rows]
