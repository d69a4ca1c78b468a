"""The HTTP front door: aiohttp.web over the conversation core.

    POST /api/chat          a message: one answer, a new session, or a session's next round
                            (JSON, or with "stream": true server-sent events: api/stream.py)
    POST /v1/chat/completions, GET /v1/models
                            the OpenAI-compatible door (api/v1/), errors in OpenAI's shape
    GET  /api/sessions/{sessionId}/export  the session's memory as a ZIP (api/export.py)
    POST /api/sessions/{sessionId}/forget, POST /v1/memory/forget  what words match, or
                            erase it (api/forget.py)
    GET  /api/openapi.json  the OpenAPI 3.1 description (no token)
    GET  /healthz           200 {"status": "ok"} (no token)

Handlers only translate: bytes to a validated request, `Sessions` (membot.core.sessions)
does the rest, and its errors and the model's become `{"error", "code"}` answers. Every
request is logged once at INFO with its session, round, status and duration; never with
message text, system prompts or tokens.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from membot.api.errors import ApiError, ErrorCode, api_error, http_error
from membot.api.export import export_session, session_of
from membot.api.forget import BadForget, forget, parse_forget
from membot.api.models import (
    MAX_BODY_BYTES,
    ChatRequest,
    ChatResponse,
    CitationRef,
    Health,
    SourceLink,
    parse_chat_request,
)
from membot.api.openapi import build_document
from membot.api.stream import CLIENT_GONE, STREAM_OPEN, EventStream, streamed
from membot.api.v1.door import V1Door, V1Options
from membot.api.v1.errors import V1Error, from_api_error
from membot.api.wire import CODE as _CODE
from membot.api.wire import ROUND as _ROUND
from membot.api.wire import SESSION as _SESSION
from membot.api.wire import Tokens, json_response, read_body
from membot.clock import Clock, utc_now
from membot.config import Settings
from membot.core.session_sweep import SessionSweeper, sweep_interval
from membot.core.sessions import Sessions
from membot.errors import MembotError
from membot.export import Exports
from membot.listen import listen
from membot.wiring import Core, shutdown_grace

log = logging.getLogger("membot.api")

#: `membot api` listens here when API_PORT is unset (with the bot, setting API_PORT is what
#: turns the API on, so there it is always set).
DEFAULT_PORT = 8080

_Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class ApiServer:
    """The API on API_HOST:API_PORT: `start()`, then `stop_accepting()` (no new requests;
    those in progress finish), then `close()`. The session sweep runs while it is started."""

    def __init__(self, settings: Settings, core: Core, *, clock: Clock = utc_now) -> None:
        api, llm, max_rounds = settings.api, settings.llm, settings.conversation.max_rounds
        self.core = core
        # A request in progress when the server closes gets as long as a turn may take.
        self.grace = shutdown_grace(llm)
        self.host = api.host
        self.port = api.port or DEFAULT_PORT
        self.max_message_chars = api.max_message_chars
        self.sessions = Sessions(
            core.service,
            ttl=api.session_ttl,
            max_rounds=max_rounds,
            clock=clock,
            health=core.health,
            # As /model allows: MODELS and the default model; anything while MODELS is empty.
            models=llm.model_choices if llm.models else (),
        )
        self.sweeper = SessionSweeper(self.sessions, sweep_interval(api.session_ttl))
        self._tokens = Tokens(api.tokens)
        models = self.sessions.models
        self.v1 = V1Door(
            core.service,
            self._tokens,
            V1Options(llm.default_model, models, llm.model_choices, api.max_message_chars),
            clock,
        )
        document = build_document(max_rounds, api.max_message_chars)
        self._openapi = json.dumps(document, ensure_ascii=False).encode()
        self.app = web.Application(middlewares=[self._envelope], client_max_size=MAX_BODY_BYTES)
        self.app.router.add_post("/api/chat", self._chat)
        self.exports = Exports(
            core.repository,
            core.task_store,
            settings.storage.data_dir,
            default_zone=settings.tasks.timezone,
            clock=clock,
            watch=core.export_watch,
        )
        self.app.router.add_get("/api/sessions/{sessionId}/export", self._export)
        self.app.router.add_post("/api/sessions/{sessionId}/forget", self._forget)
        self.app.router.add_get("/api/openapi.json", self._openapi_document)
        self.app.router.add_get("/healthz", self._health)
        self.v1.add_routes(self.app.router)
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    async def start(self) -> None:
        # A client that disconnects cancels its request at once (aiohttp's handler
        # cancellation): the turn is cancelled with it, which closes the model's stream and
        # stores nothing (core/agent.py), however long until the next byte would be written.
        self._runner = await listen(
            self.app, self.host, self.port, shutdown_timeout=self.grace, handler_cancellation=True
        )
        self.sweeper.start()
        log.info("HTTP API listening on %s", self.url)

    async def stop_accepting(self) -> None:
        """No new connections, and no new requests on open ones: idle keep-alive
        connections close now, busy ones after the response in progress."""
        runner = self._runner
        if runner is None:
            return
        for site in list(runner.sites):
            await site.stop()
        if runner.server is not None:
            runner.server.pre_shutdown()

    async def close(self, *, hurry: bool = False) -> None:
        """Release the port; requests still in progress get up to the shutdown's grace, or,
        in a `hurry`, are cancelled at once."""
        await self.sweeper.aclose()
        runner, self._runner = self._runner, None
        if runner is not None:
            if hurry and runner.server is not None:
                await runner.server.shutdown(0.01)  # aiohttp reads 0 as "no limit"
            await runner.cleanup()

    # -- handlers ----------------------------------------------------------------------------

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        if not self._tokens.authorized(request):
            raise ApiError(ErrorCode.UNAUTHORIZED)
        parsed = parse_chat_request(await read_body(request))
        parsed.check_sizes(self.max_message_chars)
        if parsed.session_id is not None:
            request[_SESSION] = str(parsed.session_id)
        if not parsed.stream:
            return _json(200, await self._answer(request, parsed, None))
        events = EventStream(request)

        async def answer() -> web.StreamResponse:
            return await events.end("done", await self._answer(request, parsed, events))

        return await streamed(request, events, answer)

    async def _answer(
        self, request: web.Request, parsed: ChatRequest, events: EventStream | None
    ) -> dict[str, Any]:
        """The response object of one request (the answer, stored already)."""
        try:
            reply = await self.sessions.chat(await parsed.to_session_request(), events)
        except MembotError as exc:
            error = api_error(exc, names_session=parsed.session_id is not None)
            if error is None:
                raise  # ours to fix: INTERNAL_ERROR, logged by the envelope
            raise error from None
        request[_SESSION] = str(reply.session_id)
        request[_ROUND] = reply.round
        response = ChatResponse(
            content=reply.content,
            model=reply.model,
            is_complete=reply.complete,
            round=reply.round,
            max_rounds=reply.max_rounds,
            session_id=reply.session_id,
            sources=[SourceLink(url=s.url, title=s.title) for s in reply.sources],
            citations=[
                CitationRef(id=c.id, date=c.ts, author=c.author, quote=c.quote)
                for c in reply.citations
            ],
        )
        return response.model_dump(mode="json")

    async def _export(self, request: web.Request) -> web.StreamResponse:
        if not self._tokens.authorized(request):
            raise ApiError(ErrorCode.UNAUTHORIZED)
        sid = session_of(request)
        request[_SESSION] = str(sid)
        return await export_session(request, sid, self.sessions, self.exports)

    async def _forget(self, request: web.Request) -> web.StreamResponse:
        if not self._tokens.authorized(request):
            raise ApiError(ErrorCode.UNAUTHORIZED)
        sid = session_of(request)
        request[_SESSION] = str(sid)
        try:
            asked = parse_forget(await read_body(request))
            if asked.user is not None:
                raise BadForget("user: only /v1/memory/forget takes a user")
            cid = await self.sessions.existing(sid)
            return _json(200, await forget(self.core.service, cid, asked))
        except BadForget as exc:
            code = ErrorCode.WORDS_TOO_SHORT if exc.words else ErrorCode.INVALID_REQUEST
            raise ApiError(code, exc.message) from None
        except MembotError as exc:
            error = api_error(exc, names_session=True)
            if error is None:
                raise
            raise error from None

    async def _openapi_document(self, request: web.Request) -> web.Response:
        return web.Response(body=self._openapi, content_type="application/json", charset="utf-8")

    async def _health(self, request: web.Request) -> web.Response:
        return _json(200, Health().model_dump(mode="json"))

    # -- every request: errors as JSON, one log line -----------------------------------------

    @web.middleware
    async def _envelope(self, request: web.Request, handler: _Handler) -> web.StreamResponse:
        started = time.perf_counter()
        try:
            response = await handler(request)
        except asyncio.CancelledError:
            # Its client disconnected (or the server is closing): the turn was cancelled with
            # the handler and stored nothing. Nobody reads an answer; the log line stays.
            request[_CODE] = CLIENT_GONE
            _log_request(request, 200 if request.get(STREAM_OPEN) else 499, started)
            raise
        except V1Error as exc:
            response = exc.response()
            request[_CODE] = exc.code
        except ApiError as exc:
            response = _error_response(request, exc)
            request[_CODE] = exc.code.value
        except web.HTTPException as exc:  # routing: unknown path, wrong method
            error = http_error(exc)
            response = _error_response(request, error)
            if "Allow" in exc.headers:
                response.headers["Allow"] = exc.headers["Allow"]
            request[_CODE] = error.code.value
        except Exception as exc:
            # No traceback at ERROR: frames and messages may quote the request.
            log.error("unexpected %s in %s", type(exc).__name__, request.method)
            log.debug("unexpected error", exc_info=True)
            response = _error_response(request, ApiError(ErrorCode.INTERNAL_ERROR))
            request[_CODE] = ErrorCode.INTERNAL_ERROR.value
        _log_request(request, response.status, started)
        return response


def _log_request(request: web.Request, status: int, started: float) -> None:
    log.info(
        "%s %s status=%d session=%s round=%s code=%s duration=%.3fs",
        request.method,
        request.rel_url.raw_path[:100],  # still %-encoded: no line breaks in the log
        status,
        request.get(_SESSION, "-"),
        request.get(_ROUND, "-"),
        request.get(_CODE, "-"),
        time.perf_counter() - started,
    )


def _json(status: int, payload: dict[str, Any]) -> web.Response:
    return json_response(status, payload)


def _error_response(request: web.Request, error: ApiError) -> web.Response:
    if request.path.startswith("/v1/"):  # OpenAI's clients read OpenAI's shape
        return from_api_error(error).response()
    response = _json(error.status, error.body())
    if error.code is ErrorCode.UNAUTHORIZED:
        response.headers["WWW-Authenticate"] = "Bearer"
    return response
