"""The one error of an import: a file it cannot read."""

from __future__ import annotations

__all__ = ["BadImportFile"]


class BadImportFile(ValueError):
    """The file is not one an import can read; the message says what was expected."""
