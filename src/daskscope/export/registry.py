"""Every export format, in one table: the CLI (:mod:`daskscope.cli.export`) and the
routes (:mod:`daskscope.web.routes.exports`) loop over it, a command and a route per
name, the formats of a name its ``--format`` choices (the first its default).

A new format is a module of this package with a class that has what
:class:`~daskscope.export.exporter.Exporter` says, and its line here.
"""

from __future__ import annotations

from dataclasses import dataclass

from daskscope.export.exporter import Exporter, Sender
from daskscope.export.otlp import OtlpJson, OtlpProtobuf
from daskscope.export.perfetto import PerfettoJson
from daskscope.export.perfetto_proto import PerfettoProto
from daskscope.export.speedscope import Speedscope

__all__ = ["EXPORTERS", "Family", "families", "family"]

EXPORTERS: tuple[Exporter, ...] = (
    PerfettoJson(),
    PerfettoProto(),
    Speedscope(),
    OtlpProtobuf(),
    OtlpJson(),
)


@dataclass(frozen=True)
class Family:
    """The formats of one name: one command, one route."""

    name: str
    formats: tuple[Exporter, ...]

    @property
    def default(self) -> Exporter:
        return self.formats[0]

    @property
    def help(self) -> str:
        return self.default.help

    @property
    def summary(self) -> str:
        """The help's first paragraph, on one line."""
        return " ".join(self.help.split("\n\n")[0].split())

    @property
    def options(self) -> tuple[str, ...]:
        return self.default.options

    @property
    def format_help(self) -> str:
        """What each format is: ``A, or B.``"""
        return ", or ".join(f.description for f in self.formats) + "."

    @property
    def sender(self) -> Sender | None:
        """The format that can be sent to a service (``--endpoint``), if one can."""
        return next((f for f in self.formats if isinstance(f, Sender)), None)

    def format(self, name: str) -> Exporter:
        return next(f for f in self.formats if f.format == name)


def families() -> list[Family]:
    """The exporters by name, in the table's order."""
    names = dict.fromkeys(e.name for e in EXPORTERS)
    return [Family(n, tuple(e for e in EXPORTERS if e.name == n)) for n in names]


def family(name: str) -> Family:
    """The formats of ``name``; KeyError when there is none."""
    for found in families():
        if found.name == name:
            return found
    raise KeyError(name)
