"""`membot mcp`: one conversation's memory served to another agent, end to end. The official
SDK's client starts a real `membot mcp` process over stdio (and talks to one over Streamable
HTTP), beside the real bot answering on the fakes, on files and on Redis: what the agent
searches is what the chat said, what it remembers reaches the bot's next prompt, and nothing
of another conversation is reachable."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, TextContent

from mcp import Client, StdioServerParameters
from membot.memory.redis import RedisRepository
from tests import api_support
from tests.api_support import StartApi, free_port
from tests.conftest import StartBot
from tests.e2e.helpers import system_prompt
from tests.e2e.test_tools import ask
from tests.fakes import FakeLLM, FakeTelegram
from tests.fakes.process import membot_env, spawn_membot
from tests.v1_support import openai_client

CHAT = 5150
OTHER = 5151
REDIS_URL = "redis://127.0.0.1:6379/0"
TOKEN = "mcp-test-token-0123456789"

start_api = api_support.start_api


def storage_env(data_dir: Path, redis: RedisRepository | None) -> dict[str, str]:
    env = {"data_dir": str(data_dir), "log_level": "WARNING"}
    if redis is not None:
        env.update(storage="redis", redis_url=REDIS_URL, redis_prefix=redis.prefix)
    return env


@asynccontextmanager
async def memory_of(
    chat: int | None, cwd: Path, user: str | None = None, **env: str
) -> AsyncIterator[Client]:
    """An MCP client of `membot mcp --chat CHAT` (or `--user USER`), its child over stdio."""
    which = ["--chat", str(chat)] if user is None else ["--user", user]
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "membot", "mcp", *which],
        env=membot_env(**env),
        cwd=str(cwd),
    )
    async with Client(params, read_timeout_seconds=30) as client:
        yield client


def text_of(result: CallToolResult) -> str:
    assert all(isinstance(block, TextContent) for block in result.content)
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


async def call(client: Client, tool: str, **arguments: Any) -> str:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, text_of(result)
    return text_of(result)


@pytest.fixture(params=["files", "redis"])
async def redis(
    request: pytest.FixtureRequest, redis_repo: RedisRepository
) -> RedisRepository | None:
    return redis_repo if request.param == "redis" else None


async def test_an_agent_searches_and_corrects_the_memory_of_a_running_bot(
    tg: FakeTelegram,
    llm: FakeLLM,
    start_bot: StartBot,
    data_dir: Path,
    tmp_path: Path,
    redis: RedisRepository | None,
) -> None:
    settings = storage_env(data_dir, redis)
    await start_bot(**{k: v for k, v in settings.items() if k != "log_level"})
    await ask(tg, "My cat is called Tiberius and he hates the vacuum cleaner", 1, CHAT)

    async with memory_of(CHAT, tmp_path, **settings) as agent:
        names = {tool.name for tool in (await agent.list_tools()).tools}
        assert names == {"search_memory", "list_facts", "remember", "forget_fact"}
        found = await call(agent, "search_memory", query="vacuum cleaner")
        assert "Tiberius" in found

        said = await call(agent, "remember", fact="The user drinks green tea every morning")
        assert said.startswith("Remembered")
        await ask(tg, "What do I drink?", 1, CHAT)
        assert "green tea every morning" in system_prompt(llm.chat_requests[-1])

        facts = json.loads(await call(agent, "list_facts"))
        [tea] = [f for f in facts if "green tea" in f["fact"]]
        assert (await call(agent, "forget_fact", id=tea["id"])).startswith("Forgot")
        again = await agent.call_tool("forget_fact", {"id": tea["id"]})
        assert again.is_error and "list_facts" in text_of(again)

    await ask(tg, "And now?", 1, CHAT)
    assert "green tea" not in system_prompt(llm.chat_requests[-1])


async def test_nothing_of_another_conversation_is_reachable(
    tg: FakeTelegram, start_bot: StartBot, data_dir: Path, tmp_path: Path
) -> None:
    await start_bot()
    await ask(tg, "The launch code word is aardvark", 1, OTHER)
    await ask(tg, "Let us talk about gardening", 1, CHAT)
    async with memory_of(CHAT, tmp_path, data_dir=str(data_dir)) as agent:
        assert "aardvark" not in await call(agent, "search_memory", query="aardvark launch code")
        assert "gardening" in await call(agent, "search_memory", query="gardening")
        # No call names a conversation: the one served is fixed when the server starts.
        for tool in (await agent.list_tools()).tools:
            assert set(tool.input_schema.get("properties", {})) <= {
                "query",
                "since",
                "until",
                "fact",
                "id",
            }

    # A conversation the storage does not hold is refused before anything is served.
    proc = await spawn_membot(
        tmp_path,
        membot_env(data_dir=str(data_dir)),
        "mcp",
        "--chat",
        "4242",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 2 and out == b""
    assert err.decode().strip() == (
        "membot mcp: no conversation 4242 in the storage (STORAGE, DATA_DIR)"
    )


async def test_over_http_every_request_needs_an_api_token(
    tg: FakeTelegram, start_bot: StartBot, data_dir: Path, tmp_path: Path
) -> None:
    await start_bot()
    await ask(tg, "Remember the blue door on Rua Augusta", 1, CHAT)
    port = free_port()
    proc = await spawn_membot(
        tmp_path,
        membot_env(data_dir=str(data_dir), api_tokens=TOKEN, log_level="WARNING"),
        "mcp",
        "--chat",
        str(CHAT),
        "--http",
        f"127.0.0.1:{port}",
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        async with httpx2.AsyncClient(timeout=10) as http:

            async def listening() -> bool:
                try:
                    await http.get(url)
                except httpx2.TransportError:
                    return False
                return True

            await until_async(listening, 60)
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
                refused = await http.post(url, json={}, headers=headers)
                assert refused.status_code == 401
                assert refused.json()["error"]["code"] == "unauthorized"

        bearer = {"Authorization": f"Bearer {TOKEN}"}
        async with (
            httpx2.AsyncClient(headers=bearer, timeout=30) as http,
            Client(streamable_http_client(url, http_client=http)) as agent,
        ):
            assert "blue door" in await call(agent, "search_memory", query="blue door")
    finally:
        proc.terminate()
        await proc.wait()


async def until_async(check: Any, timeout: float) -> None:
    """`until` for a coroutine check."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not await check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("membot mcp did not start listening")
        await asyncio.sleep(0.1)


async def test_the_memory_of_a_v1_caller_by_its_user(
    start_api: StartApi, data_dir: Path, tmp_path: Path
) -> None:
    api = await start_api()
    async with openai_client(api) as client:
        for user, text in (("ana", "My bike is a green Brompton"), ("bo", "My bike is red")):
            await client.chat.completions.create(
                model="membot", messages=[{"role": "user", "content": text}], user=user
            )
    async with memory_of(None, tmp_path, user="ana", data_dir=str(data_dir)) as agent:
        found = await call(agent, "search_memory", query="bike")
        assert "green Brompton" in found and "red" not in found
