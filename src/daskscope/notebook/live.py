"""A :class:`~daskscope.workflow.collector.MetricsCollector` shown in a notebook.

``display(collector)`` (or a collector as a cell's last expression) shows it as it is:
not started yet, running (the wall time so far, the run's fine metrics so far, which
the Dask backend's scheduler holds for its span, and the chunks that reached this
process), or finished (its run, as ``daskscope run`` shows it). With ipywidgets in a
kernel, the output is a widget that a daemon thread redraws every second until the run
has finished (and the collector is gone or finished: the thread ends then); front ends
without widgets (VS Code's renderer without the extension, a saved notebook) show the
HTML snapshot that comes beside it. Without ipywidgets: the snapshot alone.

The collector calls :func:`collector_bundle` from its ``_repr_mimebundle_`` when shown:
the workflow package never imports this module itself.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from typing import Any

from daskscope import config
from daskscope.format import count_text, duration_text
from daskscope.notebook.dashboard import dashboard
from daskscope.notebook.html import escape, frame
from daskscope.notebook.render import run_html, run_text
from daskscope.views.run import RunView, run_view
from daskscope.workflow.run import WorkflowRun

#: a :class:`~daskscope.workflow.collector.MetricsCollector` (not imported: the collector
#: imports this module when shown, and imports flow one way)
MetricsCollector = Any

__all__ = ["REFRESH_S", "collector_bundle", "collector_html", "collector_text", "live_widgets"]

logger = logging.getLogger("daskscope")

#: seconds between two redraws of a live collector's widget
REFRESH_S = 1.0
_WIDGET = "application/vnd.jupyter.widget-view+json"
#: the widgets showing each collector (for code that wants to read what is shown)
_shown: weakref.WeakKeyDictionary[Any, list[Any]] = weakref.WeakKeyDictionary()


def _state(collector: MetricsCollector) -> str:
    """ "finished", "running" (from its enter until its run is made: the exit's wait for
    the last fine metrics included), "off" (``enabled=False``) or "not started"."""
    if collector.run is not None:
        return "finished"
    if not collector.enabled:
        return "off"
    entered = hasattr(collector, "_t0")  # set by __enter__
    return "running" if entered else "not started"


def _live_run(collector: MetricsCollector) -> tuple[RunView, str]:
    """The run so far as a view (status "running"), and what it says of the chunks."""
    now = time.time()
    started = float(getattr(collector, "_started_at", now))
    backend = collector.backend
    span_metrics, on_scheduler = _span_so_far(collector)
    metrics: dict[str, Any] = {}
    parser = type(backend).parser if backend is not None else None
    if span_metrics and parser is not None:
        metrics = dict(parser(span_metrics, ()))
    chunks = sorted(collector._chunks.values(), key=lambda c: (c.started_at or 0, c.chunk_id))
    run = WorkflowRun(
        run_id=collector.id,
        name=collector.name,
        backend=backend.name if backend is not None else "off",
        started_at=started,
        stopped_at=now,
        wall_time_s=max(now - started, 0.0),
        metrics=metrics,
        chunks=chunks,
        span_metrics=span_metrics,
        info={"status": "running", "cluster_id": None},
    )
    said = f"running for {duration_text(run.wall_time_s)}"
    if on_scheduler is not None:
        said += (
            f"; {count_text(on_scheduler)} chunks reached the scheduler so far "
            "(their figures come here when the run ends)"
        )
    return run_view(run), said


def _span_so_far(collector: MetricsCollector) -> tuple[dict[tuple[Any, ...], float], int | None]:
    """The fine metrics the scheduler holds for the run's span so far, and the chunks
    it has received (Dask backend; nothing for others, or when asking fails)."""
    backend = collector.backend
    span_id = getattr(backend, "span_id", None)
    client = getattr(backend, "client", None)
    if span_id is None or client is None:
        return {}, None
    from daskscope.workflow.backends import scheduler_side

    try:
        pairs = client.run_on_scheduler(scheduler_side.span_metrics, span_id) or []
        seen = client.run_on_scheduler(scheduler_side.watch_metrics, collector.id, span_id)
    except Exception as exc:  # the cluster closing under a redraw: show what we have
        logger.debug("daskscope: live figures of run %s: %s", collector.id, exc)
        return {}, None
    return {tuple(k): float(v) for k, v in pairs}, (int(seen[2]) if seen else 0)


def _dashboard_of(collector: MetricsCollector) -> Any:
    run = collector.run
    if run is None or not collector.store:
        return None
    url = collector.database or run.info.get("database") or config.database_url()
    return dashboard(f"/runs/{run.run_id}", str(url))


def collector_html(collector: MetricsCollector) -> str:
    """The collector as it is now, in HTML."""
    state = _state(collector)
    if state == "finished":
        assert collector.run is not None
        return run_html(run_view(collector.run), _dashboard_of(collector))
    if state == "running":
        view, said = _live_run(collector)
        return run_html(view, None, live_note=said, live=True)
    if state == "off":
        words = "measurement is off for this collector (<code>enabled=False</code>)"
    else:
        words = (
            "not measuring yet: run the work inside <code>with collector:</code>; this "
            "output follows it while it runs"
        )
    body = (
        f"<h3>daskscope · run {escape(collector.name)}"
        f' <span class="ds-badge" data-state="{state}">{state}</span></h3>'
        f'<p class="ds-muted">{words}</p>'
    )
    return frame(body, name="run")


def collector_text(collector: MetricsCollector) -> str:
    state = _state(collector)
    if state == "finished":
        assert collector.run is not None
        return run_text(run_view(collector.run), _dashboard_of(collector))
    if state == "running":
        view, said = _live_run(collector)
        return run_text(view, None) + f"\n  {said}"
    if state == "off":
        return f"daskscope run {collector.name}: measurement off (enabled=False)"
    return f"daskscope run {collector.name}: not started (use `with collector:`)"


def _in_kernel() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def collector_bundle(collector: MetricsCollector) -> dict[str, Any]:
    """What a notebook shows of the collector: text and HTML; and, while the run is to
    come or running and ipywidgets is there, a widget kept up to date."""
    html = collector_html(collector)
    bundle: dict[str, Any] = {"text/plain": collector_text(collector), "text/html": html}
    if _state(collector) in ("finished", "off") or not _in_kernel():
        return bundle
    try:
        import ipywidgets  # type: ignore[import-untyped]
    except ImportError:
        return bundle
    widget = ipywidgets.HTML(value=html)
    _shown.setdefault(collector, []).append(widget)
    bundle[_WIDGET] = widget._repr_mimebundle_()[_WIDGET]
    follow = threading.Thread(
        target=_follow, args=(weakref.ref(collector), widget), name="daskscope-notebook"
    )
    follow.daemon = True
    follow.start()
    return bundle


def live_widgets(collector: MetricsCollector) -> list[Any]:
    """The widgets showing the collector (empty without ipywidgets or a kernel)."""
    return list(_shown.get(collector, ()))


def _follow(ref: weakref.ReferenceType[Any], widget: Any) -> None:
    """Redraw ``widget`` every :data:`REFRESH_S` until the run has finished (one last
    redraw then) or the collector is gone."""
    while True:
        time.sleep(REFRESH_S)
        collector = ref()
        if collector is None:
            return
        try:
            finished = _state(collector) == "finished"
            html = collector_html(collector)
        except Exception:
            logger.debug("daskscope: redrawing a collector's widget failed", exc_info=True)
            continue
        finally:
            del collector
        if widget.value != html:
            widget.value = html
        if finished:
            return
