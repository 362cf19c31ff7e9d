"""``daskscope spool ls|send|drop``: what a collector on this host could not deliver.

The spool holds batches waiting for the server (``waiting``), batches it refused for
good (``rejected``) and entries set aside because they could not be read
(``unreadable``). ``send`` posts them again, oldest first (with a new token after a
revocation, say); ``drop`` removes what the user chooses, and nothing else.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from daskscope.format import bytes_text, count_text, timestamp_text

__all__ = ["spool_group"]

_STATE_NAMES = {".batch": "waiting", ".rejected": "rejected", ".unreadable": "unreadable"}


def _directory(spool_dir: str | None) -> Path:
    from daskscope import config

    return Path(spool_dir or config.get("spool-dir") or config.default_spool_dir())


def _records(path: Path) -> int | None:
    import msgspec

    try:
        document = msgspec.json.decode(path.read_bytes())
    except (OSError, msgspec.DecodeError):
        return None
    records = document.get("records") if isinstance(document, dict) else None
    return len(records) if isinstance(records, list) else None


def _rows(directory: Path, states: set[str] | None = None) -> list[dict[str, Any]]:
    from daskscope.collector.spool import entries

    rows = []
    for state, path in entries(directory):
        name = _STATE_NAMES[state]
        if states is not None and name not in states:
            continue
        stat = path.stat()
        rows.append(
            {
                "name": path.name,
                "state": name,
                "folder": path.is_dir(),
                "bytes": None if path.is_dir() else stat.st_size,
                "records": None if path.is_dir() else _records(path),
                "modified": datetime.fromtimestamp(stat.st_mtime, UTC).isoformat(" ", "seconds"),
                "modified_at": stat.st_mtime,
            }
        )
    return rows


def _spool_dir_option(f: Any) -> Any:
    return click.option(
        "--spool-dir",
        metavar="DIR",
        help="The spool folder (default: config daskscope.spool-dir, else the user's cache).",
    )(f)


@click.group("spool")
def spool_group() -> None:
    """Batches a collector on this host could not deliver to the server."""


@spool_group.command("ls")
@_spool_dir_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def spool_ls(spool_dir: str | None, as_json: bool) -> None:
    """List waiting, rejected and unreadable batches, oldest first."""
    from rich.console import Console
    from rich.table import Table

    directory = _directory(spool_dir)
    rows = _rows(directory)
    if as_json:
        click.echo(json.dumps({"spool": str(directory), "entries": rows}, indent=2))
        return
    if not rows:
        click.echo(f"{directory}: nothing waits, nothing set aside")
        return
    table = Table(title=str(directory))
    for column in ("name", "state", "records", "bytes", "modified (UTC)"):
        table.add_column(column)
    for row in rows:
        what = "folder" if row["folder"] else "?"
        records = what if row["records"] is None else count_text(row["records"])
        modified = timestamp_text(row["modified_at"])
        table.add_row(row["name"], row["state"], records, bytes_text(row["bytes"]), modified)
    Console(width=None if sys.stdout.isatty() else 160).print(table)


def _states(**chosen: bool) -> set[str]:
    return {state for state, wanted in chosen.items() if wanted}


def _selected(directory: Path, names: tuple[str, ...], states: set[str]) -> list[Path]:
    rows = _rows(directory)
    known = {row["name"] for row in rows}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise click.BadParameter(
            f"no entry {', '.join(unknown)} in {directory}; see `daskscope spool ls`",
            param_hint="NAMES",
        )
    chosen = [r for r in rows if r["name"] in names or r["state"] in states]
    return [directory / r["name"] for r in chosen]


@spool_group.command("send")
@_spool_dir_option
@click.argument("names", nargs=-1)
@click.option("--server", metavar="URL", help="The server (default: config daskscope.server).")
@click.option(
    "--token",
    metavar="TOKEN",
    envvar="DASKSCOPE_TOKEN",
    show_envvar=True,
    help="The token to send with (default: config daskscope.token).",
)
@click.option("--rejected", is_flag=True, help="Also the batches the server refused.")
@click.option("--unreadable", is_flag=True, help="Also the entries set aside as unreadable.")
def spool_send(
    spool_dir: str | None,
    names: tuple[str, ...],
    server: str | None,
    token: str | None,
    rejected: bool,
    unreadable: bool,
) -> None:
    """Send batches to the server now, oldest first: NAMES, or every waiting one (and
    with --rejected/--unreadable those set aside), saying what each changed on the
    server: a batch older than what it holds changes nothing. Sent batches leave the
    spool; the first the server cannot take yet stops the run (exit status 1); one whose
    cluster is not on the server yet is kept and the rest sent (exit status 1)."""
    from daskscope import config
    from daskscope.collector.http_sink import HttpSink

    server = server or config.get("server")
    if not server:
        raise click.UsageError("no server: pass --server URL or set daskscope.server")
    directory = _directory(spool_dir)
    states = _states(rejected=rejected, unreadable=unreadable)
    paths = _selected(directory, names, states | (set() if names else {"waiting"}))
    sink = HttpSink(server, token or config.get("token"), directory)
    sent = early = 0
    try:
        for path in paths:
            if path.is_dir():
                click.echo(f"skipped {path.name}: a folder, not a batch", err=True)
                continue
            outcome = sink.send_now(path.read_bytes())
            if outcome == "ok":
                path.unlink(missing_ok=True)
                sent += 1
                click.echo(f"{path.name}: {_changed(sink.answers)}")
                continue
            if outcome == "later":
                early += 1
                click.echo(
                    f"{path.name}: its cluster's record is not on the server yet; kept "
                    "(sent again with the rest, or by the next `spool send`)",
                    err=True,
                )
                continue
            if outcome == "rejected":
                click.echo(f"refused: {path.name} (kept; the server's reason is logged)", err=True)
                if path.suffix == ".batch":
                    from daskscope.collector.spool import Spool

                    Spool.reject(path)
                continue
            click.echo(
                f"sent {sent} of {len(paths)}; the server cannot take {path.name} now "
                "(see the log line above); try again later",
                err=True,
            )
            sys.exit(1)
    finally:
        sink.disconnect()
    click.echo(f"sent {sent} of {len(paths)} batch(es) to {server}")
    if early:
        sys.exit(1)


def _changed(answers: list[dict[str, Any]]) -> str:
    """What the server did with one batch (its parts, when a proxy made us split it)."""
    records = sum(int(a.get("records") or 0) for a in answers)
    stored = sum(int(a.get("stored") or 0) for a in answers)
    superseded = sum(int(a.get("superseded") or 0) for a in answers)
    refused = sum(len(a.get("rejected") or ()) for a in answers)
    if not answers:
        return "delivered (the server said no more)"
    if records and superseded == records:
        return (
            f"{records} records, none newer than what the server holds: nothing changed "
            "(an older copy, or one already delivered)"
        )
    said = f"{records} records: {stored} rows written"
    if superseded:
        said += f", {superseded} left as stored (what it holds is as new or newer)"
    if refused:
        said += f", {refused} refused by its database (see the log)"
    return said


@spool_group.command("drop")
@_spool_dir_option
@click.argument("names", nargs=-1)
@click.option("--rejected", is_flag=True, help="Every batch the server refused.")
@click.option("--unreadable", is_flag=True, help="Every entry set aside as unreadable.")
@click.option("--waiting", is_flag=True, help="Every batch still waiting (their data is lost).")
def spool_drop(
    spool_dir: str | None, names: tuple[str, ...], rejected: bool, unreadable: bool, waiting: bool
) -> None:
    """Remove NAMES, or every entry of the states chosen; folders are left to you."""
    directory = _directory(spool_dir)
    states = _states(rejected=rejected, unreadable=unreadable, waiting=waiting)
    if not names and not states:
        raise click.UsageError("say what to drop: NAMES, --rejected, --unreadable or --waiting")
    dropped = 0
    for path in _selected(directory, names, states):
        if path.is_dir():
            click.echo(f"left {path.name}: a folder (remove it yourself if it is junk)", err=True)
            continue
        path.unlink(missing_ok=True)
        dropped += 1
    click.echo(f"dropped {dropped} entr{'y' if dropped == 1 else 'ies'} from {directory}")
