"""A fake OpenAI-compatible Chat Completions server (what OpenRouter looks like to the bot).

A real aiohttp HTTP server on 127.0.0.1: the bot reaches it only through configuration
(``OPENROUTER_BASE_URL`` = :attr:`FakeLLM.base_url`), so the official ``openai`` client's
serialisation, timeouts, retries and error mapping are all exercised.

Answers are deterministic by default ("ANSWER: <last user message>", "SUMMARY #n: ...";
`{"answer": "ANSWER: ..."}` for a request with a json_object ``response_format``), can
be scripted per request (:class:`Reply`), and concurrency is observable (``in_flight``,
``max_in_flight``, ``gate``) without any sleeps: waiters use an asyncio.Condition.

OpenRouter's extensions are accepted: server tools (``{"type": "openrouter:..."}`` in
``tools``), ``plugins``, ``provider``. ``refuse_server_tools`` makes the fake behave like a
model whose provider does not support server tools (400).
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import json
import logging
import re
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from decimal import Decimal
from http import HTTPStatus
from typing import Any

import orjson
from aiohttp import web

from tests.fakes.openai_media import MediaEndpoints
from tests.fakes.openai_stream import Pacing, dumps, send_stream
from tests.fakes.server import LocalServer

log = logging.getLogger(__name__)

_ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})
# (type, code) per status, as OpenAI reports them.
_ERROR_KINDS: dict[int, tuple[str, str | None]] = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("permission_error", None),
    404: ("invalid_request_error", "not_found"),
    408: ("timeout", None),
    429: ("rate_limit_error", "rate_limit_exceeded"),
}


@dataclass(slots=True)
class Reply:
    """One scripted answer.

    ``status`` != 200 answers with OpenAI's error JSON (``error_message`` as its message).
    ``model`` reports that model in the completion instead of echoing the request's (as
    OpenRouter does for routers such as ``openrouter/auto``).
    ``delay`` is simulated latency; ``hang`` never answers until the server stops (for client
    timeout tests). ``raw_body`` sends that JSON verbatim instead of a completion, e.g. to
    mimic OpenRouter's occasional 200-with-``error`` or empty ``choices``.
    """

    content: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    status: int = 200
    error_message: str = ""
    headers: dict[str, str] | None = None
    delay: float = 0.0
    hang: bool = False
    finish_reason: str | None = None
    raw_body: Any = None
    model: str | None = None
    # A streamed answer's pacing (None: the server's `pacing`); a plain call ignores it.
    pacing: Pacing | None = None
    # Pages the answer cites, (url, title) each: OpenRouter's `url_citation` annotations in
    # the message (plain) or spread over the deltas of its text (streamed).
    sources: list[tuple[str, str]] | None = None

    def __post_init__(self) -> None:
        # Fail in the test that wrote the script, not later as an opaque HTTP 500.
        for call in self.tool_calls or []:
            function = call.get("function")
            if not isinstance(function, dict) or not function.get("name"):
                raise ValueError(f"tool call needs function.name: {call!r}")


ReplyLike = Reply | str
Responder = Callable[[dict[str, Any]], ReplyLike | Awaitable[ReplyLike]]


# What membot puts before a new message in a Telegram chat: the chat's date and time
# (core/prompt.py NOW_NOTE). The fake's answers, and tests reading what the user wrote, go
# without it.
NOW_NOTE = re.compile(r"\A\[Now: [^\]\n]*\]\n")


def without_now(text: str) -> str:
    """`text` without the time note before it, if it has one."""
    return NOW_NOTE.sub("", text, count=1)


def content_text(content: Any) -> str:
    """Text of a message ``content``: a string or a list of content parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def rendered_prompt(body: dict[str, Any]) -> str:
    """A request's prompt as one text, in the order a provider reads it: the tools, then
    each message's role, text and tool calls."""
    return "".join(_prompt_parts(body)[0])


def _prompt_parts(body: dict[str, Any]) -> tuple[list[str], int]:
    """The rendered prompt's parts, and the characters they count as prompt (the roles'
    markers left out)."""
    parts = [_tools_json(body.get("tools") or "")]
    markers = 0
    for m in body.get("messages") or []:
        if isinstance(m, dict):
            marker = f"<{m.get('role')}>"
            markers += len(marker)
            parts.append(marker + content_text(m.get("content")))
            calls = m.get("tool_calls")
            parts.append(json.dumps(calls) if calls else '""')
    return parts, sum(map(len, parts)) - markers


# The same tools come with every request of a bot: their JSON (as `json.dumps` writes it, which
# the token counts are made of) is kept by their compact form, ~10x quicker to make.
_TOOLS_JSON: dict[bytes, str] = {}


def _tools_json(tools: Any) -> str:
    try:
        key = orjson.dumps(tools)
    except TypeError:  # not JSON orjson writes (an integer past 64 bits): as it is
        return json.dumps(tools)
    found = _TOOLS_JSON.get(key)
    if found is None:
        if len(_TOOLS_JSON) >= 256:
            _TOOLS_JSON.clear()
        found = _TOOLS_JSON[key] = json.dumps(tools)
    return found


# 19 digits in a row: maybe an integer past 64 bits, which orjson reads as a float.
_LONG_NUMBER = re.compile(r"[0-9]{19}")


def _loads(raw: str) -> Any:
    """A request body, as `json.loads` reads it: orjson (several times quicker on a prompt
    with tools), but the standard library for a body with an integer orjson would not read
    exactly (past 64 bits it gives a float), for what orjson refuses (NaN, lone surrogates)
    and for its errors: a fake must record what the bot sent, not something close."""
    if _LONG_NUMBER.search(raw) is None:
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
    return json.loads(raw)


# A provider's prefix cache keeps recent prompts: the fake compares with this many per model.
RECENT_PROMPTS = 16


def common_prefix(a: str, b: str) -> int:
    """Length of the longest common prefix, by bisection on comparisons done in C, each of
    the still unknown stretch alone (`startswith` at an offset copies nothing of `a`): a
    character loop in Python over 10,000-character prompts made the fake, not membot, the
    bottleneck of every benchmark that shares its process."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a.startswith(b[lo:mid], lo):  # a[:lo] == b[:lo] already
            lo = mid
        else:
            hi = mid - 1
    return lo


class _InvalidRequest(Exception):
    """The request would be rejected by OpenAI; the message is OpenAI-style."""


def validate_chat_request(body: dict[str, Any]) -> None:
    """Reject what OpenAI rejects and is easy to get wrong, tool-call pairing above all."""
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise _InvalidRequest("you must provide a model parameter")
    if "stream_options" in body and not body.get("stream"):
        raise _InvalidRequest("stream_options is only allowed when stream is true")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _InvalidRequest("'messages' must be a non-empty array")
    pending: list[str] = []  # tool_call ids still waiting for their tool message
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if not isinstance(message, dict) or message.get("role") not in _ROLES:
            raise _InvalidRequest(f"{where}: role must be one of {sorted(_ROLES)}")
        role = message["role"]
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in pending:
                raise _InvalidRequest(
                    f"{where}: messages with role 'tool' must be a response to a preceding "
                    f"message with 'tool_calls' (unknown tool_call_id {call_id!r})"
                )
            pending.remove(call_id)
            continue
        if pending:
            raise _InvalidRequest(
                "An assistant message with 'tool_calls' must be followed by tool messages "
                "responding to each 'tool_call_id'. The following tool_call_ids did not have "
                f"response messages: {', '.join(pending)}"
            )
        if role == "assistant":
            calls = message.get("tool_calls") or []
            if message.get("content") is None and not calls:
                raise _InvalidRequest(f"{where}: assistant message needs content or tool_calls")
            pending = [str(call.get("id")) for call in calls if isinstance(call, dict)]
        elif not isinstance(message.get("content"), str | list):
            raise _InvalidRequest(f"{where}: content must be a string or an array of parts")
    if pending:
        raise _InvalidRequest(
            "An assistant message with 'tool_calls' must be followed by tool messages "
            f"responding to each 'tool_call_id'. Missing: {', '.join(pending)}"
        )
    tools = body.get("tools")
    if tools is not None:
        if not isinstance(tools, list):
            raise _InvalidRequest("'tools' must be an array")
        for tool in tools:
            _validate_tool(tool)
    plugins = body.get("plugins")
    if plugins is not None and not (
        isinstance(plugins, list)
        and all(isinstance(p, dict) and isinstance(p.get("id"), str) for p in plugins)
    ):
        raise _InvalidRequest("'plugins' must be an array of objects with an 'id'")
    if "provider" in body and not isinstance(body["provider"], dict):
        raise _InvalidRequest("'provider' must be an object")


def _validate_tool(tool: Any) -> None:
    if not isinstance(tool, dict):
        raise _InvalidRequest(f"invalid tool definition: {tool!r}")
    if server_tool_type(tool) is not None:
        return  # OpenRouter runs these itself; they carry no function
    function = tool.get("function")
    if tool.get("type") != "function" or not isinstance(function, dict):
        raise _InvalidRequest(f"invalid tool definition: {tool!r}")
    if not function.get("name"):
        raise _InvalidRequest(f"tool function needs a name: {tool!r}")


def server_tool_type(tool: Any) -> str | None:
    """The type of an OpenRouter server tool (``openrouter:web_search``, ...), else None."""
    kind = tool.get("type") if isinstance(tool, dict) else None
    return kind if isinstance(kind, str) and kind.startswith("openrouter:") else None


def offers_web_search(body: dict[str, Any]) -> bool:
    """Whether a request lets the model search the web: OpenRouter's server tool, or the
    older `web` plugin."""
    tools = body.get("tools") if isinstance(body.get("tools"), list) else []
    plugins = body.get("plugins") if isinstance(body.get("plugins"), list) else []
    return any(server_tool_type(t) == "openrouter:web_search" for t in tools) or any(
        isinstance(p, dict) and p.get("id") == "web" for p in plugins
    )


def url_citations(sources: list[tuple[str, str]], content: str) -> list[dict[str, Any]]:
    """OpenRouter's annotations for `sources`: each a `url_citation` with the page's url,
    title and an excerpt, citing the whole answer."""
    return [
        {
            "type": "url_citation",
            "url_citation": {
                "url": url,
                "title": title,
                "content": f"An excerpt of {title or url}.",
                "start_index": 0,
                "end_index": len(content),
            },
        }
        for url, title in sources
    ]


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:  # non-standard codes such as 529 "overloaded"
        return f"HTTP {status}"


def _tokens(chars: int) -> int:
    # Roughly four characters per token: enough for tests that budget or log usage.
    return (chars + 3) // 4


class FakeLLM(MediaEndpoints, LocalServer):
    """Fake Chat Completions server. ``async with FakeLLM(api_key=...) as llm:``."""

    #: Substring (case-insensitive) of a system message that marks a summarization request.
    summary_marker = "summar"

    def __init__(
        self,
        api_key: str = "test-key",
        *,
        latency: float = 0.0,
        strict: bool = True,
        refuse_server_tools: bool = False,
    ):
        super().__init__()
        self.api_key = api_key
        self.latency = latency
        self.strict = strict  # validate requests like OpenAI (400 on malformed histories)
        # Answer 400 to requests carrying an openrouter:* server tool, as a provider without
        # server tool support does.
        self.refuse_server_tools = refuse_server_tools
        # OpenRouter reports each call's cost in `usage.cost`: set a price per token or per
        # call (decimal strings) to report one; neither reports no cost, as some providers do.
        self.price_per_token: str | None = None
        self.cost_per_call: str | None = None
        # Reported in usage.prompt_tokens_details; None: the longest prefix this prompt
        # shares with an earlier one of the same model (a provider's prefix cache).
        self.cached_tokens: int | None = None
        self._prompts: dict[str, deque[str]] = {}
        self.requests: list[dict[str, Any]] = []
        # Parsed bodies answered 4xx by validation or refuse_server_tools (not in requests).
        self.rejected_requests: list[dict[str, Any]] = []
        self.chat_requests: list[dict[str, Any]] = []
        self.summary_requests: list[dict[str, Any]] = []
        # id() of each body in summary_requests -> its ordinal (the list keeps the bodies
        # alive, so the ids are unique): a lookup per answer that does not grow with the run.
        self._summary_ordinals: dict[int, int] = {}
        self.errors: list[str] = []  # 4xx answers produced by validation / auth
        # Cited by the default answer to a request that offers web search (the server tool
        # or the plugin), as a Reply's `sources`; a request without it gets none.
        self.search_sources: list[tuple[str, str]] | None = None
        # Streamed answers (stream: true): how they are paced unless a Reply says otherwise,
        # how many were requested, and how many ended because the client went away.
        self.pacing = Pacing()
        self.streams = 0
        self.streams_gone = 0
        self.chunks_sent = 0  # streamed chunks written, over all streams
        self.in_flight = 0
        self.max_in_flight = 0
        self.gate: asyncio.Event | None = None
        self._responder: Responder = self.default_reply
        self._script: deque[ReplyLike] = deque()
        self._ids = itertools.count(1)
        self._cond = asyncio.Condition()
        self._stopped = asyncio.Event()
        self._init_media()

    def clear_records(self) -> None:
        """Forget the request bodies recorded so far (counters and the prefix cache stay). For
        long benchmarks, between measured runs: a bot whose requests carry long histories and
        tool schemas leaves hundreds of objects a request in the heap, and the collector's full
        passes over them land on whatever runs next in the process."""
        for log in (self.requests, self.chat_requests, self.summary_requests):
            log.clear()
        self.rejected_requests.clear()
        self._summary_ordinals.clear()

    # ---- lifecycle -------------------------------------------------------------------------

    def build_app(self) -> web.Application:
        app = web.Application(client_max_size=256 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._chat_completions)
        self.add_media_routes(app)  # /v1/models, /v1/audio/transcriptions
        app.router.add_route("*", "/{tail:.*}", self._not_found)
        return app

    def _on_start(self) -> None:
        self._stopped = asyncio.Event()  # set by stop(); a restart needs a fresh one

    def _on_stop(self) -> None:
        self._stopped.set()  # releases hanging and gated requests

    @property
    def base_url(self) -> str:
        return f"{self.origin}/v1"

    # ---- scripting -------------------------------------------------------------------------

    def script(self, *replies: ReplyLike) -> None:
        """Queue replies, consumed one per request in arrival order; then the responder."""
        self._script.extend(replies)

    def set_responder(self, responder: Responder | None) -> None:
        """Answer every unscripted request with ``responder``; None restores the default."""
        self._responder = responder if responder is not None else self.default_reply

    def is_summary_request(self, body: dict[str, Any]) -> bool:
        """Summarization requests: ``metadata.purpose == "summary"`` or a system message
        (or the first message) mentioning :attr:`summary_marker`. Override if the bot's
        chat prompt itself contains the marker (e.g. an injected "Summary of earlier...")."""
        metadata = body.get("metadata")
        if isinstance(metadata, dict) and metadata.get("purpose") == "summary":
            return True
        marker = self.summary_marker.lower()
        for index, message in enumerate(body.get("messages") or []):
            if not isinstance(message, dict):
                continue
            is_instruction = index == 0 or message.get("role") in ("system", "developer")
            if is_instruction and marker in content_text(message.get("content")).lower():
                return True
        return False

    def default_reply(self, body: dict[str, Any]) -> Reply:
        """Deterministic answers that tests can predict from the request alone."""
        messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
        ordinal = self._summary_ordinals.get(id(body))
        if ordinal is not None:
            last = content_text(messages[-1].get("content")) if messages else ""
            return Reply(content=f"SUMMARY #{ordinal}: {last[:60]}", delay=self.latency)
        user = next((m for m in reversed(messages) if m.get("role") == "user"), None)
        text = without_now(content_text(user.get("content"))) if user else ""
        sources = self.search_sources if offers_web_search(body) else None
        answer = f"ANSWER: {text}"
        form = body.get("response_format")
        if isinstance(form, dict) and form.get("type") == "json_object":
            answer = json.dumps({"answer": answer})  # what such a request asks for
        return Reply(content=answer, delay=self.latency, sources=sources)

    # ---- waiting ---------------------------------------------------------------------------

    async def wait_until(
        self, predicate: Callable[[], bool], timeout: float = 30.0, *, what: str = "condition"
    ) -> None:
        """Wait until ``predicate()`` holds; AssertionError describing the state otherwise."""
        try:
            async with asyncio.timeout(timeout), self._cond:
                await self._cond.wait_for(predicate)
        except TimeoutError:
            raise AssertionError(
                f"timed out after {timeout}s waiting for {what}; requests={len(self.requests)} "
                f"(chat={len(self.chat_requests)}, summary={len(self.summary_requests)}), "
                f"in_flight={self.in_flight}, errors={self.errors}"
            ) from None

    async def wait_for_requests(self, count: int, timeout: float = 30.0) -> list[dict[str, Any]]:
        """The first ``count`` accepted requests, once that many have arrived."""
        await self.wait_until(
            lambda: len(self.requests) >= count, timeout, what=f"{count} request(s)"
        )
        return self.requests[:count]

    async def wait_for_in_flight(self, n: int, timeout: float = 30.0) -> None:
        """Wait until at least ``n`` requests are being handled at the same time."""
        await self.wait_until(lambda: self.in_flight >= n, timeout, what=f"{n} in flight")

    async def _notify(self) -> None:
        async with self._cond:
            self._cond.notify_all()

    # ---- HTTP ------------------------------------------------------------------------------

    async def _not_found(self, request: web.Request) -> web.Response:
        return self._error(404, f"Unknown request URL: {request.method} {request.path}")

    async def _chat_completions(self, request: web.Request) -> web.StreamResponse:
        if request.headers.get("Authorization") != f"Bearer {self.api_key}":
            return await self._reject(401, "Incorrect API key provided")
        try:
            body = await request.json(loads=_loads)
        except ValueError:
            return await self._reject(400, "We could not parse the JSON body of your request")
        if not isinstance(body, dict):
            return await self._reject(400, "The request body must be a JSON object")
        if self.strict:
            try:
                validate_chat_request(body)
            except _InvalidRequest as exc:
                self.rejected_requests.append(body)
                return await self._reject(400, str(exc))
        refused = self._refused_server_tool(body)
        if refused is not None:
            self.rejected_requests.append(body)
            return await self._reject(400, f"Tool type {refused} is not supported for this model")
        is_summary = self.is_summary_request(body)
        self.requests.append(body)
        (self.summary_requests if is_summary else self.chat_requests).append(body)
        if is_summary:
            self._summary_ordinals[id(body)] = len(self.summary_requests)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await self._notify()
            scripted = self._script.popleft() if self._script else None
            try:
                reply = scripted if scripted is not None else await self._respond(body)
            except Exception as exc:
                # A broken responder is a test bug: say so in the answer, not as a bare 500.
                log.exception("FakeLLM responder failed")
                self.errors.append(f"responder raised {exc!r}")
                return self._error(500, f"FakeLLM responder raised {exc!r}")
            if isinstance(reply, str):
                reply = Reply(content=reply)
            gated = self.gate is not None and not is_summary
            if gated and not await self._wait_or_stopped(self.gate):
                return self._error(503, "server is shutting down")
            if reply.delay > 0:
                await asyncio.sleep(reply.delay)  # simulated model latency, not synchronisation
            if reply.hang and not await self._wait_or_stopped(None):
                return self._error(503, "server is shutting down")
            if body.get("stream") and reply.status == 200 and reply.raw_body is None:
                self.streams += 1
                completion = self._completion(body, reply)
                pacing = reply.pacing or self.pacing
                return await send_stream(
                    request, body, completion, pacing, self._gone, self._chunk_sent
                )
            return self._render(body, reply)
        finally:
            self.in_flight -= 1
            await self._notify()

    def _refused_server_tool(self, body: dict[str, Any]) -> str | None:
        """The first server tool type in ``body`` if server tools are refused, else None."""
        if not self.refuse_server_tools or not isinstance(body.get("tools"), list):
            return None
        return next(filter(None, map(server_tool_type, body["tools"])), None)

    async def _respond(self, body: dict[str, Any]) -> ReplyLike:
        result = self._responder(body)
        if inspect.isawaitable(result):
            return await result
        return result

    async def _wait_or_stopped(self, event: asyncio.Event | None) -> bool:
        """Wait for ``event`` (None: forever); False if the server stopped first."""
        if event is not None and event.is_set():
            return True
        stopped = asyncio.ensure_future(self._stopped.wait())
        waiters = {stopped}
        if event is not None:
            waiters.add(asyncio.ensure_future(event.wait()))
        try:
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()
        return event is not None and event.is_set()

    async def _reject(self, status: int, message: str) -> web.Response:
        self.errors.append(f"{status}: {message}")
        await self._notify()
        log.debug("FakeLLM rejected a request: %d %s", status, message)
        return self._error(status, message)

    def _error(
        self, status: int, message: str, headers: dict[str, str] | None = None
    ) -> web.Response:
        kind, code = _ERROR_KINDS.get(
            status, ("server_error" if status >= 500 else "api_error", None)
        )
        error = {"message": message, "type": kind, "param": None, "code": code or status}
        return web.json_response({"error": error}, status=status, headers=headers)

    def _chunk_sent(self) -> None:
        self.chunks_sent += 1

    async def _gone(self) -> None:
        self.streams_gone += 1
        await self._notify()

    def _render(self, body: dict[str, Any], reply: Reply) -> web.Response:
        if reply.raw_body is not None:
            return web.json_response(reply.raw_body, status=reply.status, headers=reply.headers)
        if reply.status != 200:
            reason = reply.error_message or _phrase(reply.status)
            return self._error(reply.status, reason, reply.headers)
        return web.Response(
            body=dumps(self._completion(body, reply)),
            content_type="application/json",
            headers=reply.headers,
        )

    def _completion(self, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
        """The chat.completion answering `body` (streamed: sent as its chunks)."""
        n = next(self._ids)
        message: dict[str, Any] = {"role": "assistant", "content": reply.content}
        tool_calls = [self._tool_call(call, n, k) for k, call in enumerate(reply.tool_calls or [])]
        if tool_calls:
            message["tool_calls"] = tool_calls
        if reply.sources:
            message["annotations"] = url_citations(reply.sources, reply.content or "")
        parts, prompt_chars = _prompt_parts(body)
        completion_chars = len(reply.content or "") + len(json.dumps(tool_calls or ""))
        prompt_tokens = _tokens(prompt_chars)
        completion_tokens = _tokens(completion_chars)
        cached_tokens = self.cached_tokens
        if cached_tokens is None:
            cached_tokens = min(prompt_tokens, self._cached_prefix("".join(parts), body) // 4)
        completion = {
            "id": f"chatcmpl-fake-{n}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": reply.model or body.get("model"),
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": reply.finish_reason
                    or ("tool_calls" if tool_calls else "stop"),
                    "logprobs": None,
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
                "prompt_tokens_details": {"cached_tokens": cached_tokens},
            },
        }
        if self.price_per_token is not None or self.cost_per_call is not None:
            cost = Decimal(self.cost_per_call or 0) + Decimal(self.price_per_token or 0) * (
                prompt_tokens + completion_tokens
            )
            # A JSON number, as OpenRouter sends it (its shortest repr is exact here).
            completion["usage"]["cost"] = float(cost)
        return completion

    def _cached_prefix(self, text: str, body: dict[str, Any]) -> int:
        """Characters of this prompt (`text`: tools first, then the messages, as providers
        lay them out) that repeat the start of an earlier prompt to the same model."""
        earlier = self._prompts.setdefault(str(body.get("model")), deque(maxlen=RECENT_PROMPTS))
        best = max((common_prefix(text, other) for other in earlier), default=0)
        earlier.append(text)
        return best

    @staticmethod
    def _tool_call(call: dict[str, Any], n: int, k: int) -> dict[str, Any]:
        function = dict(call["function"])
        arguments = function.get("arguments", "{}")
        # Scripts may give arguments as a dict; the wire format is a JSON string.
        function["arguments"] = arguments if isinstance(arguments, str) else json.dumps(arguments)
        return {
            **call,
            "id": call.get("id") or f"call_fake_{n}_{k}",
            "type": call.get("type") or "function",
            "function": function,
        }
