"""Protobuf's wire format by hand, for the messages an export writes by the hundred
thousand (building each through the generated classes costs several times more).

Field numbers are read from the generated classes' descriptors, never written down here;
a message is the concatenation of its fields, and two serialisations of one message type
concatenated parse as the two merged (what lets a hand-written part and a generated part
make one message)."""

from __future__ import annotations

from typing import Any

__all__ = [
    "LENGTH_DELIMITED",
    "VARINT",
    "NearbyVarints",
    "field_number",
    "length_delimited",
    "tag",
    "varint",
    "varint_field",
]

_SMALL = [bytes([n]) for n in range(128)]
VARINT, LENGTH_DELIMITED = 0, 2


def varint(n: int) -> bytes:
    """``n`` as a base-128 varint; a negative one as its 64-bit two's complement (what
    int64 fields hold)."""
    if 0 <= n < 128:
        return _SMALL[n]
    n &= 0xFFFF_FFFF_FFFF_FFFF
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


class NearbyVarints:
    """Varints of numbers that come near one another (timestamps in ns, in order): the
    varint of the bits above the lowest 21 is kept from the last call, the 3 bytes of
    those 21 bits made each time."""

    def __init__(self) -> None:
        self.high = -1
        self.high_bytes = b""

    def __call__(self, n: int) -> bytes:
        high = n >> 21
        if high <= 0 or n < 0:
            return varint(n)
        if high != self.high:
            self.high, self.high_bytes = high, varint(high)
        return bytes(((n & 0x7F) | 0x80, (n >> 7 & 0x7F) | 0x80, (n >> 14 & 0x7F) | 0x80)) + (
            self.high_bytes
        )


def field_number(message: Any, name: str) -> int:
    """The number of the field ``name`` of a generated message class."""
    number: int = message.DESCRIPTOR.fields_by_name[name].number
    return number


def tag(message: Any, name: str, wire_type: int) -> bytes:
    """The key that starts field ``name`` of ``message`` on the wire."""
    return varint(field_number(message, name) << 3 | wire_type)


def varint_field(key: bytes, n: int) -> bytes:
    return key + varint(n)


def length_delimited(key: bytes, payload: bytes) -> bytes:
    return key + varint(len(payload)) + payload
