"""How a server of MCP_CONFIG is reached: the SDK's stdio transport (a child process) or its
Streamable HTTP one, with the entry's headers; and a failure said in one line for the log."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import httpx2
from mcp.client.streamable_http import streamable_http_client

from mcp import StdioServerParameters, stdio_client
from membot.config import McpServerEntry

_URL = re.compile(r"\b\w+://\S+")


def transport(entry: McpServerEntry) -> AbstractAsyncContextManager[Any]:
    """The transport `Client` opens for `entry`. A stdio child's environment is the entry's
    `env` over the SDK's safe defaults (PATH, HOME, ...: get_default_environment), nothing
    of membot's own."""
    if entry.command is None:
        return _http(entry.url or "", entry.headers)
    return stdio_client(
        StdioServerParameters(
            command=entry.command, args=list(entry.args), env=dict(entry.env), cwd=entry.cwd
        )
    )


@asynccontextmanager
async def _http(url: str, headers: Mapping[str, str]) -> AsyncIterator[Any]:
    """Streamable HTTP with the entry's headers: the SDK takes them on an httpx2 client of
    ours, with its own timeouts (create_mcp_http_client's: a listening stream reads long)."""
    timeout = httpx2.Timeout(30.0, read=300.0)
    async with (
        httpx2.AsyncClient(headers=dict(headers), timeout=timeout) as http,
        streamable_http_client(url, http_client=http) as streams,
    ):
        yield streams


def describe(exc: BaseException) -> str:
    """One line for the log: the innermost failure (an anyio group's first), without URLs
    (a query string may hold a token)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = _URL.sub("<url>", str(exc)).strip()
    return f"{type(exc).__name__}: {text[:200]}" if text else type(exc).__name__
