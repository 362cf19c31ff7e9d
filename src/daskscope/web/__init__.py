"""The web dashboard (FastAPI + Jinja2): ``daskscope serve`` runs it.

Imports fastapi: install the ``web`` extra (``pip install 'daskscope[web]'``).
"""

from __future__ import annotations

from daskscope.web.app import create_app

__all__ = ["create_app"]
