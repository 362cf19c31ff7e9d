"""``daskscope import FILE``: a cluster nobody recorded, from a file Dask wrote (a
``dump_cluster_state`` file or a ``performance_report`` page), stored as the recorder's
records through the store's batch path, marked as imported."""

from __future__ import annotations

import json

import click

__all__ = ["import_command"]

EXIT_BAD_FILE = 2


@click.command("import")
@click.argument("file", type=click.Path(dir_okay=False, path_type=str))
@click.option("--json", "as_json", is_flag=True, help="Print what was stored as JSON.")
@click.pass_obj
def import_command(state: object, file: str, as_json: bool) -> None:
    """Store the cluster in FILE: a client.dump_cluster_state() file (.msgpack,
    .msgpack.gz, .yaml, .yaml.gz) or a Dask performance_report page (.html).

    The cluster is marked as imported, with what such a file cannot hold; importing
    the same file again stores nothing new."""
    from daskscope.importers import BadImportFile, read_import
    from daskscope.model import stamp_revisions
    from daskscope.store.batches import open_for_batches, write_batch

    try:
        imported = read_import(file)  # read whole before the store is opened
    except BadImportFile as exc:
        click.echo(f"error: {exc}", err=True)
        raise click.exceptions.Exit(EXIT_BAD_FILE) from None
    records = imported.all_records()
    stamp_revisions(records)
    with open_for_batches(getattr(state, "database", None)) as store:
        write_batch(store, records)
    cluster = imported.cluster
    info = cluster.imported or {}
    if as_json:
        out = {
            "cluster_id": cluster.id,
            "format": info.get("format"),
            "records": imported.counts(),
            "missing": imported.missing,
        }
        click.echo(json.dumps(out, indent=2))
        return
    counts = ", ".join(f"{n:,} {kind}" for kind, n in imported.counts().items())
    click.echo(f"imported {cluster.id} from {info.get('file')} ({info.get('format')}): {counts}")
    click.echo("not in the file:")
    for line in imported.missing:
        click.echo(f"  - {line}")
    click.echo(f"see it: daskscope show {cluster.id}")
