"""One MCP server of MCP_CONFIG: its session, kept open by a task of its own, and its tools.

The SDK's `Client` does the protocol (the transport, the handshake, listing, calls, their
time limit); this keeps one open for as long as membot runs. Its task enters the client
and waits there: the SDK's transports are anyio task groups that must be left by the task
that entered them, and a Streamable HTTP transport whose requests fail cancels the body it
runs. A server that cannot be started or reached is logged once and tried again, sooner at
first, then at least every `MAX_RETRY` seconds; one lost mid-session likewise. While it is
away it has no tools, so no turn is offered them. Every `HEARTBEAT` seconds (and when a
call was refused, or the server says its tools changed) its tools are listed again: a
server that stopped answering is noticed, and one whose tools changed is offered them.
(The SDK's `ClientSessionGroup` names tools by what a server calls itself and keeps every
session in one exit stack, entered and left in one task: it cannot retry one server on its
own.)

A stdio server gets only the environment its entry names and the SDK's safe defaults
(`get_default_environment`: PATH, HOME, ...), never membot's own.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection
from typing import Any

from mcp.client.session import IncomingMessage
from mcp_types import (
    CONNECTION_CLOSED,
    REQUEST_TIMEOUT,
    ImageContent,
    Implementation,
    ToolListChangedNotification,
)
from mcp_types import Tool as McpTool
from pydantic import ValidationError

from mcp import Client, MCPError
from membot.config import McpServerEntry
from membot.errors import Unavailable
from membot.llm.tools import Tool, ToolError, ToolOutput, schema_tool
from membot.mcp.results import to_output
from membot.mcp.schema import provider_schema, tool_name
from membot.mcp.transport import describe, transport

log = logging.getLogger(__name__)

FIRST_RETRY = 0.5  # seconds before the first retry; doubled each time, up to MAX_RETRY
MAX_RETRY = 30.0
# Seconds between two listings of an open session's tools: a server that stopped answering
# is noticed (a call to it notices at once), changed tools are offered. Not more often: a
# server may log every request it gets.
HEARTBEAT = 30.0
LIST_TIMEOUT = 15.0  # a listing (the first, a heartbeat) that takes longer: the server is lost
CLOSE_TIMEOUT = 10.0  # a session's close (a stdio child: stdin closed, TERM, KILL) at shutdown
MAX_DESCRIPTION = 1024  # characters of a tool's description the model is shown
_MAX_PAGES = 20
_CLIENT = Implementation(name="membot", version="0.1.0")


class McpServerLost(Unavailable):
    """An MCP server's session stopped answering (a call found it closed, a listing failed):
    it is opened again in the background."""


class McpServer:
    """A server's session and its tools (`tools`, empty while it is away)."""

    def __init__(
        self,
        entry: McpServerEntry,
        *,
        public: bool,
        timeout: float,
        reserved: Collection[str] = (),
        on_change: Callable[[], None] = lambda: None,
    ) -> None:
        self.entry = entry
        self.name = entry.name
        self.public = public
        self.timeout = timeout
        self.reserved = frozenset(reserved)
        self.on_change = on_change
        self.tools: tuple[Tool, ...] = ()
        self.tried = asyncio.Event()  # the first attempt has ended, whatever came of it
        self._listed: list[tuple[str, str, Any]] = []  # what the tools were made from
        self._client: Client | None = None
        self._closing = asyncio.Event()
        self._lost = asyncio.Event()
        self._refresh = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._said = False  # a failure was logged; quiet until it is up again
        self._was_up = False  # the last session got as far as publishing its tools

    @property
    def up(self) -> bool:
        return self._client is not None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"membot:mcp:{self.name}")

    async def aclose(self) -> None:
        """Close the session (a stdio child exits) and stop trying."""
        self._closing.set()
        task, self._task = self._task, None
        if task is None:
            return
        if self._client is None:  # connecting, or waiting to try again: nothing to end well
            task.cancel()
        await asyncio.wait({task}, timeout=CLOSE_TIMEOUT)
        task.cancel()  # a session that would not close in time (no-op once it has ended)
        await asyncio.gather(task, return_exceptions=True)

    # -- calls -------------------------------------------------------------------------------

    async def call(self, tool: str, arguments: dict[str, Any]) -> ToolOutput:
        """Call the server's `tool`; every failure is a ToolError for the model."""
        client = self._client
        if client is None:
            raise ToolError(f"the MCP server {self.name} is not reachable now; try again later")
        try:
            result = await client.call_tool(tool, arguments, read_timeout_seconds=self.timeout)
        except MCPError as exc:
            if exc.code == REQUEST_TIMEOUT:
                raise ToolError(f"{tool} did not finish within {self.timeout:g} s") from None
            if exc.code == CONNECTION_CLOSED:
                self._lose()
                raise ToolError(
                    f"the MCP server {self.name} was lost during the call; it is being "
                    "started again"
                ) from None
            self._refresh.set()  # "Session terminated" (a server restarted)? a listing tells
            raise ToolError(f"the MCP server {self.name} refused the call: {exc}") from None
        except ValidationError:
            raise ToolError(
                f"the MCP server {self.name} answered with an unreadable result"
            ) from None
        except Exception as exc:
            self._lose()
            raise ToolError(
                f"the MCP server {self.name} could not be reached ({type(exc).__name__})"
            ) from None
        if any(isinstance(block, ImageContent) for block in result.content):
            # Up to MAX_IMAGES base64 images of 10 MB each: decoded off the event loop.
            return await asyncio.to_thread(to_output, result)
        return to_output(result)

    def _lose(self) -> None:
        if self._client is not None:
            self._lost.set()

    # -- the session -------------------------------------------------------------------------

    async def _run(self) -> None:
        delay = FIRST_RETRY
        while not self._closing.is_set():
            self._was_up = False
            try:
                await self._session()
            except BaseException as exc:
                # An anyio group may carry a cancellation of the transport's own with the
                # failure: only this task's own cancellation (membot stops) ends the loop.
                task = asyncio.current_task()
                if not isinstance(exc, Exception | BaseExceptionGroup) or (
                    task is not None and task.cancelling()
                ):
                    raise
                self._failed(exc)
            finally:
                self._publish(None, [])
                self.tried.set()
            if self._closing.is_set():
                return
            if self._was_up:  # lost after a while up: try again soon
                delay = FIRST_RETRY
            try:
                await asyncio.wait_for(self._closing.wait(), delay)
            except TimeoutError:
                delay = min(delay * 2, MAX_RETRY)

    async def _session(self) -> None:
        """Open the session, publish its tools, keep it until it is lost or membot stops."""
        self._lost.clear()
        async with Client(
            transport(self.entry),
            client_info=_CLIENT,
            message_handler=self._on_message,
            # The handshake and listings; a call has its own (MCP_TOOL_TIMEOUT).
            read_timeout_seconds=LIST_TIMEOUT,
            cache=None,
        ) as client:
            listed = await asyncio.wait_for(self._list(client), LIST_TIMEOUT)
            self._publish(client, listed)
            self._was_up = True
            if self._said:
                log.info("mcp server %s: up again, %d tools", self.name, len(self.tools))
            else:
                log.info("mcp server %s: connected, %d tools", self.name, len(self.tools))
            self._said = False
            self.tried.set()
            while not await self._wait():
                if self._lost.is_set():
                    raise McpServerLost("a call found the session closed")
                self._refresh.clear()
                try:
                    listed = await asyncio.wait_for(self._list(client), LIST_TIMEOUT)
                except Exception as exc:
                    raise McpServerLost(describe(exc)) from None
                self._publish(client, listed)

    async def _wait(self) -> bool:
        """Until membot stops (True), the session is lost, its tools changed or the next
        heartbeat is due (False)."""
        events = (self._closing, self._lost, self._refresh)
        waits = [asyncio.ensure_future(e.wait()) for e in events]
        try:
            await asyncio.wait(waits, timeout=HEARTBEAT, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()
        return self._closing.is_set()

    async def _list(self, client: Client) -> list[McpTool]:
        tools: list[McpTool] = []
        cursor: str | None = None
        for _ in range(_MAX_PAGES):
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        return tools

    async def _on_message(self, message: IncomingMessage) -> None:
        if isinstance(message, ToolListChangedNotification):
            self._refresh.set()
        elif isinstance(message, Exception):  # the transport's: is the session still there?
            log.debug("mcp server %s: %s", self.name, describe(message))
            self._refresh.set()

    # -- tools -------------------------------------------------------------------------------

    def _publish(self, client: Client | None, listed: list[McpTool]) -> None:
        self._client = client
        made = [(t.name, t.description or t.title or "", t.input_schema) for t in listed]
        if made == self._listed:
            return
        self._listed = made
        taken = set(self.reserved)
        tools = []
        for original, description, schema in made:
            name = tool_name(self.name, original, taken)
            if name != f"{self.name}_{original}":
                log.warning("mcp server %s: tool %r offered as %s", self.name, original, name)
            taken.add(name)
            tools.append(
                schema_tool(
                    name,
                    (description or f"{original}, a tool of {self.name}")[:MAX_DESCRIPTION],
                    provider_schema(schema),
                    self._caller(original),
                    # The SDK ends the call at MCP_TOOL_TIMEOUT; this is only a backstop.
                    timeout=self.timeout + 5.0,
                    outside=True,
                )
            )
        self.tools = tuple(tools)
        self.on_change()

    def _caller(self, tool: str) -> Callable[..., Any]:
        async def call(**arguments: Any) -> ToolOutput:
            return await self.call(tool, arguments)

        return call

    def _failed(self, exc: BaseException) -> None:
        lost = self._client is not None or isinstance(exc, McpServerLost)
        if self._said:
            log.debug("mcp server %s: still away (%s)", self.name, describe(exc))
            return
        self._said = True
        what = "lost" if lost else "cannot be reached"
        log.warning(
            "mcp server %s: %s (%s); membot goes on without its tools and tries again "
            "at least every %g s",
            self.name,
            what,
            describe(exc),
            MAX_RETRY,
        )
