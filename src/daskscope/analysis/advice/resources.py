"""Advice rules: resources (issue 14)."""

from __future__ import annotations
