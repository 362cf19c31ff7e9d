"""What to show for a computation's code, including when Dask sent none."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["CODE_NOT_CAPTURED", "code_note"]

# Dask's client sends code only when this setting is above 0 (its default is 0), and
# it is read in the client's process: a scheduler preload cannot turn it on.
CODE_NOT_CAPTURED = (
    "code not captured: set distributed.diagnostics.computations.nframes to 1 or more "
    "in the client's dask config (e.g. dask.config.set("
    '{"distributed.diagnostics.computations.nframes": 2}) before compute), '
    "or call daskscope.register(client), which does it"
)


def code_note(code: Sequence[str] | None) -> str | None:
    """None when the computation has code to show, else why it has none and the fix."""
    return None if code else CODE_NOT_CAPTURED
