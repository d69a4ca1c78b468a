"""The MCP server: MemoryDesk's four calls as tools of the official SDK's `MCPServer`, over
stdio (the client starts `membot mcp` as its child) or Streamable HTTP at /mcp, where every
request must carry `Authorization: Bearer <one of API_TOKENS>`."""

from __future__ import annotations

import hmac
import json
from collections.abc import Awaitable, Sequence
from typing import Annotated, Any, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from membot.core.tools.builtin import MAX_FACT_CHARS
from membot.llm.tools import ToolError as Refused
from membot.serve.desk import MemoryDesk

INSTRUCTIONS = (
    "The long-term memory of one conversation with membot, an assistant that remembers: "
    "search what was said (search_memory), and see, add or drop the facts it keeps "
    "(list_facts, remember, forget_fact)."
)

_T = TypeVar("_T")

# An ASGI app, typed loosely: Starlette's and uvicorn's types stay theirs.
Scope = dict[str, Any]
Asgi = Any


def build_server(desk: MemoryDesk) -> MCPServer:
    """The server for one conversation's memory. Log level WARNING: the SDK's INFO lines
    would name each call, and a call's text is the user's."""
    server = MCPServer("membot", instructions=INSTRUCTIONS, log_level="WARNING")

    @server.tool()
    async def search_memory(
        query: Annotated[str, Field(min_length=1, max_length=500, description="Keywords")],
        since: Annotated[
            str | None, Field(max_length=40, description="Only from this day on: 2025-06-01")
        ] = None,
        until: Annotated[
            str | None, Field(max_length=40, description="Only up to this day, inclusive")
        ] = None,
    ) -> str:
        """Search the whole archive of the conversation: excerpts around the best matches,
        most relevant first, each message with its date and who wrote it."""
        return await _call(desk.search_memory(query, since, until))

    @server.tool()
    async def list_facts() -> str:
        """The facts membot keeps about the conversation, each with the id forget_fact
        takes, as JSON: [{"id": ..., "fact": ...}]."""
        facts = await _call(desk.list_facts())
        return json.dumps([{"id": f.id, "fact": f.text} for f in facts], ensure_ascii=False)

    @server.tool()
    async def remember(
        fact: Annotated[
            str,
            Field(
                min_length=1,
                max_length=MAX_FACT_CHARS,
                description="One short self-contained sentence: 'The user's name is Anna'",
            ),
        ],
    ) -> str:
        """Keep a fact: membot shows it in every prompt of the conversation from now on."""
        return await _call(desk.remember(fact))

    @server.tool()
    async def forget_fact(
        id: Annotated[str, Field(min_length=1, max_length=64, description="From list_facts")],
    ) -> str:
        """Stop keeping a fact, named by the id list_facts gives."""
        return await _call(desk.forget_fact(id))

    return server


async def _call(work: Awaitable[_T]) -> _T:
    try:
        return await work
    except Refused as exc:  # the calling agent reads it, as the model reads a tool's error
        raise ToolError(str(exc)) from None


def with_bearer(app: Asgi, tokens: Sequence[str]) -> Asgi:
    """`app` behind a bearer token: an HTTP request without one of `tokens` gets 401 JSON
    and never reaches the MCP server (compared in constant time)."""
    expected = [t.encode() for t in tokens]

    async def guarded(scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and not _allowed(scope, expected):
            body = json.dumps(
                {"error": {"code": "unauthorized", "message": "a valid bearer token is required"}}
            ).encode()
            headers = [
                (b"content-type", b"application/json"),
                (b"www-authenticate", b'Bearer realm="membot"'),
            ]
            await send({"type": "http.response.start", "status": 401, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        await app(scope, receive, send)

    return guarded


def _allowed(scope: Scope, expected: list[bytes]) -> bool:
    given = b""
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            scheme, _, token = bytes(value).partition(b" ")
            if scheme.lower() == b"bearer":
                given = token.strip()
    # Every token compared, so the time taken does not tell which one came close.
    found = False
    for token in expected:
        found |= bool(given) and hmac.compare_digest(given, token)
    return found
