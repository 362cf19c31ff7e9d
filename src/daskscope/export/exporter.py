"""What every export format is: an :class:`Exporter`, which renders an
:class:`~daskscope.views.export.ExportView` into a file's bytes or text.

The CLI (``daskscope export NAME``) and the routes (``/api/v1/clusters/ID/export/NAME``)
are made from these declarations, one command and one route per ``name``; the formats of
one name are its ``--format``/``?format=`` choices, the first registered its default
(:mod:`daskscope.export.registry`). A format that can also be sent to a service (OTLP to
a collector) is a :class:`Sender` as well.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol, runtime_checkable

from daskscope.views.export import ExportView

__all__ = ["OPTIONS", "Exporter", "Sender"]

#: the options a format may take, each the same on the command line and in the URL:
#: "computation" (only its executions / profile), "window" (``start`` and ``stop``,
#: epoch seconds), "groups" (a span per task group)
OPTIONS = ("computation", "window", "groups")


class Exporter(Protocol):
    """One file format.

    ``render(view)`` raises :class:`~daskscope.views.export.ExportError` (nothing of the
    kind recorded, ...) before it returns; the chunks it returns are then the file, one
    after the other: text when ``binary`` is false, bytes when it is true."""

    #: the command and the URL's last part: ``daskscope export NAME``
    name: str
    #: which of the name's formats this is (``--format``, ``?format=``)
    format: str
    #: what the format is, in a few words (the help of ``--format``)
    description: str
    #: the command's help; its first line titles the route in the API's docs
    help: str
    media_type: str
    #: the file's extension (without the dot); the file is
    #: ``daskscope-CLUSTER[-COMPUTATION]-SUBJECT.EXTENSION`` (:func:`.common.file_name`)
    extension: str
    #: what the file holds, as its name says it: "timeline", "profile", "trace"
    subject: str
    binary: bool
    #: written page by page: the route streams it rather than sending it whole
    streamed: bool
    #: which of :data:`OPTIONS` it takes
    options: tuple[str, ...]

    def render(self, view: ExportView) -> Iterator[str] | Iterator[bytes]: ...


@runtime_checkable
class Sender(Protocol):
    """A format that can also be sent to a service (``--endpoint``)."""

    #: the help of ``--endpoint``: what service, and how its URL is given
    endpoint_help: str

    def send(self, view: ExportView, endpoint: str) -> str:
        """Send the export; returns what was sent, in a sentence. Raises ExportError
        with what went wrong."""
        ...
