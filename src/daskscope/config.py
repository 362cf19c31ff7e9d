"""daskscope's settings, kept in dask's own config system under the ``daskscope`` key.

Defaults ship in ``daskscope.yaml`` beside this module; users override them in
``~/.config/dask/*.yaml`` or with ``DASK_DASKSCOPE__<KEY>`` environment variables.
"""

from __future__ import annotations

import copy
import getpass
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dask.config
import yaml
from dask.utils import parse_timedelta

__all__ = ["CollectorSettings", "default_database_url", "get"]

_DEFAULTS = Path(__file__).with_name("daskscope.yaml")
_MISSING = object()

with _DEFAULTS.open() as f:
    #: The shipped defaults, kept apart too: dask's live config can lose them (see get).
    PACKAGE_DEFAULTS: dict[str, Any] = yaml.safe_load(f)
dask.config.update_defaults(copy.deepcopy(PACKAGE_DEFAULTS))


def get(key: str, default: Any = None) -> Any:
    """A value from the ``daskscope`` namespace of dask's config, over the shipped defaults.

    The live config can lose the defaults registered at import: distributed's test
    harness (``gen_cluster``) replaces it with a snapshot taken before daskscope was
    imported, and code may clear it. So a key that is missing or null in the live config
    takes the shipped default, and a section (a dict) is the shipped one with the live
    values merged over it. ``default`` applies only where neither has the key."""
    live = _lookup(dask.config.config, f"daskscope.{key}")
    shipped = _lookup(PACKAGE_DEFAULTS, f"daskscope.{key}")
    if isinstance(live, dict) and isinstance(shipped, dict):
        return dask.config.merge(shipped, live)
    for value in (live, shipped):
        if value is not _MISSING and value is not None:
            return value
    return default if live is _MISSING and shipped is _MISSING else None


def _lookup(tree: dict[str, Any], key: str) -> Any:
    try:
        return dask.config.get(key, _MISSING, config=tree)
    except (TypeError, KeyError, AttributeError):  # a section replaced by a scalar
        return _MISSING


def default_database_url() -> str:
    """The embedded store: an SQLite file in the user's data directory."""
    import platformdirs

    path = Path(platformdirs.user_data_dir("daskscope")) / "daskscope.db"
    return f"sqlite:///{path}"


def default_spool_dir() -> str:
    import platformdirs

    return str(Path(platformdirs.user_cache_dir("daskscope")) / "spool")


def database_url(explicit: str | None = None) -> str:
    """The store URL: the explicit one, else config, else the embedded default."""
    return explicit or get("database") or default_database_url()


def os_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry, e.g. in some containers
        return os.environ.get("USER", "unknown")


def _duration(key: str, value: Any) -> float:
    """A setting's duration in seconds: a number, or text such as ``10s`` or ``500ms``
    (Dask's parser refuses negative ones)."""
    try:
        return float(parse_timedelta(value))
    except (TypeError, ValueError, KeyError) as exc:  # KeyError: an unknown unit
        raise ValueError(
            f"daskscope setting {key} must be a duration such as 10s or 500ms (or a "
            f"number of seconds), got {value!r}"
        ) from exc


@dataclass(frozen=True, slots=True)
class CollectorSettings:
    """Everything the scheduler-side collector needs, resolved once (it is pickled to
    the scheduler by ``register`` so that the client's config is what applies)."""

    database: str
    server: str | None
    token: str | None
    spool_dir: str
    account: str
    user: str
    cluster_name: str | None
    flush_interval: float
    #: how often a timed flush writes a task group that is still running
    progress_interval: float
    worker_sampling_interval: float
    profile_enabled: bool
    profile_interval: float
    max_code_chars: int
    max_errors: int
    max_traceback_chars: int
    max_buffered_records: int
    #: the task log: every task execution kept (issue 13)
    task_log_enabled: bool = True
    #: executions a task-log segment holds before it is sealed and encoded
    task_segment_executions: int = 50_000
    #: sealed segments waiting for the writer thread; more are dropped and counted
    task_max_pending_segments: int = 4
    #: how long a periodic flush leaves a buffer smaller than a segment unsealed
    task_seal_after: float = 30.0

    @classmethod
    def from_config(cls, **overrides: Any) -> CollectorSettings:
        values = dict(
            database=database_url(),
            server=get("server"),
            token=get("token"),
            spool_dir=get("spool-dir") or default_spool_dir(),
            account=get("account") or "default",
            user=get("user") or os_user(),
            cluster_name=get("cluster-name"),
            # durations are read below, with an error that names the setting
            flush_interval=get("flush-interval"),
            progress_interval=get("progress-interval"),
            worker_sampling_interval=get("worker-sampling-interval"),
            profile_enabled=bool(get("profile.enabled")),
            profile_interval=get("profile.interval"),
            max_code_chars=int(get("max-code-chars")),
            max_errors=int(get("max-errors")),
            max_traceback_chars=int(get("max-traceback-chars")),
            max_buffered_records=int(get("max-buffered-records")),
            task_log_enabled=bool(get("tasks.enabled")),
            task_segment_executions=int(get("tasks.segment-executions")),
            task_max_pending_segments=int(get("tasks.max-pending-segments")),
            task_seal_after=get("tasks.seal-after"),
        )
        unknown = set(overrides) - set(values)
        if unknown:
            raise TypeError(
                f"unknown daskscope settings: {sorted(unknown)}; known: {sorted(values)}"
            )
        values.update({k: v for k, v in overrides.items() if v is not None})
        for key in ("task_segment_executions", "task_max_pending_segments"):
            if int(values[key]) < 1:
                raise ValueError(f"daskscope setting {key} must be at least 1, got {values[key]}")
        for key in ("flush_interval", "worker_sampling_interval", "profile_interval"):
            values[key] = _duration(key, values[key])
            if values[key] <= 0:
                raise ValueError(f"daskscope setting {key} must be positive, got {values[key]}")
        for key in ("task_seal_after", "progress_interval"):  # 0 allowed
            values[key] = _duration(key, values[key])
        return cls(**values)
