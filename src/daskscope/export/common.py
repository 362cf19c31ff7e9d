"""What the exports share: a computation's one-line label and file names."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from daskscope.analysis.code import code_frames

__all__ = [
    "BadWindow",
    "ExportError",
    "NothingRecorded",
    "UnknownComputation",
    "call_line",
    "check_window",
    "file_name",
]


class ExportError(ValueError):
    """What was asked cannot be exported; the message says what to do instead."""


class UnknownComputation(ExportError):
    def __init__(self, cluster_id: str, computation: str) -> None:
        super().__init__(
            f"cluster {cluster_id} has no computation {computation!r}; "
            f"`daskscope show {cluster_id}` lists its computations"
        )


class BadWindow(ExportError):
    def __init__(self, start: float | None, stop: float | None, why: str | None = None) -> None:
        super().__init__(
            why
            or f"the window [{start}, {stop}] is empty: give --start before --stop "
            "(epoch seconds, as the timeline and the API show them)"
        )


class NothingRecorded(ExportError):
    """The cluster has none of what this format holds (e.g. no profile, no task)."""


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


def check_window(start: float | None, stop: float | None) -> None:
    """Refuse a window that holds no time (stop at or before start) or has an end that
    is not a number."""
    for name, value in (("start", start), ("stop", stop)):
        if value is not None and not math.isfinite(value):
            raise BadWindow(start, stop, f"{name} must be a finite number of epoch seconds")
    if start is not None and stop is not None and stop <= start:
        raise BadWindow(start, stop)
