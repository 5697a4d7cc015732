"""Length-prefixed frames (4-byte big-endian length, then the bytes) over the local pipes.

A length over :data:`MAX_FRAME_BYTES` is refused unread: a corrupt stream cannot make a reader
allocate without bound.
"""

from __future__ import annotations

import asyncio
import struct

from miles_verifiers.errors import RolloutCallError

MAX_FRAME_BYTES = 512 * 1024 * 1024
_HEADER = struct.Struct(">I")
_TAG = struct.Struct(">q")


class FrameError(RolloutCallError, ValueError):
    """The stream does not hold a well-formed frame."""


def encode_frame(payload: bytes) -> bytes:
    if len(payload) > MAX_FRAME_BYTES:
        raise FrameError(f"a frame of {len(payload)} bytes is over the {MAX_FRAME_BYTES} limit")
    return _HEADER.pack(len(payload)) + payload


async def read_frame(reader: asyncio.StreamReader) -> bytes | None:
    """The next frame's payload, or None at a clean end of stream (between frames)."""
    try:
        header = await reader.readexactly(_HEADER.size)
    except asyncio.IncompleteReadError as error:
        if not error.partial:
            return None
        raise FrameError("the stream ended inside a frame header") from error
    (length,) = _HEADER.unpack(header)
    if length > MAX_FRAME_BYTES:
        raise FrameError(f"a frame announces {length} bytes, over the {MAX_FRAME_BYTES} limit")
    try:
        return await reader.readexactly(length)
    except asyncio.IncompleteReadError as error:
        raise FrameError(
            f"the stream ended {length - len(error.partial)} bytes short of a frame"
        ) from error


def tag(request_id: int, payload: bytes) -> bytes:
    """``payload`` behind its request id, so a reply is matched without parsing its JSON."""
    return _TAG.pack(request_id) + payload


def untag(frame: bytes) -> tuple[int, bytes]:
    if len(frame) < _TAG.size:
        raise FrameError(f"a frame of {len(frame)} bytes is too short for its request id")
    (request_id,) = _TAG.unpack_from(frame)
    return request_id, frame[_TAG.size :]
