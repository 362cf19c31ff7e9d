"""Arrow arrays built straight from numpy buffers, for the recorder's writer thread.

Why not ``pa.array(...)``: pyarrow converts numpy arrays and lists through Arrow's compute
functions, and the first such call in a process registers every compute kernel: 1.3 to
1.7 s of CPU on a 2-core machine (pyarrow 26), paid in the scheduler by the first task-log
segment. Arrays assembled with ``from_buffers`` and written to an IPC stream never reach
that registry (``bench/encode_segment.py`` measures the first segment both ways).

Every function here takes numpy arrays (or text) and returns a pyarrow array holding
the same values; none copies more than once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from daskscope.text import escape_text

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["dictionary_array", "numbers", "string_array", "utf8"]


def utf8(texts: Sequence[str]) -> tuple[bytes, npt.NDArray[np.int64]]:
    """The UTF-8 bytes of ``texts`` one after another, and each text's start in them
    (``len(texts) + 1`` offsets: the last is the end)."""
    import numpy as np

    joined = "".join(texts)
    try:
        data = joined.encode("utf-8")
        unstorable = "\x00" in joined
    except UnicodeEncodeError:
        unstorable = True
    if unstorable:  # a lone surrogate or NUL (Dask allows any str): escaped, as stored
        texts = [escape_text(t) for t in texts]
        joined = "".join(texts)
        data = joined.encode("utf-8")
    if len(data) == len(joined):  # all ASCII: a character is a byte
        lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
    else:
        pieces = [t.encode("utf-8") for t in texts]
        lengths = np.fromiter(map(len, pieces), dtype=np.int64, count=len(texts))
    offsets = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return data, offsets


def string_array(data: bytes, offsets: npt.NDArray[np.int64]) -> Any:
    """A string array of the texts :func:`utf8` laid out."""
    import numpy as np
    import pyarrow as pa  # type: ignore[import-untyped]

    if offsets[-1] >= 2**31:
        raise ValueError("the texts of one segment passed 2 GiB; segments are split smaller")
    narrow = offsets.astype(np.int32)
    return pa.Array.from_buffers(
        pa.string(), len(offsets) - 1, [None, pa.py_buffer(narrow), pa.py_buffer(data)], 0
    )


def _validity(valid: npt.NDArray[np.bool_] | None) -> tuple[Any, int]:
    """An Arrow validity bitmap (None when every value is valid) and the null count."""
    import numpy as np
    import pyarrow as pa

    if valid is None:
        return None, 0
    nulls = len(valid) - int(np.count_nonzero(valid))
    if not nulls:
        return None, 0
    return pa.py_buffer(np.packbits(valid, bitorder="little")), nulls


#: numpy dtypes and their Arrow types
_TYPES = {"int8": "int8", "int32": "int32", "int64": "int64", "float64": "float64"}


def numbers(values: npt.NDArray[Any], valid: npt.NDArray[np.bool_] | None = None) -> Any:
    """A numeric array of ``values`` (int8/32/64 or float64), null where ``valid`` is
    False."""
    import numpy as np
    import pyarrow as pa

    name = _TYPES.get(values.dtype.name)
    if name is None:
        raise TypeError(f"no Arrow array for numpy dtype {values.dtype}")
    values = np.ascontiguousarray(values)
    bitmap, nulls = _validity(valid)
    arrow_type = getattr(pa, name)()
    return pa.Array.from_buffers(arrow_type, len(values), [bitmap, pa.py_buffer(values)], nulls)


def dictionary_array(codes: npt.NDArray[np.int32], dictionary: Any) -> Any:
    """Indices into ``dictionary`` (a string array) as a dictionary array; -1 is null."""
    import numpy as np
    import pyarrow as pa

    codes = np.ascontiguousarray(codes, dtype=np.int32)
    bitmap, nulls = _validity(codes >= 0)
    indices = np.where(codes >= 0, codes, 0).astype(np.int32) if nulls else codes
    return pa.DictionaryArray.from_buffers(
        pa.dictionary(pa.int32(), pa.string()),
        len(codes),
        [bitmap, pa.py_buffer(indices)],
        dictionary,
        nulls,
    )
