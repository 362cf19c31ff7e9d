"""The user-facing calls: attach daskscope to a cluster and ask it to write now.

Thin on purpose: the scheduler plugin does the work; these only configure it and talk to
it through the scheduler's RPC handlers. Importing this module never imports the store.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

import dask.config

from daskscope import config

if TYPE_CHECKING:
    from distributed import Client

__all__ = ["NotRecording", "flush", "register"]

_NFRAMES = "distributed.diagnostics.computations.nframes"


def _client(client: Client | None) -> Client:
    if client is not None:
        return client
    from distributed import default_client

    found: Client = default_client()
    return found


def _scheduler(client: Client) -> Any:
    """The client's connection to its scheduler: daskscope's handlers are called on it."""
    scheduler = client.scheduler
    if scheduler is None:
        raise RuntimeError("the Dask client is not connected to a scheduler yet")
    return scheduler


def register(
    client: Client | None = None,
    *,
    database: str | None = None,
    name: str | None = None,
    account: str | None = None,
    user: str | None = None,
    **settings: Any,
) -> Any:
    """Record the client's cluster into the daskscope store; returns the cluster id.

    Settings come from the ``daskscope`` section of dask's config, resolved here in the
    client's process, and keyword arguments override them (``database`` is a SQLAlchemy
    URL). Registering twice keeps the first recorder, and warns when the second asked for
    another store. Raises :class:`NotRecording` when the recorder could not start on the
    scheduler. With an asynchronous client, await the result.
    """
    from daskscope.collector.plugin import DaskscopePlugin

    client = _client(client)
    if name is None and not config.get("cluster-name") and client.cluster is not None:
        # e.g. "LocalCluster 6f2d9a1c": more telling than the scheduler's uuid
        name = f"{type(client.cluster).__name__} {client.cluster.name}"
    frames = int(config.get("code-frames") or 0)
    if frames > 0 and not dask.config.get(_NFRAMES, 0):
        # Dask sends the caller's code with each compute() only when asked to; reading
        # it costs the client 0.1 to 2 ms a compute() (docs/configuration.md): 0 turns
        # it off
        dask.config.set({_NFRAMES: frames})
    plugin = DaskscopePlugin(
        config.CollectorSettings.from_config(
            database=database, cluster_name=name, account=account, user=user, **settings
        )
    )
    return client.sync(_register, client, plugin)


class NotRecording(RuntimeError):
    """The scheduler has no working daskscope recorder after ``register``."""


async def _register(client: Client, plugin: Any) -> str:
    from distributed.protocol.pickle import dumps

    # The scheduler's own handler: idempotent, so a second register keeps the first recorder
    scheduler = _scheduler(client)
    await scheduler.register_scheduler_plugin(
        plugin=dumps(plugin), name=plugin.name, idempotent=True
    )
    try:
        info = await scheduler.daskscope_info()
    except Exception as exc:
        raise NotRecording(
            f"daskscope registered its recorder but the scheduler does not answer for it "
            f"({type(exc).__name__}: {exc}); the scheduler's log says why"
        ) from exc
    if not info.get("recording", True):
        raise NotRecording(
            f"daskscope could not start recording on the scheduler: {info.get('start_error')}. "
            "Dask goes on unrecorded; fix the setting named above and register again."
        )
    wanted, recording = plugin.destination, info.get("destination") or info.get("database")
    if recording and wanted != recording:
        # e.g. a preload (or an earlier register) already records into another store
        warnings.warn(
            f"daskscope is already recording this cluster into {recording}; "
            f"{wanted} is not used. To record into another store, start the cluster with "
            "that setting (daskscope.database or daskscope.server in its dask config).",
            stacklevel=4,
        )
    return str(info["cluster_id"])


def flush(
    client: Client | None = None, *, wait_for_metrics: bool = True, timeout: float = 10.0
) -> Any:
    """Write everything recorded so far, and return the collector's status.

    With ``wait_for_metrics`` the scheduler first waits (at most ``timeout`` seconds) for
    every worker's next heartbeats, which carry the fine performance metrics of tasks that
    just finished.
    """
    client = _client(client)
    return client.sync(
        _scheduler(client).daskscope_flush, wait_for_metrics=wait_for_metrics, timeout=timeout
    )
