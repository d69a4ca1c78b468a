"""GET /api/sessions/{sessionId}/export: the session's whole memory as one ZIP (membot.export),
built on disk first and then streamed from there, so the process never holds it; the file is
removed once sent, or when the client goes away. A forget of the session while it is built
makes it again from a new cut (export/watch.py); one while it is streamed closes the
connection before the ZIP's end (its central directory), so no readable ZIP holds what went."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import IO

from aiohttp import web

from membot.api.errors import ApiError, ErrorCode, api_error
from membot.core.sessions import Sessions
from membot.errors import MembotError
from membot.export import Export, Exports, Stale, part_names

CHUNK = 256 * 1024
ATTEMPTS = 3  # builds of one request: the first, and again after each forget that stopped one


def session_of(request: web.Request) -> uuid.UUID:
    try:
        return uuid.UUID(request.match_info["sessionId"])
    except ValueError:
        raise ApiError(ErrorCode.INVALID_REQUEST, "The session id is not a UUID.") from None


async def export_session(
    request: web.Request, sid: uuid.UUID, sessions: Sessions, exports: Exports
) -> web.StreamResponse:
    try:
        cid = await sessions.existing(sid)
        for attempt in range(1, ATTEMPTS + 1):
            try:
                async with exports.build(await exports.cut(cid), None) as built:
                    await built.current()
                    return await _stream(request, built)
            except Stale:
                if attempt == ATTEMPTS:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover
    except MembotError as exc:
        error = api_error(exc, names_session=True)
        if error is None:
            raise  # ours to fix: INTERNAL_ERROR, logged by the envelope
        raise error from None


async def _stream(request: web.Request, built: Export) -> web.StreamResponse:
    [path] = built.parts
    [name] = part_names(built.cut, 1)
    response = web.StreamResponse(headers={"Content-Disposition": f'attachment; filename="{name}"'})
    response.content_type = "application/zip"
    source = await asyncio.to_thread(_open, path)
    try:
        response.content_length = await asyncio.to_thread(_size, path)
        await response.prepare(request)
        while chunk := await asyncio.to_thread(source.read, CHUNK):
            if built.stop.is_set() and request.transport is not None:
                request.transport.close()  # forgotten from: the rest is not sent
                return response
            await response.write(chunk)
    finally:
        await asyncio.shield(asyncio.to_thread(source.close))
    await response.write_eof()
    return response


def _open(path: Path) -> IO[bytes]:
    return path.open("rb")


def _size(path: Path) -> int:
    return path.stat().st_size
