"""What to show for a computation's code: its frames, innermost first, each with the
line that launched the computation; and what to say when Dask sent none."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

__all__ = ["CODE_NOT_CAPTURED", "code_frames", "code_note"]

# Dask's client sends code only when this setting is above 0 (its default is 0), and
# it is read in the client's process: a scheduler preload cannot turn it on.
CODE_NOT_CAPTURED = (
    "code not captured: set distributed.diagnostics.computations.nframes to 1 or more "
    "in the client's dask config (e.g. dask.config.set("
    '{"distributed.diagnostics.computations.nframes": 2}) before compute), '
    "or call daskscope.register(client), which does it"
)

#: The recorder's header of a frame (collector.snapshot.frame_text)
_HEADER = re.compile(r"^# (?P<file>.+):(?P<line>\d+) \(from line (?P<start>\d+)\)$")


def code_note(code: Sequence[str] | None) -> str | None:
    """None when the computation has code to show, else why it has none and the fix."""
    return None if code else CODE_NOT_CAPTURED


def code_frames(code: Sequence[str] | None) -> list[dict[str, Any]]:
    """The stored snippets as frames, innermost (the one calling compute) first.

    Each: ``snippet`` (its index in ``code``), ``filename``, ``line`` (of the call in
    its file, None without a header), ``call_line`` (the call's line within the
    snippet's text, 1-based, header included; None when it was cut off) and
    ``call_text`` (that line, stripped)."""
    frames = [_frame(i, text) for i, text in enumerate(code or [])]
    # Dask lists a call's frames outermost first; the stored list keeps that order.
    return frames[::-1]


def _frame(index: int, text: str) -> dict[str, Any]:
    lines = text.splitlines()
    found = _HEADER.match(lines[0]) if lines else None
    frame: dict[str, Any] = {
        "snippet": index,
        "filename": found["file"] if found else None,
        "line": int(found["line"]) if found else None,
        "call_line": None,
        "call_text": None,
    }
    if found is None:
        return frame
    # The header's "from line" is one past the first line shown (the recorder adds
    # Dask's 0-based offset of the call as if it were 1-based), so the call is code
    # line (line - start + 2), i.e. text line (line - start + 3) counting the header.
    position = int(found["line"]) - int(found["start"]) + 3
    if 2 <= position <= len(lines) and lines[position - 1].strip():
        frame["call_line"] = position
        frame["call_text"] = lines[position - 1].strip()
    return frame
