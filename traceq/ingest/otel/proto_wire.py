"""The protobuf wire format read with numpy: the fields of many messages at once.

A message is a run of fields, each a varint tag (field number << 3 | wire type) and a value:
a varint (wire type 0), 8 bytes (1), a varint length and that many bytes (2), or 4 bytes (5).
`fields` walks every message of a level side by side, one field of each per numpy step, so
its Python steps number the fields of the longest message, not the fields of all of them;
the messages inside a length-delimited field are the next level's input.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

VARINT, FIXED64, LEN, FIXED32 = 0, 1, 2, 5
# The buffer is padded so a read past a message never faults: a varint (at most 10 bytes), or
# a short string read as a row of up to PAD bytes (proto_arrow.py).
PAD = 64


class WireError(ValueError):
    """Bytes that are not a protobuf message: a bad varint, a field past its message's end, or
    a wire type with no length (groups)."""


@dataclass(frozen=True)
class Fields:
    """Fields of a level's messages: `owner` is the message's index, `value` a varint's value
    (0 for other wire types), `start`:`end` the value's bytes (a length-delimited field's
    payload), `key` the tag (number << 3 | wire type). `fields` returns them in no particular
    order; `pick` returns one tag's, ordered by message, then wire order."""

    owner: np.ndarray
    start: np.ndarray
    end: np.ndarray
    value: np.ndarray
    key: np.ndarray

    def pick(self, number: int, wire: int) -> Fields:
        """The fields with this number and wire type, by message and wire order."""
        index = np.flatnonzero(self.key == (number << 3 | wire))
        start = self.start[index]
        if len(start) > 1 and not (start[1:] > start[:-1]).all():
            # positions grow through a level's messages: their order is the wire order
            index = index[np.argsort(start, kind="stable")]
            start = self.start[index]
        return Fields(self.owner[index], start, self.end[index], self.value[index], self.key[index])

    def misfit(self, expected: dict[int, int]) -> np.ndarray:
        """Owners with a known field number written with another wire type."""
        wanted = np.full(max(expected) + 2, -1, dtype=np.int64)
        for number, wire in expected.items():
            wanted[number] = wire
        number = np.minimum(self.key >> 3, len(wanted) - 1)
        want = wanted[number]
        return np.unique(self.owner[(want >= 0) & (want != (self.key & 7))])


# After this many numpy steps, at most FEW messages left are read by `_walk`.
LONG_STEPS, FEW = 256, 4


def padded(data: bytes) -> np.ndarray:
    """`data` as bytes numpy reads varints from (PAD zero bytes after it)."""
    return np.frombuffer(data + bytes(PAD), dtype=np.uint8)


def varints(buf: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The varints that start at `pos`: their values (uint64) and where each ends."""
    byte = buf[pos]
    value = (byte & 0x7F).astype(np.uint64)
    end = pos + 1
    more = np.flatnonzero(byte >= 0x80)
    shift = 7
    while len(more):
        if shift > 63:
            raise WireError("a varint longer than 10 bytes")
        byte = buf[end[more]]
        value[more] |= (byte & 0x7F).astype(np.uint64) << np.uint64(shift)
        end[more] += 1
        more = more[byte >= 0x80]
        shift += 7
    return value, end


def fields(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> Fields:
    """Every field of the messages `buf[starts[i]:ends[i]]`."""
    owner = np.flatnonzero(starts < ends)
    at = starts[owner].astype(np.int64)
    stop = ends[owner].astype(np.int64)
    steps: list[tuple[np.ndarray, ...]] = []
    while len(owner):
        tag, at = varints(buf, at)
        key = tag.astype(np.int64)
        wire = key & 7
        value = np.zeros(len(owner), dtype=np.uint64)
        start, end = at, at.copy()
        if (wire == LEN).all():  # the common step: a run of sub-messages or strings
            length, start = varints(buf, at)
            end = start + length.astype(np.int64)
        else:
            kinds = [wire == VARINT, wire == FIXED64, wire == LEN, wire == FIXED32]
            if not (kinds[0] | kinds[1] | kinds[2] | kinds[3]).all():
                raise WireError("a field of wire type 3, 4, 6 or 7")
            if kinds[0].any():
                value[kinds[0]], end[kinds[0]] = varints(buf, at[kinds[0]])
            end[kinds[1]] += 8
            end[kinds[3]] += 4
            if kinds[2].any():
                length, payload = varints(buf, at[kinds[2]])
                start = at.copy()
                start[kinds[2]] = payload
                end[kinds[2]] = payload + length.astype(np.int64)
        if (end > stop).any() or (end < start).any() or (key < 8).any():
            raise WireError("a field past the end of its message, or field number 0")
        steps.append((owner, start, end, value, key))
        more = end < stop
        if not more.all():
            owner, at, stop = owner[more], end[more], stop[more]
        else:
            at = end
        if len(steps) >= LONG_STEPS and 0 < len(owner) <= FEW:
            steps.append(_walk(buf.data, owner, at, stop))
            break
    if not steps:
        empty = np.zeros(0, dtype=np.int64)
        return Fields(empty, empty, empty, empty.astype(np.uint64), empty)
    if len(steps) == 1:
        return Fields(*steps[0])
    return Fields(*(np.concatenate(a) for a in zip(*steps, strict=True)))


def _walk(data: memoryview, owners: np.ndarray, ats: np.ndarray, stops: np.ndarray) -> tuple:
    """The rest of a few long messages' fields, one message after another.

    A numpy step costs ~40 µs whatever its size, so a message of many more fields than the
    others (a span of 30,000 token events) would cost that per field; read in Python, a field
    costs ~1 µs."""
    found: list[tuple[int, int, int, int, int]] = []
    for owner, at, stop in zip(owners.tolist(), ats.tolist(), stops.tolist(), strict=True):
        while at < stop:
            key, at = _varint(data, at)
            wire, value, start = key & 7, 0, at
            if wire == LEN:
                length, start = _varint(data, at)
                end = start + length
            elif wire == VARINT:
                value, end = _varint(data, at)
            elif wire in (FIXED64, FIXED32):
                end = at + (8 if wire == FIXED64 else 4)
            else:
                raise WireError("a field of wire type 3, 4, 6 or 7")
            if end > stop or key < 8:
                raise WireError("a field past the end of its message, or field number 0")
            found.append((owner, start, end, value, key))
            at = end
    types = (np.int64, np.int64, np.int64, np.uint64, np.int64)  # a varint may pass int64
    return tuple(np.array(c, dtype=t) for c, t in zip(zip(*found, strict=True), types, strict=True))


def _varint(data: memoryview, at: int) -> tuple[int, int]:
    byte = data[at]
    if byte < 0x80:
        return byte, at + 1
    value, shift = byte & 0x7F, 7
    while True:
        at += 1
        byte = data[at]
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at + 1
        shift += 7
        if shift > 63:
            raise WireError("a varint longer than 10 bytes")


def last_of(picked: Fields, n: int) -> tuple[np.ndarray, np.ndarray]:
    """For a singular field: (has it, index into `picked` of the last occurrence) per owner;
    protobuf keeps the last of repeated scalar occurrences."""
    owner = picked.owner
    last = np.flatnonzero(np.append(owner[1:] != owner[:-1], True)) if len(owner) else owner
    index = np.full(n, -1, dtype=np.int64)
    index[owner[last]] = last
    return index >= 0, index
