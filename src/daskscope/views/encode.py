"""The one encoding of a view: msgspec's JSON of the dataclass, for the API, the CLI's
``--json`` and the data a page embeds for its script."""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = ["to_data", "to_json", "to_pretty_json"]


def to_json(view: Any) -> bytes:
    """The view as compact JSON (non-finite floats become null)."""
    return msgspec.json.encode(view)


def to_pretty_json(view: Any) -> str:
    """The same JSON, indented for a terminal."""
    return msgspec.json.format(to_json(view), indent=2).decode()


def to_data(view: Any) -> Any:
    """The view as plain dicts and lists: what its JSON decodes to."""
    return msgspec.to_builtins(view)
