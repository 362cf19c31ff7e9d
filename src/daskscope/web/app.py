"""The dashboard application: pages and their JSON twins over one store."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import Depends, FastAPI
from starlette.middleware.gzip import GZipMiddleware

from daskscope.store import Store, open_store
from daskscope.web import errors
from daskscope.web.admission import Admission
from daskscope.web.alerts import alert_settings, alerts_running
from daskscope.web.auth import authenticate
from daskscope.web.auth import pages as login_pages
from daskscope.web.connections import ConnectionTrust
from daskscope.web.limits import BodyLimit
from daskscope.web.render import environment
from daskscope.web.routes import (
    account,
    advice,
    alerts,
    apidocs,
    assets,
    audit,
    clusters,
    compare,
    computation,
    costs,
    exports,
    ingest,
    metrics,
    reports,
    runs,
    timeline,
)
from daskscope.web.security import SecurityMiddleware, allowed_hosts

__all__ = ["WORKER_APP_ENV", "create_app", "create_worker_app"]

API_PREFIX = "/api/v1"
#: The route modules, each with its pages (``pages``) and its JSON under
#: :data:`API_PREFIX` (``api``), in the order the OpenAPI document lists them
ROUTES = (
    assets, apidocs, account, clusters, runs, reports, ingest, compare, exports,
    timeline, advice, computation, costs, audit, metrics, alerts,
)  # fmt: skip


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    # background work of the server process: the alert rules' evaluation and delivery
    async with alerts_running(app.state.store, app.state):
        yield


def create_app(
    database: str | Store | None = None, *, auth: bool = False, hosts: Iterable[str] = ()
) -> FastAPI:
    """An app serving the store at ``database`` (a URL, an open Store, or the
    configured default). The store is opened (and migrated) here, once. With ``auth``
    every route but the login page and static files needs a member's token. ``hosts``:
    the host it listens on, accepted in Host headers besides the loopback names."""
    store = database if isinstance(database, Store) else open_store(database)
    app = FastAPI(
        title="daskscope",
        summary="Performance analytics for Dask: clusters, spans, reports.",
        version="0.1.0",
        # FastAPI's own Swagger page loads its scripts from a CDN, and analysis facilities
        # are often offline: /api/docs serves them from a package (routes/apidocs.py).
        docs_url=None,
        redoc_url=None,
        dependencies=[Depends(authenticate)],
        lifespan=_lifespan,
    )
    alert_settings()  # a wrong rule stops the server here, with the rule named
    app.state.store = store
    app.state.alerts = None
    app.state.auth = auth
    app.state.bound_hosts = tuple(hosts)
    # fair between accounts only where there are accounts (web/admission.py)
    app.state.ingest_admission = Admission(per_account=auth)
    errors.install(app)
    # pages load plotly.js from the URL of its hash, immutable (routes/assets.py)
    environment().globals["plotly_url"] = assets.plotly_url
    app.include_router(login_pages)
    for module in ROUTES:
        app.include_router(module.pages)
        app.include_router(module.api, prefix=API_PREFIX)
    # After the routes: /static/common.js is a route (assets), the rest plain files
    static = Path(__file__).with_name("static")
    app.mount("/static", assets.StaticAssets(directory=static), name="static")
    # Outermost: Host, Origin, content type and CSRF checks before anything else runs
    app.add_middleware(SecurityMiddleware, hosts=allowed_hosts(hosts))
    # Outermost of all: bodies bounded before anything reads them (web/limits.py); the
    # CSRF check reads a form
    app.add_middleware(BodyLimit)
    # Outside the checks above, so that their refusals reach it too: a connection that
    # carried no verified token or session is closed after its answer (web/connections.py)
    app.add_middleware(ConnectionTrust, auth=auth)
    # Pages, JSON and static files compressed (plotly.min.js is compressed once, by its
    # route); level 6: nearly level 9's size for far less time on a large page
    app.add_middleware(GZipMiddleware, minimum_size=1000, compresslevel=6)
    return app


#: What ``daskscope serve --workers N`` hands its worker processes: the arguments of
#: :func:`create_app` as JSON (the database URL and keyword options).
WORKER_APP_ENV = "DASKSCOPE_SERVE_APP"


def create_worker_app() -> FastAPI:
    """uvicorn's app factory for ``serve --workers N``: each worker process builds its
    own app, with its own connection pool, from the arguments its parent left in the
    environment (:data:`WORKER_APP_ENV`)."""
    import gc
    import json
    import os

    arguments = json.loads(os.environ[WORKER_APP_ENV])
    app = create_app(arguments.pop("database"), **arguments)
    # As in a single-process serve: what exists now lives as long as the process.
    gc.freeze()
    return app
