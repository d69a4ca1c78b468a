"""Who is offered which MCP server's tools (core/offers.py): MCP_PUBLIC's in every turn, the
others only in a Telegram turn of an ADMIN_USER_IDS user, never in an API session's (it is
nobody's); the same prompt bytes from turn to turn while the servers' tools do not change.
Real servers (tests/fakes/mcp_servers.py) as child processes."""

from __future__ import annotations

import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from membot.config import McpServerEntry, McpSettings
from membot.core.agent import Agent
from membot.core.prompt import PromptBuilder
from membot.core.summarizer import Summarizer
from membot.core.turn import Incoming
from membot.ids import ConversationId
from membot.llm.tools import ToolExecutor, ToolRegistry, make_mode
from membot.mcp.hub import McpTools
from membot.memory import MemoryRepository
from membot.tasks import TaskSupervisor
from membot.tool_names import BUILTIN_TOOL_NAMES
from tests.scripted import RecordingSink, ScriptedModel

ROOT = Path(__file__).resolve().parents[3]
ADMIN, USER = 1, 2
CHAT = ConversationId.telegram(-100)
SESSION = ConversationId.api(uuid.UUID("6f1c2d3e-4b5a-4c7d-9e8f-0a1b2c3d4e5f"))


def entry(name: str) -> McpServerEntry:
    args = ("-m", "tests.fakes.mcp_servers")
    return McpServerEntry(name, command=sys.executable, args=args, cwd=str(ROOT))


@pytest.fixture
async def mcp() -> AsyncIterator[McpTools]:
    settings = McpSettings(
        config=None,
        servers=(entry("pub"), entry("priv")),
        public=frozenset({"pub"}),
        tool_timeout=5.0,
    )
    tools = McpTools(settings, reserved=BUILTIN_TOOL_NAMES)
    await tools.start()
    yield tools
    await tools.aclose()


def make_agent(model: ScriptedModel, repo: MemoryRepository, mcp: McpTools, mode: str) -> Agent:
    return Agent(
        model=model,
        repository=repo,
        prompts=PromptBuilder("You are the test assistant."),
        summarizer=Summarizer(model, repo, every=1000),
        window_size=20,
        tools=ToolExecutor(ToolRegistry(), timeout=5),
        tool_mode=make_mode("hermes" if mode == "hermes" else "native"),
        tasks=TaskSupervisor(),
        detect=lambda text: None,
        mcp=mcp,
        admins=frozenset({ADMIN}),
    )


def servers(names: list[str]) -> set[str]:
    return {name.split("_", 1)[0] for name in names}


async def test_public_servers_for_everyone_the_others_for_admins_in_telegram_only(
    model: ScriptedModel, repo: MemoryRepository, mcp: McpTools
) -> None:
    agent = make_agent(model, repo, mcp, "native")
    model.script("Hi.", "Hi.", "Hi.", "Hi.")
    await agent.respond(Incoming(CHAT, "hello", user_id=USER), RecordingSink())
    await agent.respond(Incoming(CHAT, "hello", user_id=ADMIN), RecordingSink())
    await agent.respond(Incoming(SESSION, "hello"), RecordingSink())
    # Even a session whose turn carried an admin's id: API sessions get public servers only.
    await agent.respond(Incoming(SESSION, "hello", user_id=ADMIN), RecordingSink())
    user, admin, api, api_admin = model.chat_requests
    assert servers(user.tool_names) == {"pub"}
    assert servers(admin.tool_names) == {"pub", "priv"}
    assert servers(api.tool_names) == servers(api_admin.tool_names) == {"pub"}
    box = agent.offers.toolbox(tasks=False, admin=False)
    assert [s.name for s in box.servers] == ["pub"] and "pub_echo" in box.servers[0].tools
    assert [s.name for s in agent.offers.toolbox(tasks=False, admin=True).servers] == [
        "pub",
        "priv",
    ]


async def test_the_hermes_prompt_is_the_same_bytes_while_the_tools_are(
    model: ScriptedModel, repo: MemoryRepository, mcp: McpTools
) -> None:
    agent = make_agent(model, repo, mcp, "hermes")
    model.script("One.", "Two.", "Three.")
    for text in ("one", "two", "three"):  # the first turn's prompt says it is the first
        await agent.respond(Incoming(CHAT, text, user_id=USER), RecordingSink())
    _, second, third = model.chat_requests
    assert '"name": "pub_echo"' in second.system and "priv_" not in second.system
    assert second.system == third.system
    assert agent.offers.for_turn(False, False) is agent.offers.for_turn(False, False)
