"""The public API is small and explicit; importing daskscope stays light for workers."""

from __future__ import annotations

import subprocess
import sys

import daskscope


def test_public_names() -> None:
    assert {"register", "flush", "dask_setup", "__version__"} <= set(daskscope.__all__)
    for name in daskscope.__all__:
        assert hasattr(daskscope, name), name


def test_import_does_not_pull_in_the_store_or_the_web() -> None:
    # Every Dask worker re-imports what the user's script imports.
    code = (
        "import sys, daskscope; "
        "heavy = [m for m in ('sqlalchemy', 'alembic', 'fastapi', 'plotly', 'coffea') "
        "if m in sys.modules]; print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
