"""Task keys in a task-log segment: each key kept as its group's name and what remains
of its text, and the segment's key filter (a Bloom filter over the keys' texts).

A key's text is ``str(key)``. A tuple led by its group's name, ``('inc-3f2a', 3)``, keeps
``3`` (:data:`KEY_TUPLE`); a key equal to its group's name keeps nothing
(:data:`KEY_IS_GROUP`); any other keeps its whole text (:data:`KEY_WHOLE`).

Both are built for a whole segment at once in the recorder's writer thread, without
``str(key)`` of each key: tuples are sorted by length and their rests formatted by
``map`` over the segment (a tuple's text is its items' ``repr`` joined), and the filter's
hash of a key's text is put together from the hash of its group's lead and of its rest
(a polynomial hash: ``H(a + b) = H(a) + P**len(a) * H(b)``), vectorised over the rests'
bytes.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from itertools import compress, repeat
from operator import itemgetter
from typing import TYPE_CHECKING

from daskscope.tasklog.arrow import utf8
from daskscope.text import escape_text

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "KEY_IS_GROUP",
    "KEY_TUPLE",
    "KEY_WHOLE",
    "key_columns",
    "key_filter",
    "key_filter_may_hold",
    "key_parts",
    "key_text",
]

#: how a key's text is kept: whole, equal to its group's name, or a tuple led by it
KEY_WHOLE, KEY_IS_GROUP, KEY_TUPLE = 0, 1, 2


def key_parts(key: str, group: str) -> tuple[int, str]:
    """``key`` (the str of a Dask key) as (form, rest) relative to its group's name."""
    if key == group:
        return KEY_IS_GROUP, ""
    lead = _lead(group)
    if key.startswith(lead) and key.endswith(")"):
        return KEY_TUPLE, key[len(lead) : -1]
    return KEY_WHOLE, key


def key_text(form: int, rest: str, group: str) -> str:
    """The key's text again, from :func:`key_parts`."""
    if form == KEY_IS_GROUP:
        return group
    if form == KEY_TUPLE:
        return f"{_lead(group)}{rest})"
    return rest


def _lead(group: str) -> str:
    """What the text of a tuple key led by ``group`` starts with."""
    return f"({group!r}, "


def key_columns(
    keys: npt.NDArray[np.object_], groups: npt.NDArray[np.object_]
) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.object_]]:
    """Each key's form and rest (:func:`key_parts` of ``str(key)`` against its group's
    name), for a whole segment (object arrays of the keys and their groups' names); the
    rests as an object array of str."""
    import numpy as np

    n = len(keys)
    forms = np.full(n, KEY_WHOLE, dtype=np.int8)
    rests = np.empty(n, dtype=object)
    done = np.zeros(n, dtype=bool)
    kinds = map(type, keys.tolist())
    rows = np.flatnonzero(np.fromiter(map(operator.is_, kinds, repeat(tuple)), bool, count=n))
    lengths = np.fromiter(map(len, keys[rows].tolist()), dtype=np.int64, count=len(rows))
    long_enough = lengths >= 2  # ("g",) prints as "('g',)": kept whole
    rows, lengths = rows[long_enough], lengths[long_enough]
    heads = list(map(itemgetter(0), keys[rows].tolist()))
    names = groups[rows].tolist()
    # Dask names a tuple's group by its first item: the very same str, mostly
    led = np.fromiter(map(operator.is_, heads, names), bool, count=len(rows))
    if not all(type(g) is str for g in dict.fromkeys(compress(names, led.tolist()))):
        led &= np.fromiter(map(operator.is_, map(type, heads), repeat(str)), bool, len(rows))
    for i in np.flatnonzero(~led).tolist():  # equal, not the same object (or not led)
        led[i] = type(heads[i]) is str and heads[i] == names[i]
    # a name holding NUL or a lone surrogate is kept escaped in the dictionary, where its
    # repr could no longer be rebuilt: such keys are kept whole
    unstorable = {g for g in dict.fromkeys(compress(names, led.tolist())) if escape_text(g) != g}
    if unstorable:
        led &= np.fromiter((g not in unstorable for g in names), bool, count=len(names))
    for length in np.unique(lengths[led]).tolist():
        at = rows[led & (lengths == length)]
        chosen = keys[at].tolist()
        if length == 2:
            texts = list(map(repr, map(itemgetter(1), chosen)))
        else:  # a tuple prints its items' repr joined by ", "
            layout = ", ".join(["%r"] * (length - 1))
            texts = list(map(layout.__mod__, map(itemgetter(*range(1, length)), chosen)))
        rests[at] = texts
        forms[at] = KEY_TUPLE
        done[at] = True
    rest_rows = np.flatnonzero(~done)
    texts = list(map(str, keys[rest_rows].tolist()))
    rests[rest_rows] = texts
    names = groups[rest_rows].tolist()
    is_group = np.fromiter(map(operator.eq, texts, names), bool, count=len(rest_rows))
    forms[rest_rows[is_group]] = KEY_IS_GROUP
    rests[rest_rows[is_group]] = ""
    return forms, rests


# -- the key filter ---------------------------------------------------------------------
#
# A filter is an 8-byte little-endian header, the bit count in its low 56 bits and the
# hash's version in its top byte, then the bits. Version 0 (the first filters) hashed a
# key's last 96 bytes with FNV-1a; version 2 hashes every byte of the key's text with
# the composable polynomial hash below (version 1 summed the powers the other way).
# All are read; version 2 is written.

#: bits of the key filter per key, and the hashes each key sets (~1 % false positives);
#: at most 2**32 bits (a segment's keys are far fewer)
_FILTER_BITS_PER_KEY = 10
_FILTER_HASHES = 7
_FILTER_VERSION = 2
_BITS_MASK = (1 << 56) - 1
#: the polynomial hash's multiplier (odd: every power is odd, so no byte is lost)
_P = 0x9E3779B97F4A7C15
_P_INVERSE = pow(_P, -1, 1 << 64)
_CLOSE = ord(")")


def _powers(count: int, base: int = _P) -> npt.NDArray[np.uint64]:
    """``base**0 .. base**(count - 1)`` modulo 2**64."""
    import numpy as np

    powers = np.full(max(count, 1), base, dtype=np.uint64)
    powers[0] = 1
    return np.cumprod(powers, dtype=np.uint64)


def _text_hashes(data: bytes, offsets: npt.NDArray[np.int64]) -> npt.NDArray[np.uint64]:
    """The polynomial hash of each text laid out by :func:`~daskscope.tasklog.arrow.utf8`,
    ``sum(byte[i] * P**i)`` modulo 2**64: a running sum of every byte times ``P`` to its
    place in ``data``, each text's part of it brought back by ``P**-start`` (P is odd,
    so it has an inverse modulo 2**64)."""
    import numpy as np

    raw = np.frombuffer(data, dtype=np.uint8)
    powers, inverses = _power_tables(len(raw) + 1)
    running = np.zeros(len(raw) + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        np.cumsum(raw * powers[: len(raw)], dtype=np.uint64, out=running[1:])
        starts = offsets[:-1]
        own = running[offsets[1:]] - running[starts]
        hashes: npt.NDArray[np.uint64] = own * inverses[starts]
    return hashes


#: powers of P and of its inverse, kept between segments (the writer thread's alone):
#: up to this many (16 MiB), a segment's rests rarely need more
_KEPT_POWERS = 2**20
_kept: list[npt.NDArray[np.uint64]] = []


def _power_tables(count: int) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint64]]:
    """At least ``count`` powers of P and of its inverse."""
    global _kept
    if _kept and len(_kept[0]) >= count:
        return _kept[0], _kept[1]
    if count > _KEPT_POWERS:
        return _powers(count), _powers(count, _P_INVERSE)
    size = min(max(count, 2 * len(_kept[0]) if _kept else 2**16), _KEPT_POWERS)
    _kept = [_powers(size), _powers(size, _P_INVERSE)]
    return _kept[0], _kept[1]


def _mixed(h: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """A 64-bit finaliser (splitmix64's): every bit of the hash moves every bit out."""
    import numpy as np

    with np.errstate(over="ignore"):
        h = (h ^ (h >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        h = (h ^ (h >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return h ^ (h >> np.uint64(31))


def _positions(hashes: npt.NDArray[np.uint64], bits: int) -> npt.NDArray[np.int64]:
    """The filter bits of each text's hash: ``(n, hashes)`` (double hashing; a 32-bit
    fraction times the bit count picks a bit without a division)."""
    import numpy as np

    first = _mixed(hashes)
    with np.errstate(over="ignore"):
        second = _mixed(first ^ np.uint64(_P)) | np.uint64(1)
        steps = np.arange(_FILTER_HASHES, dtype=np.uint64)
        mixed = first[:, None] + steps[None, :] * second[:, None]
        picked = ((mixed >> np.uint64(32)) * np.uint64(bits)) >> np.uint64(32)
    return picked.astype(np.int64)


def key_filter(
    forms: npt.NDArray[np.int8],
    rest_data: bytes,
    rest_offsets: npt.NDArray[np.int64],
    groups: npt.NDArray[np.int32],
    names: Sequence[str],
) -> bytes:
    """The filter of a segment's keys, each given as (form, rest, group code into
    ``names``): it admits every one of their texts."""
    import numpy as np

    n = len(forms)
    bits = max(64, n * _FILTER_BITS_PER_KEY)
    if bits >= 2**32:
        raise ValueError(f"{n} keys are too many for one segment's key filter")
    field = np.zeros(bits, dtype=bool)
    if n:
        groups = np.maximum(groups, 0)  # none (-1) only where the key is kept whole
        used = np.flatnonzero(np.bincount(groups, minlength=len(names)))
        slot = np.zeros(len(names), dtype=np.int64)
        slot[used] = np.arange(len(used))
        group_of = slot[groups]
        group_texts = [names[g] for g in used.tolist()]
        lead_data, lead_offsets = utf8([_lead(g) for g in group_texts])
        name_data, name_offsets = utf8(group_texts)
        hashes = _text_hashes(rest_data, rest_offsets)  # KEY_WHOLE: the text
        tuple_rows = forms == KEY_TUPLE
        if tuple_rows.any():  # lead + rest + ")"
            lead_lengths = np.diff(lead_offsets)[group_of[tuple_rows]]
            rest_lengths = np.diff(rest_offsets)[tuple_rows]
            powers = _powers(int((lead_lengths + rest_lengths).max()) + 1)
            lead = _text_hashes(lead_data, lead_offsets)[group_of[tuple_rows]]
            with np.errstate(over="ignore"):
                hashes[tuple_rows] = (
                    lead
                    + hashes[tuple_rows] * powers[lead_lengths]
                    + np.uint64(_CLOSE) * powers[lead_lengths + rest_lengths]
                )
        group_rows = forms == KEY_IS_GROUP
        if group_rows.any():
            hashes[group_rows] = _text_hashes(name_data, name_offsets)[group_of[group_rows]]
        field[_positions(hashes, bits).ravel()] = True
    header = bits | (_FILTER_VERSION << 56)
    return header.to_bytes(8, "little") + np.packbits(field, bitorder="little").tobytes()


def key_filter_may_hold(key_filter: bytes, key: str) -> bool:
    """False when ``key`` is surely not in the segment of this filter (empty: unknown).
    Plain integers: a lookup asks every segment's filter about one key."""
    if len(key_filter) < 8:
        return True
    header = int.from_bytes(key_filter[:8], "little")
    bits, version = header & _BITS_MASK, header >> 56
    if version == 0:
        positions = _positions_v0(key, bits)
    elif version == _FILTER_VERSION:
        positions = _positions_of(key, bits)
    elif version == 1:
        positions = _positions_of(key, bits, forward=True)
    else:
        return True  # a newer daskscope's filter: decode the segment to be sure
    return all(key_filter[8 + p // 8] >> (p % 8) & 1 for p in positions)


_MASK = (1 << 64) - 1


def _mixed_int(h: int) -> int:
    """:func:`_mixed` of one hash."""
    h = ((h ^ (h >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    h = ((h ^ (h >> 27)) * 0x94D049BB133111EB) & _MASK
    return h ^ (h >> 31)


def _positions_of(key: str, bits: int, *, forward: bool = False) -> list[int]:
    """:func:`_positions` of one key's text (``forward``: version 1's hash,
    ``sum(byte[i] * P**(len - 1 - i))``, written for an hour of development)."""
    h, power = 0, 1
    for byte in escape_text(key).encode("utf-8"):  # as the segment stored it
        if forward:
            h = (h * _P + byte) & _MASK
        else:
            h = (h + byte * power) & _MASK
            power = (power * _P) & _MASK
    first = _mixed_int(h)
    second = _mixed_int(first ^ _P) | 1
    return [((((first + i * second) & _MASK) >> 32) * bits) >> 32 for i in range(_FILTER_HASHES)]


#: version 0: bytes of a key's text hashed (its last ones), FNV-1a's constants
_V0_HASHED_BYTES = 96
_FNV_OFFSET, _FNV_PRIME = 0xCBF29CE484222325, 0x100000001B3


def _positions_v0(key: str, bits: int) -> list[int]:
    """The bits a version-0 filter set for ``key``: FNV-1a over its last 96 bytes
    (zero-padded), a remix of it, double hashing."""
    tail = key.encode("utf-8", "surrogatepass")[-_V0_HASHED_BYTES:]
    h = _FNV_OFFSET
    for byte in tail + bytes(_V0_HASHED_BYTES - len(tail)):
        h = ((h ^ byte) * _FNV_PRIME) & _MASK
    h2 = (((h ^ (h >> 29)) * 0xBF58476D1CE4E5B9) & _MASK) | 1
    return [((h + step * h2) & _MASK) % bits for step in range(_FILTER_HASHES)]
