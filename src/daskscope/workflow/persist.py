"""Saving and loading a run: versioned JSON that keeps tuple keys and epoch times.

JSON has no tuple keys, so span metrics are stored as ``[[key parts], value]`` pairs and
rebuilt as tuples on load; times are epoch seconds written with full float precision.
The file is strict JSON: no ``NaN`` or ``Infinity`` tokens.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from daskscope.workflow.chunk import Chunk
from daskscope.workflow.renamed import renamed_in_row
from daskscope.workflow.run import WorkflowRun

__all__ = [
    "FORMAT",
    "VERSION",
    "load_run",
    "resolve_path",
    "run_from_dict",
    "run_to_dict",
    "save_run",
]

FORMAT = "daskscope-workflow-run"
VERSION = 1
_SUFFIX = ".json"


def resolve_path(path: str | os.PathLike[str]) -> Path:
    """``runs/ttbar`` and ``runs/ttbar.json`` name the same file."""
    p = Path(path)
    return p if p.suffix == _SUFFIX else p.with_name(p.name + _SUFFIX)


def run_to_dict(run: WorkflowRun) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "version": VERSION,
        "run_id": run.run_id,
        "name": run.name,
        "backend": run.backend,
        "started_at": run.started_at,
        "stopped_at": run.stopped_at,
        "wall_time_s": run.wall_time_s,
        "metrics": run.metrics,
        "chunk_metrics": [chunk.to_wire() for chunk in run.chunks],
        "tracking_data": run.tracking_data,
        "span_metrics": [[list(k), v] for k, v in run.span_metrics.items()],
        "sections": run.sections,
        "coffea_report": run.coffea_report,
        "info": run.info,
        "status": run.status,
        "error": run.error,
    }


def run_from_dict(data: dict[str, Any]) -> WorkflowRun:
    if data.get("format") != FORMAT:
        raise ValueError("not a saved daskscope workflow run (no 'format' marker)")
    version = data.get("version")
    if not isinstance(version, int) or version > VERSION:
        raise ValueError(
            f"saved with a newer daskscope (format version {version!r}, this one reads up "
            f"to {VERSION}); upgrade daskscope: pip install -U daskscope"
        )
    # a file saved before a metric was renamed reads under today's name
    data = renamed_in_row(data)
    return WorkflowRun(
        run_id=data["run_id"],
        name=data["name"],
        backend=data["backend"],
        started_at=data["started_at"],
        stopped_at=data["stopped_at"],
        wall_time_s=data["wall_time_s"],
        metrics=data["metrics"],
        chunks=[Chunk.from_wire(chunk) for chunk in data["chunk_metrics"]],
        tracking_data=data["tracking_data"],
        span_metrics={tuple(k): v for k, v in data["span_metrics"]},
        sections=data["sections"],
        coffea_report=data["coffea_report"],
        info=data["info"],
        status=data.get("status", "ok"),
        error=data.get("error"),
    )


def save_run(run: WorkflowRun, path: str | os.PathLike[str]) -> Path:
    """Write ``run`` to ``path`` (``.json`` added when missing); returns the file."""
    target = resolve_path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    # strict JSON: a run holds plain values (chunk fields and derived metrics are made
    # plain when measured); a float that is not a number elsewhere is written as null
    tmp.write_text(json.dumps(_finite(run_to_dict(run)), indent=1, allow_nan=False))
    tmp.replace(target)  # never leave half a file behind
    return target


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def load_run(path: str | os.PathLike[str]) -> WorkflowRun:
    target = resolve_path(path)
    return run_from_dict(json.loads(target.read_text()))
