"""Clusters nobody recorded, made from the files Dask writes itself (issue 30):
``client.dump_cluster_state()`` (msgpack or YAML, gzipped or not) and a
``performance_report`` HTML page become the records the recorder would have written,
marked as imported, with what such a file cannot hold named.

Capture side: these modules read a file and return records; ``daskscope import``
(:mod:`daskscope.cli.importing`) writes them through the store's one batch path.
"""

from daskscope.importers.files import BadImportFile, read_import
from daskscope.importers.imported import Imported

__all__ = ["BadImportFile", "Imported", "read_import"]
