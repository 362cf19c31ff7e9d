"""What the exports share: a computation's one-line label and file names."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from daskscope.analysis.code import code_frames

__all__ = ["call_line", "file_name"]


def call_line(computation: Mapping[str, Any]) -> str | None:
    """The line of code that launched a computation (the innermost stored frame's call),
    else the first non-blank line of its code; None when Dask sent no code."""
    frames = code_frames(computation.get("code"))
    for frame in frames:
        if frame["call_text"]:
            return str(frame["call_text"])
    for text in reversed(computation.get("code") or []):
        for line in str(text).splitlines():
            if line.strip() and not line.startswith("# "):
                return line.strip()
    return None


def file_name(cluster_id: str, kind: str, extension: str, computation: str | None = None) -> str:
    """``daskscope-<cluster>[-<computation>]-<kind>.<extension>``, safe in any file system."""
    parts = ["daskscope", cluster_id, *([computation] if computation else []), kind]
    return re.sub(r"[^A-Za-z0-9._-]+", "_", "-".join(parts)) + "." + extension
