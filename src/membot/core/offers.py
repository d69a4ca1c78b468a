"""What a turn is offered: its tools and the system-prompt text that goes with them.

Two things decide it: whether the model may start a consultation (plain chat, where the
front door allows it) and whether it may set tasks (a Telegram chat with TASKS on: an HTTP
API session has no way to be reached later). Each combination's registry and text are made
once, so a conversation's system prompt is the same bytes from turn to turn (a provider's
prefix cache serves it)."""

from __future__ import annotations

from dataclasses import dataclass

from membot.core.tools.tasks import TASKS_NOTE
from membot.llm.tools import ToolMode, ToolRegistry
from membot.tool_names import CONSULTATION_TOOL, TASK_TOOLS


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


class Offers:
    """Every tool the agent has (`registry`), and the offer for each kind of turn."""

    def __init__(self, registry: ToolRegistry, mode: ToolMode) -> None:
        self.registry = registry
        without = registry.subset(n for n in registry.names() if n not in TASK_TOOLS)
        self.chat = Offer.of(without, mode)
        self.with_tasks = Offer.of(registry, mode) if len(without) < len(registry) else self.chat

    def for_turn(self, tasks: bool) -> Offer:
        return self.with_tasks if tasks else self.chat
