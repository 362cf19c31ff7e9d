"""Advice rules: scheduling (issue 14)."""

from __future__ import annotations
