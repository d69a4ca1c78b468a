"""Every server of MCP_CONFIG, and which of their tools a turn is offered.

`McpTools` starts a session per server (membot.mcp.server), waits a little at start-up so a
server that comes up at once is offered from the first message, and closes them at shutdown.
A turn is offered the tools of the servers that are up: those MCP_PUBLIC names to everyone,
the others only where an ADMIN_USER_IDS user is talking (the core decides who is:
core/offers.py). `version` changes whenever a server's tools do, so the core rebuilds an
offer (and a Hermes prompt's tool list) only then."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection
from dataclasses import dataclass

from membot.config import McpSettings
from membot.llm.tools import Tool

log = logging.getLogger(__name__)

START_WAIT = 10.0  # seconds start-up waits for the servers' first attempts, at most


@dataclass(frozen=True, slots=True)
class ServerTools:
    """A server as `/tools` shows it: whether it is up and the names of its tools."""

    name: str
    public: bool
    up: bool
    tools: tuple[str, ...]


class McpTools:
    """The servers' sessions and their tools (see the module's docstring)."""

    def __init__(self, mcp: McpSettings, reserved: Collection[str] = ()) -> None:
        # The SDK takes ~0.6 s to import: only a process with servers to reach pays for it.
        from membot.mcp.server import McpServer

        self.version = 0
        self.servers = [
            McpServer(
                entry,
                public=entry.name in mcp.public,
                timeout=mcp.tool_timeout,
                reserved=reserved,
                on_change=self._changed,
            )
            for entry in mcp.servers
            if not entry.disabled
        ]
        self._offered: dict[tuple[int, bool], tuple[Tool, ...]] = {}
        self._started = False

    def __bool__(self) -> bool:
        return bool(self.servers)

    async def start(self, wait: float = START_WAIT) -> None:
        """Start every server's session; wait until each has tried once (up to `wait`)."""
        if self._started or not self.servers:
            return
        self._started = True
        for server in self.servers:
            server.start()
        tries = [asyncio.ensure_future(server.tried.wait()) for server in self.servers]
        try:
            await asyncio.wait(tries, timeout=wait)
        finally:
            for attempt in tries:
                attempt.cancel()
        up = sum(server.up for server in self.servers)
        log.info("mcp: %d of %d servers up", up, len(self.servers))

    async def aclose(self) -> None:
        await asyncio.gather(*(server.aclose() for server in self.servers))

    def offered(self, admin: bool) -> tuple[Tool, ...]:
        """The tools a turn is offered: the public servers', and the others' for an admin;
        the same tuple until a server's tools change."""
        key = (self.version, admin)
        tools = self._offered.get(key)
        if tools is None:
            tools = self._collect(admin)
            self._offered = {k: v for k, v in self._offered.items() if k[0] == self.version}
            self._offered[key] = tools
        return tools

    def listing(self, admin: bool) -> list[ServerTools]:
        """The servers a chat may use (the public ones; every one for an admin)."""
        offered = {tool.name for tool in self.offered(admin)}
        return [
            ServerTools(
                name=server.name,
                public=server.public,
                up=server.up,
                tools=tuple(t.name for t in server.tools if t.name in offered),
            )
            for server in self.servers
            if server.public or admin
        ]

    def _collect(self, admin: bool) -> tuple[Tool, ...]:
        tools: list[Tool] = []
        seen: set[str] = set()
        for server in self.servers:
            if not (server.public or admin):
                continue
            for tool in server.tools:
                # `a` with `b_c` and `a_b` with `c`: the first server in MCP_CONFIG keeps it.
                if tool.name in seen:
                    log.warning(
                        "mcp server %s: tool %s left out (another's name)", server.name, tool.name
                    )
                    continue
                seen.add(tool.name)
                tools.append(tool)
        return tuple(tools)

    def _changed(self) -> None:
        self.version += 1
