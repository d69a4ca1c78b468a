"""/import end to end: the real bot polling the fake Bot API, exports made in their real formats
(tests/fakes/exports.py), on files and on Redis. An export becomes searchable memory with its
dates, only ChatGPT's active branch; the same export again adds nothing; a bad file is one line
and nothing stored; imported messages never reach the window or the summary."""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from membot.bot import texts
from membot.ids import ConversationId
from membot.memory.contract.models import Message
from membot.memory.contract.repository import ChatRepository
from membot.memory.files import FileRepository
from membot.memory.redis import RedisRepository
from membot.redis.client import create_client
from tests.conftest import StartBot
from tests.e2e.helpers import meta
from tests.e2e.processes import until
from tests.e2e.test_tools import native_call, tool_messages, tool_step
from tests.fakes import FakeLLM, FakeTelegram
from tests.fakes.exports import Chat, Turn, chatgpt_json, chatgpt_zip, claude_json

CHAT = 5151
EN = texts.EN
T0 = datetime(2023, 3, 1, 10, 0, tzinfo=UTC)
T1 = datetime(2024, 1, 15, 18, 30, tzinfo=UTC)
REDIS_URL = "redis://127.0.0.1:6379/0"


def minutes(at: datetime, n: int) -> datetime:
    return at + timedelta(minutes=n)


def exports() -> list[Chat]:
    rome = Chat(
        "c-rome",
        "Trip to Rome",
        [
            Turn("system", "You are ChatGPT", T0, hidden=True),
            Turn("user", "Plan three days in Rome for me", T0),
            Turn("assistant", "Day one: the Colosseum and the Forum", minutes(T0, 1)),
            Turn("user", "Where should we eat carbonara?", minutes(T0, 2)),
            Turn("assistant", "Try Da Enzo in Trastevere", minutes(T0, 3)),
        ],
        # A regenerated answer and an edited question: branches the user left.
        abandoned={
            2: [Turn("assistant", "Day one: the Vatican museums", minutes(T0, 1))],
            3: [Turn("user", "Where is the best gelato?", minutes(T0, 2))],
        },
    )
    taxes = Chat(
        "c-taxes",
        "Freelance taxes",
        [
            Turn("user", "How do I file my freelance taxes in Portugal?", T1),
            Turn("assistant", "import math", minutes(T1, 1), recipient="python"),
            Turn("tool", "3.14", minutes(T1, 1)),
            Turn("assistant", "Use the Portal das Financas, category B", minutes(T1, 2)),
            Turn("user", "Thanks!", minutes(T1, 3)),
            Turn("assistant", "You're welcome", minutes(T1, 4)),
        ],
    )
    return [rome, taxes]


IMPORTED = [
    ("user", "Plan three days in Rome for me"),
    ("assistant", "Day one: the Colosseum and the Forum"),
    ("user", "Where should we eat carbonara?"),
    ("assistant", "Try Da Enzo in Trastevere"),
    ("user", "How do I file my freelance taxes in Portugal?"),
    ("assistant", "Use the Portal das Financas, category B"),
    ("user", "Thanks!"),
    ("assistant", "You're welcome"),
]
DONE = EN.IMPORT_DONE.format(conversations=2, messages=8, first="2023-03-01", last="2024-01-15")


@pytest.fixture(params=["files", "redis"])
async def storage(
    request: pytest.FixtureRequest, data_dir: Path
) -> AsyncIterator[tuple[dict[str, Any], ChatRepository]]:
    """The bot's settings for a backend, and a reader of what it stores."""
    if request.param == "files":
        files = FileRepository(data_dir)
        yield {}, files
        await files.close()
        return
    prefix = f"membot-test:{uuid.uuid4().hex}:"
    repo = RedisRepository(create_client(REDIS_URL), prefix=prefix)
    yield {"storage": "redis", "redis_url": REDIS_URL, "redis_prefix": prefix}, repo
    keys = [key async for key in repo.client.scan_iter(match=f"{prefix}*")]
    if keys:
        await repo.client.delete(*keys)
    await repo.close()


async def kept(repo: ChatRepository, chat: int = CHAT) -> list[Message]:
    return [m async for m in repo.iter_messages(ConversationId.telegram(chat))]


async def send(tg: FakeTelegram, data: bytes, name: str, caption: str | None = "/import") -> str:
    """Send a document; the bot's one answer to it."""
    before = len(tg.messages_to(CHAT))
    tg.push_document(CHAT, data, file_name=name, caption=caption)
    return (await tg.wait_for_messages(CHAT, before + 1, timeout=30))[before].text


async def say(tg: FakeTelegram, text: str, answers: int = 1) -> list[str]:
    before = len(tg.messages_to(CHAT))
    tg.push_text(CHAT, text)
    return [m.text for m in (await tg.wait_for_messages(CHAT, before + answers))[before:]]


async def test_a_chatgpt_export_is_searchable_with_its_dates_and_stays_out_of_the_window(
    tg: FakeTelegram,
    llm: FakeLLM,
    start_bot: StartBot,
    storage: tuple[dict[str, Any], ChatRepository],
) -> None:
    settings, repo = storage
    await start_bot(**settings)
    assert await say(tg, "hello, my dog is called Rex") == ["ANSWER: hello, my dog is called Rex"]

    assert await send(tg, chatgpt_zip(exports()), "chatgpt-export.zip") == DONE
    stored = await kept(repo)
    imported = [m for m in stored if m.origin]
    # The active branch only, user and assistant messages, with their dates and titles.
    assert [(m.role, m.content) for m in imported] == IMPORTED
    assert imported[0].ts == T0 and imported[-1].ts == minutes(T1, 4)
    assert imported[0].origin == "chatgpt:c-rome:c-rome-a1"
    assert {m.name for m in imported} == {"ChatGPT: Trip to Rome", "ChatGPT: Freelance taxes"}
    everything = json.dumps([m.to_json() for m in stored])
    assert "Vatican" not in everything and "gelato" not in everything
    assert "import math" not in everything and "You are ChatGPT" not in everything

    # The same conversations again, as the JSON inside the ZIP: nothing new.
    assert await send(tg, chatgpt_json(exports()), "conversations.json") == EN.IMPORT_NOTHING_NEW
    assert len(await kept(repo)) == len(stored)

    # The model finds them with their dates; its prompt shows the chat's own messages only.
    before = len(llm.chat_requests)
    llm.script(
        *tool_step(
            "Looking.",
            native_call("search_history", {"query": "carbonara Rome"}),
            then="At Da Enzo.",
        )
    )
    assert await say(tg, "where did ChatGPT say to eat?", 2) == ["Looking.", "At Da Enzo."]
    prompt = json.dumps(llm.chat_requests[before]["messages"])
    assert "Rex" in prompt and "Trastevere" not in prompt and "Portugal" not in prompt
    [result] = tool_messages(llm.chat_requests[before + 1])
    assert "Try Da Enzo in Trastevere" in result["content"]
    assert "[2023-03-01 10:03] assistant (ChatGPT: Trip to Rome)" in result["content"]


async def test_claude_and_the_command_alone_then_the_file(
    tg: FakeTelegram, start_bot: StartBot, data_dir: Path
) -> None:
    await start_bot()
    assert await say(tg, "/import") == [EN.IMPORT_SEND.format(minutes=10)]
    # The next document, without a caption, is the export.
    reply = await send(tg, claude_json(exports()), "conversations.json", caption=None)
    assert reply == DONE
    repo = FileRepository(data_dir)
    imported = await kept(repo)
    await repo.close()
    assert [(m.role, m.content) for m in imported] == IMPORTED
    assert imported[0].origin == "claude:c-rome:c-rome-m1"
    assert {m.name for m in imported} == {"Claude: Trip to Rome", "Claude: Freelance taxes"}
    # The operator's `membot search` finds them too, with their dates.
    found = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "membot", "search", str(CHAT), "carbonara"),
        *("--data-dir", str(data_dir)),
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await asyncio.wait_for(found.communicate(), timeout=60)
    assert "[2023-03-01 10:02] user (Claude: Trip to Rome): Where should we eat" in out.decode()
    # No longer awaited: the next document is an ordinary one, read for the model.
    assert (await send(tg, b"plain notes", "notes.txt", caption=None)).startswith("ANSWER")


BAD = {
    "not an export": (b"just some notes\n", "notes.json", EN.IMPORT_NOT_EXPORT),
    "another JSON": (b'[{"name": "x"}]', "conversations.json", EN.IMPORT_NOT_EXPORT),
    "a broken ZIP": (chatgpt_zip(exports())[:200], "export.zip", EN.IMPORT_BROKEN),
    "a broken JSON": (chatgpt_json(exports())[:-40], "conversations.json", EN.IMPORT_BROKEN),
}


@pytest.mark.parametrize("case", sorted(BAD))
async def test_a_bad_file_is_one_line_and_nothing_is_imported(
    tg: FakeTelegram, start_bot: StartBot, data_dir: Path, case: str
) -> None:
    data, name, answer = BAD[case]
    await start_bot()
    assert await send(tg, data, name) == answer
    assert not (data_dir / str(CHAT) / "messages.txt").exists()
    assert len(tg.messages_to(CHAT)) == 1


async def test_an_export_over_the_limit_is_not_downloaded(
    tg: FakeTelegram, start_bot: StartBot, data_dir: Path
) -> None:
    await start_bot(import_max_mb=1)
    big = chatgpt_json(exports() * 1) + b" " * (1024 * 1024)
    assert await send(tg, big, "conversations.json") == EN.IMPORT_TOO_BIG.format(limit_mb=1)
    assert tg.call_count("getFile") == 0
    assert not (data_dir / str(CHAT) / "messages.txt").exists()


async def test_an_import_larger_than_redis_keeps_is_refused_whole(
    tg: FakeTelegram, start_bot: StartBot
) -> None:
    storage = "membot-test:" + uuid.uuid4().hex + ":"
    repo = RedisRepository(create_client(REDIS_URL), prefix=storage)
    try:
        # Redis keeps 100 messages of a chat, less the window's 4 + 4 + 24: 68 at most.
        await start_bot(
            storage="redis",
            redis_url=REDIS_URL,
            redis_prefix=storage,
            redis_max_messages=100,
            window_size=4,
            summary_every=4,
        )
        roles = ("user", "assistant")
        turns = [Turn(roles[n % 2], f"line {n}", minutes(T0, n)) for n in range(80)]
        long = Chat("c-long", "Long", turns)
        reply = await send(tg, chatgpt_json([long]), "conversations.json")
        assert reply == EN.IMPORT_TOO_MANY.format(count=80, limit=68)
        assert await kept(repo) == []
    finally:
        keys = [key async for key in repo.client.scan_iter(match=f"{storage}*")]
        if keys:
            await repo.client.delete(*keys)
        await repo.close()


async def test_only_a_groups_admins_import(
    tg: FakeTelegram, start_bot: StartBot, data_dir: Path
) -> None:
    group = -700
    tg.set_admins(group, [11])
    await start_bot()
    tg.push_document(
        group, chatgpt_zip(exports()), file_name="e.zip", caption="/import", user_id=12
    )
    [refused] = await tg.wait_for_messages(group, 1)
    assert refused.text == EN.IMPORT_ADMINS_ONLY and tg.call_count("getFile") == 0
    tg.push_document(
        group, chatgpt_zip(exports()), file_name="e.zip", caption="/import", user_id=11
    )
    sent = await tg.wait_for_messages(group, 2, timeout=30)
    assert sent[1].text == DONE


async def test_the_summary_and_the_window_never_take_imported_messages(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    # A window of 4, a summary every 4: the import's 8 messages would fill both.
    await start_bot(window_size=4, summary_every=4)
    assert await say(tg, "my sister is Ana") == ["ANSWER: my sister is Ana"]
    assert await send(tg, chatgpt_zip(exports()), "e.zip") == DONE
    for n in range(4):
        await say(tg, f"turn {n}")
    await until(lambda: meta(data_dir, CHAT)["summarized_upto"] > 0, what="a summary", timeout=30)
    asked = json.dumps(llm.summary_requests[0]["messages"])
    assert "Ana" in asked and "Trastevere" not in asked and "Portugal" not in asked
    await say(tg, "and now?")
    last = json.dumps(llm.chat_requests[-1]["messages"])
    assert "turn 3" in last and "Trastevere" not in last
