"""``daskscope serve`` (the web dashboard) and ``daskscope upload-report``."""

from __future__ import annotations

import gc
import os
import sys
from pathlib import Path
from typing import Any

import click

from daskscope.format import bytes_text

__all__ = ["run_server", "serve_command", "upload_report_command"]


def _need_web() -> None:
    try:
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        raise click.ClickException(
            "the dashboard needs the web extra: pip install 'daskscope[web]'"
        ) from None


def _open_browser(url: str) -> None:
    # Only where a graphical browser can exist: on a headless box webbrowser would
    # start a text browser in this terminal.
    if (
        sys.platform in ("darwin", "win32")
        or os.environ.get("DISPLAY")
        or os.environ.get("WAYLAND_DISPLAY")
    ):
        import webbrowser

        webbrowser.open(url)


LOOPBACK = ("127.0.0.1", "::1", "localhost")


def auth_wanted(choice: bool | None, host: str) -> bool:
    """Authentication: as asked, else from config ``daskscope.auth`` (``auto``: on
    unless the server listens on loopback only, the single-user embedded mode)."""
    if choice is not None:
        return choice
    from daskscope import config

    setting = str(config.get("auth", "auto")).lower()
    if setting == "auto":
        return host not in LOOPBACK
    return setting in ("true", "1", "yes", "on")


#: How long uvicorn's supervisor waits for a worker process to answer (see run_server)
WORKER_HEALTHCHECK_SECONDS = 60


def run_server(
    database: str | None,
    host: str,
    port: int,
    *,
    open_browser: bool = False,
    auth: bool | None = None,
    workers: int = 1,
) -> None:
    """Serve the dashboard until interrupted (Ctrl-C); ``workers`` > 1 runs that many
    server processes on one port (uvicorn's supervisor restarts any that dies)."""
    _need_web()
    import uvicorn

    from daskscope.web import create_app
    from daskscope.web.admission import bound_allocator
    from daskscope.web.connections import max_connections, raise_file_limit

    # Before anything opens files or starts threads; worker processes inherit both
    files_before, files = raise_file_limit()
    bound_allocator()

    app = create_app(database, auth=auth_wanted(auth, host), hosts=(host,))
    shown = "localhost" if host in ("127.0.0.1", "::1") else host
    url = f"http://{shown}:{port}/"
    mode = "tokens required" if app.state.auth else "no authentication"
    click.echo(
        f"daskscope dashboard of {app.state.store.display_url} at {url} ({mode}; Ctrl-C stops it)"
    )
    raised = f", raised from {files_before}" if files != files_before else ""
    click.echo(
        f"open files: at most {files} a process{raised}; connections: at most "
        f"{max_connections()} a process (daskscope.serve.max-connections)"
    )
    if open_browser:
        _open_browser(url)
    # What exists now (modules, the app, the store) lives as long as the process: keep
    # it out of the collector's full passes, which ingest's many small objects trigger.
    gc.freeze()
    target: Any = app
    if workers > 1:
        target = _worker_app(database, app)
    # Keep connections open longer than collectors wait between flushes: a server that
    # closes one just as a client reuses it makes the client see a dropped request.
    uvicorn.run(
        target,
        factory=workers > 1,
        workers=workers,
        host=host,
        port=port,
        log_level="warning",
        timeout_keep_alive=75,
        # uvicorn's supervisor kills a worker that does not answer its health check in
        # time, and starts another; a new worker answers only once it has imported
        # everything, which on a busy host (or without bytecode caches) took more than
        # uvicorn's default 5 s: each replacement was killed again, a restart loop that
        # cost a core's fifth in a 2-process benchmark (docs/benchmarks.md)
        timeout_worker_healthcheck=WORKER_HEALTHCHECK_SECONDS,
        **_connection_limits(),
    )


def _connection_limits() -> dict[str, Any]:
    """Bounded connections (web/connections.py): a request head must arrive within
    ``serve.header-timeout``, at most ``serve.max-connections`` are open (the protocol
    keeps them there, closing idle ones first; uvicorn's 503 past ``limit_concurrency``
    is then only for requests still running after their connection left), a burst of
    accepts is bounded, and a request head holds at most 16 KiB."""
    from daskscope.web.connections import ACCEPT_BACKLOG, GuardedH11Protocol, max_connections

    return {
        "http": GuardedH11Protocol,
        "limit_concurrency": max_connections() + 1,
        "backlog": ACCEPT_BACKLOG,
        "h11_max_incomplete_event_size": 16 * 1024,
    }


def _worker_app(database: str | None, app: Any) -> str:
    """The import string of the app factory each worker process calls, with this app's
    arguments left for it in the environment; this process only supervises."""
    import json

    from daskscope import config
    from daskscope.web.app import WORKER_APP_ENV

    arguments = {
        "database": config.database_url(database),
        "auth": app.state.auth,
        "hosts": list(app.state.bound_hosts),  # for the Host check
    }
    os.environ[WORKER_APP_ENV] = json.dumps(arguments)
    app.state.store.close()  # the schema is checked and migrated; workers open their own
    return "daskscope.web.app:create_worker_app"


@click.command("serve")
@click.option("--database", metavar="URL", help="Store URL (overrides the global --database).")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=click.IntRange(0, 65535), default=8787, show_default=True)
@click.option(
    "--auth/--no-auth",
    default=None,
    help="Require members' tokens (default: config daskscope.auth, 'auto' = on unless "
    "--host is a loopback address).",
)
@click.option(
    "--workers",
    type=click.IntRange(1, 256),
    default=1,
    show_default=True,
    help="Server processes sharing the port (docs/server.md: scaling out).",
)
@click.pass_obj
def serve_command(
    state: Any, database: str | None, host: str, port: int, auth: bool | None, workers: int
) -> None:
    """Serve the web dashboard: account and cluster analytics, reports, runs."""
    run_server(database or state.database, host, port, auth=auth, workers=workers)


@click.command("upload-report")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--cluster", "cluster", metavar="ID", help="Its cluster (id or prefix).")
@click.pass_obj
def upload_report_command(state: Any, file: Path, cluster: str | None) -> None:
    """Keep a Dask performance report (HTML) with the store, shown under /reports."""
    from daskscope.store import open_store
    from daskscope.store.reports import NotAReport, ReportTooLarge, check_report, save_report

    content = file.read_bytes()
    try:
        check_report(content, file.name)  # the same guard as the page's upload form
    except NotAReport as exc:
        raise click.BadParameter(str(exc), param_hint="FILE") from None
    with open_store(state.database) as store:
        cluster_id = store.resolve_cluster_id(cluster) if cluster else None
        try:
            info = save_report(store, content, name=file.name, cluster_id=cluster_id)
        except ReportTooLarge as exc:
            raise click.ClickException(f"{exc} (config daskscope.max-report-bytes)") from None
    size = bytes_text(info["size"])
    click.echo(f"report {info['id']} stored ({size}); open /reports/{info['id']}")
