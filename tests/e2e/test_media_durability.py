"""Files over Telegram across restarts: a photo's follow-up after a restart still shows
the photo (files backend; Redis with a second process and an empty DATA_DIR), and a voice
received but not answered when the bot was killed (kill -9) is answered once after it."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

from membot.ids import ConversationId
from membot.memory.redis import RedisRepository
from tests.conftest import API_KEY, TOKEN, StartBot, bot_env
from tests.e2e.conftest import REDIS_URL
from tests.e2e.helpers import stored
from tests.e2e.test_conversation import say
from tests.e2e.test_media_telegram import CHAT, VISION, images_sent
from tests.e2e.test_redis_e2e import on_redis
from tests.fakes import FakeLLM, FakeTelegram, media_files
from tests.fakes.process import membot_env, spawn_membot

STARTUP = 120.0  # a cold `python -m membot` imports aiogram, pydantic, openai... on a busy machine


async def test_a_restart_between_a_photo_and_its_follow_up_keeps_the_photo_in_view(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    llm.models = {VISION: ["text", "image"]}
    photo = media_files.jpeg(200, 100)
    bot = await start_bot(openrouter_model=VISION)
    tg.push_photo(CHAT, data=photo, caption="my new sofa")
    await tg.wait_for_messages(CHAT, 1)
    await bot.stop()
    await start_bot(openrouter_model=VISION)
    assert await say(tg, CHAT, "how long is it?") == "ANSWER: how long is it?"
    assert images_sent(llm.chat_requests[-1]) == [photo]
    assert tg.call_count("getFile") == 1  # read back from the conversation's files


async def test_on_redis_a_second_process_answers_a_follow_up_about_the_first_ones_photo(
    tg: FakeTelegram,
    llm: FakeLLM,
    start_bot: StartBot,
    redis_repo: RedisRepository,
    tmp_path: Path,
) -> None:
    llm.models = {VISION: ["text", "image"]}
    photo = media_files.jpeg(200, 100)
    first = await start_bot(**on_redis(redis_repo, openrouter_model=VISION))
    tg.push_photo(CHAT, data=photo, caption="my new sofa")
    await tg.wait_for_messages(CHAT, 1)
    await first.stop()
    # Another process (`python -m membot run`), as on another machine: its own empty DATA_DIR.
    fresh = tmp_path / "elsewhere"
    env = membot_env(
        telegram_bot_token=TOKEN,
        telegram_api_base=tg.base_url,
        openrouter_api_key=API_KEY,
        openrouter_base_url=llm.base_url,
        openrouter_model=VISION,
        data_dir=str(fresh),
        log_level="WARNING",
        storage="redis",
        redis_url=REDIS_URL,
        redis_prefix=redis_repo.prefix,
    )
    stderr_path = tmp_path / "second.stderr"
    with open(stderr_path, "wb") as stderr:
        second = await spawn_membot(tmp_path, env, "run", stdout=stderr, stderr=stderr)
        try:
            tg.push_text(CHAT, "how long is it?")
            await tg.wait_for_messages(CHAT, 2, timeout=STARTUP)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\nbot stderr:\n{stderr_path.read_text()}") from None
        finally:
            second.send_signal(signal.SIGTERM)
            await second.wait()
    assert tg.messages_to(CHAT)[-1].text == "ANSWER: how long is it?"
    assert images_sent(llm.chat_requests[-1]) == [photo]
    assert not (fresh / str(CHAT)).exists()
    [question, _, follow_up, _] = [
        m async for m in redis_repo.iter_messages(ConversationId.telegram(CHAT))
    ]
    assert question.attachments[0].kind == "image" and follow_up.content == "how long is it?"


async def test_a_voice_received_but_not_answered_before_a_kill_9_is_answered_once_after(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path, tmp_path: Path
) -> None:
    llm.script_transcription("are you still there?", "are you still there?")
    llm.gate = asyncio.Event()  # the model's answer never comes before the kill
    env = bot_env(tg, llm, data_dir)
    stderr_path = tmp_path / "membot.stderr"
    with open(stderr_path, "wb") as stderr:
        process = await spawn_membot(tmp_path, env, "run", stdout=stderr, stderr=stderr)
        try:
            tg.push_voice(CHAT, data=media_files.ogg_voice(1.0), duration=1)
            # Heard, and the model asked: the turn is in flight.
            await llm.wait_until(lambda: len(llm.chat_requests) == 1, STARTUP, what="the turn")
            # Telegram counts the voice as delivered once the bot polls past it.
            await tg.wait_until(lambda: tg.pending_updates() == 0, what="the voice confirmed")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\nbot stderr:\n{stderr_path.read_text()}") from None
        finally:
            process.kill()
            await process.wait()
    assert process.returncode == -signal.SIGKILL
    assert tg.messages_to(CHAT) == [] and stored(data_dir, CHAT) == []
    llm.gate = None
    await start_bot()  # the journal brings the voice back: Telegram will not
    [answer] = await tg.wait_for_messages(CHAT, 1)
    assert answer.text.startswith("are you still there?\n\nANSWER: ")
    assert await say(tg, CHAT, "/help") != ""  # everything before it was handled
    users = [m for m in stored(data_dir, CHAT) if m["role"] == "user"]
    assert [m["content"] for m in users] == ["are you still there?"]
    assert len([m for m in tg.messages_to(CHAT) if m.text.startswith("are you")]) == 1
