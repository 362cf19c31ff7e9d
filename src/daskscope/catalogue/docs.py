"""The reference tables of ``docs/metrics.md``, written from the catalogue.

Each table sits between ``<!-- catalogue:<name>:begin -->`` and
``<!-- catalogue:<name>:end -->``, one pair per scope, one for the fine-metric
activities and one for the task stream's actions; the text around them is written by
hand and left as it is.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from daskscope.catalogue import ACTIVITIES, SCOPES, TASK_ACTIONS, figures

__all__ = ["TABLES", "render_docs", "table", "write_docs"]

#: The marked tables: every scope, then the activities and the task stream's actions
TABLES: tuple[str, ...] = (*SCOPES, "activities", "task-actions")


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def table(name: str) -> str:
    """The markdown table of one scope's figures, of the activities or of the task
    stream's actions."""
    if name in ("activities", "task-actions"):
        head = "activity" if name == "activities" else "action"
        lines = [f"| {head} | colour | units | meaning |", "|---|---|---|---|"]
        lines += [
            f"| `{a.name}` | `{a.colour}` | {', '.join(a.units)} | {_cell(a.meaning)} |"
            for a in (ACTIVITIES if name == "activities" else TASK_ACTIONS)
        ]
        return "\n".join(lines)
    lines = ["| figure | unit | formula | source | better |", "|---|---|---|---|---|"]
    for f in figures(name):
        lines.append(
            f"| {_cell(f.label)} (`{f.key}`) | {f.unit} | {_cell(f.formula)} "
            f"| {_cell(f.source)} | {f.better or ''} |"
        )
    return "\n".join(lines)


def _pattern(name: str) -> re.Pattern[str]:
    begin, end = (re.escape(f"<!-- catalogue:{name}:{m} -->") for m in ("begin", "end"))
    return re.compile(f"({begin}).*?({end})", re.DOTALL)


def _filled_with(body: str) -> Callable[[re.Match[str]], str]:
    return lambda m: f"{m.group(1)}\n{body}\n{m.group(2)}"


def render_docs(text: str) -> str:
    """``text`` with every marked table written anew; ValueError naming a table whose
    markers are missing or doubled (each must appear once so no figure goes unlisted)."""
    for name in TABLES:
        pattern = _pattern(name)
        found = len(pattern.findall(text))
        if found != 1:
            raise ValueError(
                f"docs need one <!-- catalogue:{name}:begin --> ... "
                f"<!-- catalogue:{name}:end --> pair, found {found}"
            )
        text = pattern.sub(_filled_with(table(name)), text)
    return text


def write_docs(path: str | Path) -> bool:
    """Rewrite the tables of the file at ``path``; True if it changed."""
    path = Path(path)
    old = path.read_text(encoding="utf-8")
    new = render_docs(old)
    if new != old:
        path.write_text(new, encoding="utf-8")
    return new != old
