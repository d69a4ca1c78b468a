"""`membot mcp`'s server in process: the official SDK's client talking to `build_server` over
a real conversation in the file backend (tests/e2e/test_memory_mcp.py runs the command)."""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from mcp.server.mcpserver import MCPServer
from mcp_types import TextContent

from mcp import Client
from membot.core.tools.builtin import MAX_FACT_CHARS, MAX_FACTS
from membot.ids import ConversationId
from membot.memory import FileRepository, Message
from membot.memory.files.smallfiles import add_fact, read_facts
from membot.search import HistorySearch
from membot.serve.cli import run_mcp
from membot.serve.desk import MemoryDesk, fact_id
from membot.serve.server import build_server

CHAT = ConversationId.telegram(77)
NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)


@pytest.fixture
async def repo(tmp_path: Path) -> AsyncIterator[FileRepository]:
    repository = FileRepository(tmp_path)
    await repository.append(
        CHAT,
        [
            Message(role="user", content="I planted tomatoes by the fence", ts=NOW, name="Ana"),
            Message(role="assistant", content="They like sun", ts=NOW + timedelta(seconds=5)),
        ],
    )
    yield repository
    await repository.close()


@pytest.fixture
def server(repo: FileRepository, tmp_path: Path) -> MCPServer:
    desk = MemoryDesk(
        repo, HistorySearch(repo, tmp_path), CHAT, budget_tokens=2000, clock=lambda: NOW
    )
    return build_server(desk)


async def said(agent: Client, tool: str, **arguments: object) -> tuple[bool, str]:
    result = await agent.call_tool(tool, dict(arguments))
    text = "\n".join(b.text for b in result.content if isinstance(b, TextContent))
    return bool(result.is_error), text


async def test_the_search_is_search_history_s(server: MCPServer) -> None:
    async with Client(server) as agent:
        error, text = await said(agent, "search_memory", query="tomatoes")
        assert not error and "I planted tomatoes by the fence" in text and "2026-03-10" in text
        error, text = await said(agent, "search_memory", query="tomatoes", since="2027-01-01")
        assert not error and text == "No matching messages found."
        error, text = await said(agent, "search_memory", query="tomatoes", since="last spring")
        assert error and "since" in text


async def test_facts_are_kept_listed_by_id_and_forgotten(
    server: MCPServer, repo: FileRepository
) -> None:
    async with Client(server) as agent:
        error, text = await said(agent, "remember", fact="  The user grows   tomatoes ")
        fact = "The user grows tomatoes"
        assert not error and text == f"Remembered (id {fact_id(fact)}): {fact}"
        assert (await said(agent, "remember", fact=fact.upper()))[1].startswith(
            "Already remembered"
        )
        await said(agent, "remember", fact="The user lives in Braga")
        error, listed = await said(agent, "list_facts")
        assert json.loads(listed) == [
            {"id": fact_id(fact), "fact": fact},
            {"id": fact_id("The user lives in Braga"), "fact": "The user lives in Braga"},
        ]
        assert (await said(agent, "forget_fact", id=fact_id(fact))) == (False, f"Forgot: {fact}")
        assert await repo.get_facts(CHAT) == ["The user lives in Braga"]
        error, text = await said(agent, "forget_fact", id="0123456789ab")
        assert error and "list_facts" in text


async def test_a_fact_too_long_or_one_too_many_is_refused(
    server: MCPServer, repo: FileRepository
) -> None:
    async with Client(server) as agent:
        error, _ = await said(agent, "remember", fact="x" * (MAX_FACT_CHARS + 1))
        assert error
        for n in range(MAX_FACTS):
            await repo.add_fact(CHAT, f"fact number {n}", MAX_FACTS)
        error, text = await said(agent, "remember", fact="one more")
        assert error and "forget some first" in text


def test_facts_written_at_once_from_two_writers_are_all_kept(tmp_path: Path) -> None:
    # The bot and a `membot mcp` beside it each replace facts.json: the lock keeps both.
    directory = tmp_path / "chat"

    def write(who: str) -> None:
        for n in range(40):
            add_fact(directory, f"{who} {n}", 1000)

    writers = [threading.Thread(target=write, args=(who,)) for who in ("bot", "agent")]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join()
    assert len(read_facts(directory / "facts.json")) == 80


@pytest.mark.parametrize(
    ("args", "line"),
    [
        ({"chat": "seventy"}, "--chat must be a Telegram chat id (an integer), not 'seventy'"),
        ({"session": "nope"}, "--session must be an API session id (a UUID), not 'nope'"),
        ({}, "name one conversation: --chat CHAT_ID, --session SESSION_ID or --user ID"),
        ({"user": " "}, "--user must name the /v1 endpoint's user, not be empty"),
        ({"chat": "77", "http": "8080"}, "--http must be HOST:PORT, such as 127.0.0.1:8765"),
    ],
)
def test_a_bad_command_line_is_one_line_and_status_2(
    args: dict[str, str], line: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status = run_mcp(
        chat=args.get("chat"),
        session=args.get("session"),
        user=args.get("user"),
        http=args.get("http"),
        data_dir=None,
    )
    assert status == 2
    assert capsys.readouterr().err.startswith(f"membot mcp: {line}")


def test_http_without_api_tokens_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)  # no .env of the developer's
    monkeypatch.delenv("API_TOKENS", raising=False)
    status = run_mcp(chat="77", session=None, http="127.0.0.1:8765", data_dir=tmp_path)
    assert status == 2
    assert "--http needs API_TOKENS" in capsys.readouterr().err
