"""Which sink for a destination: :func:`sink_for`, the one place that knows every sink
(the recorder and the workflow code both get theirs from it)."""

from __future__ import annotations

from pathlib import Path

from daskscope.collector.sink import Sink

__all__ = ["sink_for"]


def sink_for(
    *,
    database: str | None = None,
    server: str | None = None,
    token: str | None = None,
    spool_dir: str | Path | None = None,
    one_shot: bool = False,
) -> Sink:
    """The sink for a destination: the daskscope ``server`` (with ``token``, spooling in
    ``spool_dir`` while it is away) when one is given, else the store at ``database``
    (None: the configured one). Nothing is opened yet.

    ``one_shot``: a caller that writes once and reports failures itself (a finished
    workflow run) rather than a recorder that keeps records and retries; its SQLite
    store is written in this process, not by a child process."""
    if server:
        from daskscope import config
        from daskscope.collector.http_sink import HttpSink

        return HttpSink(server, token, spool_dir or config.default_spool_dir())
    from daskscope.collector.store_sink import StoreSink

    return StoreSink(database, isolated=not one_shot)
