"""The prompt on the wire: `cache_control` breakpoints after the head and the window
for Anthropic's and Google's models and none for the others; the fake model reports the
repeated prefix as cached tokens, which the usage ledger keeps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import StartBot
from tests.fakes import FakeLLM, FakeTelegram, without_now

CHAT = 1901


async def say(tg: FakeTelegram, text: str) -> None:
    before = len(tg.messages_to(CHAT))
    tg.push_text(CHAT, text)
    await tg.wait_for_messages(CHAT, before + 1)


def breakpoints(body: dict[str, object]) -> list[str]:
    """The roles of the messages whose last content part carries a breakpoint."""
    marked = []
    for message in body["messages"]:  # type: ignore[attr-defined]
        content = message.get("content")
        if isinstance(content, list) and content and "cache_control" in content[-1]:
            assert content[-1]["cache_control"] == {"type": "ephemeral"}
            marked.append(message["role"])
        else:
            assert "cache_control" not in json.dumps(message)
    return marked


@pytest.mark.parametrize("model", ["anthropic/claude-sonnet-4.5", "google/gemini-2.5-flash"])
async def test_breakpoints_after_the_head_and_the_window(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, model: str
) -> None:
    await start_bot(openrouter_model=model)
    await say(tg, "hello")
    await say(tg, "and again")
    first, second = llm.chat_requests
    assert breakpoints(first) == ["system"]  # no window yet
    assert breakpoints(second) == ["system", "assistant"]
    assert second["messages"][-2]["content"][-1]["text"] == "ANSWER: hello"
    # The new message (with the chat's time before it) follows the window's breakpoint.
    assert second["messages"][-1]["role"] == "user"
    assert without_now(second["messages"][-1]["content"]) == "and again"


async def test_no_breakpoints_for_models_that_cache_by_themselves(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    bot = await start_bot(openrouter_model="openai/gpt-5")
    await say(tg, "hello")
    await say(tg, "and again")
    await bot.stop()  # the ledger's records are written by then
    assert all("cache_control" not in json.dumps(body) for body in llm.requests)
    assert all(isinstance(m["content"], str) for m in llm.chat_requests[1]["messages"])
    # The second prompt repeats the first one's head and question: the fake served them from
    # its cache, and the ledger kept the count.
    charges = [json.loads(x) for x in (data_dir / "usage.jsonl").read_text().splitlines()]
    assert charges[0]["cached_tokens"] == 0
    assert 0 < charges[1]["cached_tokens"] < charges[1]["prompt_tokens"]
