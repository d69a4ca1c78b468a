"""What a turn is offered: its tools and the system-prompt text that goes with them.

Three things decide it: whether the model may start a consultation (plain chat, where the
front door allows it), whether it may set tasks (a Telegram chat with TASKS on: an HTTP
API session has no way to be reached later) and which MCP servers' tools it gets (those of
MCP_PUBLIC everywhere; the others only in a Telegram turn whose user is in ADMIN_USER_IDS:
an API session is nobody's, so public servers only). Each combination's registry and text
are made once (again only when a server's tools change), so a conversation's system prompt
is the same bytes from turn to turn (a provider's prefix cache serves it)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from membot.core.tools.tasks import TASKS_NOTE
from membot.ids import TELEGRAM, ConversationId
from membot.llm.tools import ToolMode, ToolRegistry
from membot.tool_names import BUILTIN_TOOL_NAMES, CONSULTATION_TOOL, TASK_TOOLS

if TYPE_CHECKING:  # the SDK is imported only where MCP_CONFIG names servers
    from membot.mcp.hub import McpTools, ServerTools


@dataclass(frozen=True, slots=True)
class Offer:
    """The tools of one kind of turn, with and without `start_consultation`, and their
    system sections (a Hermes mode's tool list, the tasks note)."""

    full: ToolRegistry
    no_consult: ToolRegistry
    sections_full: tuple[str, ...]
    sections_no_consult: tuple[str, ...]

    @classmethod
    def of(cls, registry: ToolRegistry, mode: ToolMode) -> Offer:
        no_consult = registry.subset(n for n in registry.names() if n != CONSULTATION_TOOL)
        # Said only where the model can act on it: schedule_task is there.
        note = (TASKS_NOTE,) if registry.get(TASK_TOOLS[0]) is not None else ()

        def sections(offered: ToolRegistry) -> tuple[str, ...]:
            section = mode.system_section(offered)
            return (*([section] if section else []), *note)

        return cls(registry, no_consult, sections(registry), sections(no_consult))

    def registry(self, consult: bool) -> ToolRegistry:
        return self.full if consult else self.no_consult

    def sections(self, consult: bool) -> list[str]:
        return list(self.sections_full if consult else self.sections_no_consult)


@dataclass(frozen=True, slots=True)
class Toolbox:
    """What `/tools` shows a chat: the built-ins, the task tools, the MCP servers'."""

    builtin: tuple[str, ...]
    tasks: tuple[str, ...]
    servers: tuple[ServerTools, ...]


class Offers:
    """Every built-in the agent has (`registry`), the MCP servers' tools, and the offer for
    each kind of turn."""

    def __init__(
        self,
        registry: ToolRegistry,
        mode: ToolMode,
        mcp: McpTools | None = None,
        admins: Iterable[int] = (),
    ) -> None:
        self.registry = registry
        self.mode = mode
        self.mcp = mcp if mcp else None
        self.admins = frozenset(admins)  # ADMIN_USER_IDS
        without = registry.subset(n for n in registry.names() if n not in TASK_TOOLS)
        self.chat = Offer.of(without, mode)
        self.with_tasks = Offer.of(registry, mode) if len(without) < len(registry) else self.chat
        self._mcp_offers: dict[tuple[bool, bool, int], Offer] = {}

    def admin(self, conversation: ConversationId, user_id: int | None) -> bool:
        """Whether the turn's user may use every MCP server: an ADMIN_USER_IDS user talking
        in Telegram (an API session's turns are nobody's)."""
        return conversation.namespace == TELEGRAM and user_id in self.admins

    def for_turn(self, tasks: bool, admin: bool = False) -> Offer:
        base = self.with_tasks if tasks else self.chat
        if self.mcp is None:
            return base
        key = (tasks, admin, self.mcp.version)
        offer = self._mcp_offers.get(key)
        if offer is None:
            tools = self.mcp.offered(admin)
            offer = Offer.of(ToolRegistry([*base.full, *tools]), self.mode) if tools else base
            version = self.mcp.version
            self._mcp_offers = {k: v for k, v in self._mcp_offers.items() if k[2] == version}
            self._mcp_offers[key] = offer
        return offer

    def toolbox(self, tasks: bool, admin: bool, consulting: bool = False) -> Toolbox:
        """What a chat may use now (`/tools`)."""
        offered = self.for_turn(tasks, admin).registry(consult=not consulting).names()
        return Toolbox(
            builtin=tuple(n for n in offered if n in BUILTIN_TOOL_NAMES and n not in TASK_TOOLS),
            tasks=tuple(n for n in offered if n in TASK_TOOLS),
            servers=tuple(self.mcp.listing(admin)) if self.mcp is not None else (),
        )
