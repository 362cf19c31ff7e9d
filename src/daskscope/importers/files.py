"""Which file an import was given, and its contents decoded: the one place that reads
bytes. Every way a file can be wrong ends in :class:`BadImportFile`, which says what was
expected; nothing is written before a file has been read whole."""

from __future__ import annotations

import gzip
import time
import zlib
from pathlib import Path
from typing import Any

from daskscope.importers.errors import BadImportFile
from daskscope.importers.imported import Imported

__all__ = ["SUFFIXES", "BadImportFile", "read_import"]

#: what ``daskscope import`` accepts, by file name
SUFFIXES = (".msgpack", ".msgpack.gz", ".yaml", ".yaml.gz", ".yml", ".yml.gz", ".html", ".htm")
_EXPECTED = (
    "a client.dump_cluster_state() file (.msgpack, .msgpack.gz, .yaml, .yaml.gz) "
    "or a Dask performance_report HTML file (.html)"
)
_GZIP_MAGIC = b"\x1f\x8b"


def _kind(path: Path) -> tuple[str, bool]:
    """("msgpack" | "yaml" | "html", gzipped) from the file's name."""
    name = path.name.lower()
    gzipped = name.endswith(".gz")
    base = name[: -len(".gz")] if gzipped else name
    for suffix, kind in ((".msgpack", "msgpack"), (".yaml", "yaml"), (".yml", "yaml")):
        if base.endswith(suffix):
            return kind, gzipped
    if not gzipped and base.endswith((".html", ".htm")):
        return "html", False
    raise BadImportFile(f"{path.name}: not a file daskscope can import; expected {_EXPECTED}")


def _contents(path: Path, gzipped: bool) -> bytes:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise BadImportFile(f"{path}: no such file; expected {_EXPECTED}") from None
    except OSError as exc:
        raise BadImportFile(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if gzipped or data.startswith(_GZIP_MAGIC):
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise BadImportFile(
                f"{path.name}: not a whole gzip file ({exc}); expected {_EXPECTED}, "
                "as Dask wrote it"
            ) from None
    return data


def _decode_msgpack(path: Path, data: bytes) -> Any:
    import msgpack  # type: ignore[import-untyped]

    try:
        return msgpack.unpackb(data, strict_map_key=False)
    except Exception as exc:  # msgpack raises several unrelated types for bad data
        raise BadImportFile(
            f"{path.name}: not msgpack ({type(exc).__name__}: {exc}); expected the file "
            'client.dump_cluster_state(filename, format="msgpack") writes'
        ) from None


def _decode_yaml(path: Path, data: bytes) -> Any:
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        return yaml.load(data, Loader=loader)
    except yaml.YAMLError as exc:
        raise BadImportFile(
            f"{path.name}: not YAML ({' '.join(str(exc).split())}); expected the file "
            'client.dump_cluster_state(filename, format="yaml") writes'
        ) from None


def read_import(path: str | Path, *, now: float | None = None) -> Imported:
    """The records made of the file at ``path``. Raises BadImportFile."""
    path = Path(path)
    kind, gzipped = _kind(path)
    data = _contents(path, gzipped)
    imported_at = time.time() if now is None else now
    if kind == "html":
        from daskscope.importers.report import report_records

        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise BadImportFile(
                f"{path.name}: not UTF-8 text; expected a Dask performance_report HTML file"
            ) from None
        return report_records(text, file=path.name, imported_at=imported_at)
    from daskscope.importers.dump import dump_records

    state = _decode_msgpack(path, data) if kind == "msgpack" else _decode_yaml(path, data)
    return dump_records(state, file=path.name, format=kind, imported_at=imported_at)
