"""/export end to end over the fakes, on files and on Redis: the real bot sends the chat's
memory as a document, and the ZIP read back is what was stored (messages.jsonl is the
archive's records, conversation.md has each message's date and sender, the facts, the
summary, the task and the files are there); /memory's Export button does the same; in a
group only an administrator exports; a chat over EXPORT_PART_MB comes in whole parts, each
within it; nothing is left in DATA_DIR/.exports afterwards."""

from __future__ import annotations

import asyncio
import io
import json
import os
import time
import uuid
import zipfile
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from membot.bot import texts
from membot.bot.handlers.memory import MEMORY_EXPORT
from membot.clock import utc_now
from membot.ids import ConversationId
from membot.memory import ChatRepository, FileRepository, Message
from membot.memory.contract.attachment import Attachment, new_file_key
from membot.memory.redis import RedisRepository
from tests import api_support
from tests.api_support import AUTH, StartApi
from tests.conftest import StartBot
from tests.e2e.processes import until
from tests.e2e.test_redis_e2e import on_redis
from tests.e2e.test_tools import native_call
from tests.fakes import FakeLLM, FakeTelegram, Reply, media_files, without_now
from tests.fakes.openai_server import content_text

start_api = api_support.start_api

CHAT = 7301
GROUP = -7302
VISION = "vision/model"
EN = texts.EN
MIB = 1024 * 1024


@pytest.fixture(params=["files", "redis"])
async def storage(
    request: pytest.FixtureRequest, data_dir: Path, redis_repo: RedisRepository
) -> AsyncIterator[tuple[dict[str, Any], ChatRepository]]:
    """The bot's storage settings, and a reader of the same memory (as an operator's)."""
    if request.param == "files":
        reader = FileRepository(data_dir)
        yield {}, reader
        await reader.close()
    else:
        yield on_redis(redis_repo), redis_repo


async def say(tg: FakeTelegram, chat: int, text: str, **kw: Any) -> str:
    before = len(tg.messages_to(chat))
    tg.push_text(chat, text, **kw)
    return (await tg.wait_for_messages(chat, before + 1, timeout=20))[before].text


async def eventually(read: Callable[[], Awaitable[str]], *, what: str) -> str:
    """What `read` returns once it is not empty (polled, with a deadline)."""
    deadline = time.monotonic() + 30
    while not (found := await read()):
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        await asyncio.sleep(0.05)
    return found


def entries(parts: list[bytes]) -> dict[str, bytes]:
    found: dict[str, bytes] = {}
    for data in parts:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            assert zf.testzip() is None
            for name in zf.namelist():
                found[name] = found.get(name, b"") + zf.read(name)
    return found


async def test_export_sends_the_chats_memory_as_it_was_stored(
    tg: FakeTelegram,
    llm: FakeLLM,
    start_bot: StartBot,
    data_dir: Path,
    storage: tuple[dict[str, Any], ChatRepository],
) -> None:
    settings, reader = storage
    cid = ConversationId.telegram(CHAT)
    llm.models = {VISION: ["text", "image"]}
    await start_bot(openrouter_model=VISION, summary_every=2, window_size=1, **settings)
    await say(tg, CHAT, "hello there", first_name="Ana")
    when = (utc_now() + timedelta(days=3)).replace(microsecond=0).isoformat()
    calls = {
        "remember that I drink tea": native_call("remember", {"fact": "Ana drinks tea"}),
        "remind me to buy tea": native_call("schedule_task", {"when": when, "task": "buy tea"}),
    }

    def reply(body: dict[str, Any]) -> Reply:
        last = body["messages"][-1]
        call = calls.pop(without_now(content_text(last.get("content"))), None)
        if call is None or llm.is_summary_request(body):
            return llm.default_reply(body)
        return Reply(content=None, tool_calls=[call])

    llm.set_responder(reply)
    await say(tg, CHAT, "remember that I drink tea", first_name="Ana")
    await say(tg, CHAT, "remind me to buy tea", first_name="Ana")
    assert not calls
    before = len(tg.messages_to(CHAT))
    tg.push_photo(CHAT, data=media_files.jpeg(320, 240), caption="my cup", first_name="Ana")
    await tg.wait_for_messages(CHAT, before + 1, timeout=20)

    async def latest_summary() -> str:
        # Once no summary is due (WINDOW_SIZE + SUMMARY_EVERY unsummarized), none comes.
        meta = await reader.get_meta(cid)
        return await reader.get_summary(cid) if meta.unsummarized < 3 else ""

    summary = await eventually(latest_summary, what="the last summary saved")

    assert await say(tg, CHAT, "/export") == EN.EXPORT_STARTED
    await tg.wait_until(lambda: bool(tg.documents_to(CHAT)), timeout=30, what="the export")
    [document] = tg.documents_to(CHAT)
    assert document.file_name.startswith("membot-export-tg-7301-")
    assert document.file_name.endswith(".zip")
    found = entries([document.data])

    stored = [m async for m in reader.iter_messages(cid)]
    lines = found["messages.jsonl"].decode().splitlines()
    assert lines == [m.to_json() for m in stored[: len(lines)]]
    assert len(lines) >= 8  # four turns, the tools' messages, up to the /export
    transcript = found["conversation.md"].decode()
    first = stored[0]
    assert f"**Ana** · {first.ts:%Y-%m-%d %H:%M}" in transcript  # TIMEZONE is UTC
    assert "hello there" in transcript and "**membot** ·" in transcript
    assert json.loads(found["facts.json"]) == ["Ana drinks tea"]
    assert summary in found["summary.md"].decode()
    [task] = json.loads(found["tasks.json"])
    assert task["text"] == "buy tea" and task["chat"] == CHAT
    [image] = [a for m in stored for a in m.attachments if a.kind == "image"]
    assert found[f"files/{image.file}"] == await reader.get_file(cid, image.file or "")
    assert f"(files/{image.file})" in transcript
    await until(lambda: not any((data_dir / ".exports").iterdir()), what="the parts removed")


async def test_the_memory_buttons_export_and_a_group_member_is_refused(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot
) -> None:
    await start_bot()
    tg.set_admins(GROUP, [1])
    tg.push_mention(GROUP, "hello", user_id=2, chat_type="group")
    await tg.wait_for_messages(GROUP, 1)
    assert await say(tg, GROUP, "/export", user_id=2) == EN.EXPORT_ADMINS_ONLY
    shown = tg.messages_to(GROUP)[-1].message_id
    tg.push_callback(GROUP, shown, MEMORY_EXPORT, user_id=2)
    await tg.wait_until(lambda: bool(tg.callback_answers), what="the button's answer")
    assert tg.callback_answers[-1]["text"] == EN.EXPORT_ADMINS_ONLY
    assert tg.documents_to(GROUP) == []

    tg.push_callback(GROUP, shown, MEMORY_EXPORT, user_id=1)
    await tg.wait_until(lambda: bool(tg.documents_to(GROUP)), timeout=30, what="the export")
    assert tg.callback_answers[-1]["text"] == EN.EXPORT_STARTED
    transcript = entries([tg.documents_to(GROUP)[0].data])["conversation.md"].decode()
    assert "hello" in transcript


async def test_a_chat_over_export_part_mb_comes_in_whole_parts(
    tg: FakeTelegram,
    start_bot: StartBot,
    data_dir: Path,
    storage: tuple[dict[str, Any], ChatRepository],
) -> None:
    settings, reader = storage
    cid = ConversationId.telegram(CHAT)
    kept: dict[str, bytes] = {}
    for n in range(12):  # 3 MiB of images that do not compress, before the bot starts
        key = new_file_key("jpg")
        kept[key] = os.urandom(256 * 1024)
        await reader.put_file(cid, key, kept[key])
        image = Attachment(kind="image", file=key, name=f"{n}.jpg")
        await reader.append(cid, [Message(role="user", content=f"photo {n}", attachments=(image,))])
    await start_bot(export_part_mb=1, **settings)
    assert await say(tg, CHAT, "/export") == EN.EXPORT_STARTED
    await tg.wait_until(lambda: len(tg.documents_to(CHAT)) >= 4, timeout=60, what="the parts")
    await until(lambda: not any((data_dir / ".exports").iterdir()), what="the parts removed")
    parts = tg.documents_to(CHAT)
    count = len(parts)
    assert [d.file_name.rsplit("-", 1)[1] for d in parts] == [
        f"part{n}of{count}.zip" for n in range(1, count + 1)
    ]
    assert all(len(d.data) <= MIB for d in parts)
    assert EN.EXPORT_PART.format(part=2, parts=count) in parts[1].caption
    found = entries([d.data for d in parts])
    assert {n: d for n, d in found.items() if n.startswith("files/")} == {
        f"files/{key}": data for key, data in kept.items()
    }
    stored = [m.to_json() async for m in reader.iter_messages(cid)]
    assert found["messages.jsonl"].decode().splitlines() == stored[:12]


# -- the HTTP API ------------------------------------------------------------------------------


async def test_the_api_exports_a_session_with_its_token_only(
    start_api: StartApi, storage: tuple[dict[str, Any], ChatRepository], data_dir: Path
) -> None:
    settings, reader = storage
    api = await start_api(**settings)
    opened = await api.client.chat(
        {"message": "plan a trip to Porto", "maxRounds": 3, "systemPrompt": "Be brief."}
    )
    sid = opened.body["sessionId"]
    await api.client.chat({"message": "in May, two people", "sessionId": sid})
    path = f"/api/sessions/{sid}/export"

    answer = await api.client.request("GET", path, headers=AUTH)
    assert answer.status == 200, answer.body
    assert answer.headers["Content-Type"] == "application/zip"
    assert f'filename="membot-export-api-{sid}-' in answer.headers["Content-Disposition"]
    found = entries([answer.raw])
    cid = ConversationId.api(sid)
    stored = [m.to_json() async for m in reader.iter_messages(cid)]
    assert found["messages.jsonl"].decode().splitlines() == stored
    transcript = found["conversation.md"].decode()
    assert "**user** ·" in transcript and "in May, two people" in transcript
    assert json.loads(found["tasks.json"]) == []
    [prompt] = [n for n in found if n.startswith("files/")]
    assert found[prompt] == b"Be brief."
    await until(lambda: not any((data_dir / ".exports").iterdir()), what="the ZIP removed")

    refused = await api.client.request("GET", path, headers={"Authorization": "Bearer wrong"})
    assert (refused.status, refused.code) == (401, "UNAUTHORIZED")
    unknown = f"/api/sessions/{uuid.uuid4()}/export"
    missing = await api.client.request("GET", unknown, headers=AUTH)
    assert (missing.status, missing.code) == (404, "SESSION_NOT_FOUND")
    bad = await api.client.request("GET", "/api/sessions/..%2F1/export", headers=AUTH)
    assert (bad.status, bad.code) == (400, "INVALID_REQUEST")
    api.clock.advance(api.settings.api.session_ttl + 1)  # expired: gone
    expired = await api.client.request("GET", path, headers=AUTH)
    assert (expired.status, expired.code) == (404, "SESSION_NOT_FOUND")
