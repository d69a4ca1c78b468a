"""TELEGRAM_MODE=webhook against the fake Telegram, which posts updates to the bot's webhook
server as Telegram does (secret header, again until it gets a 2xx): the URL is registered
verbatim and stays registered; a request without the secret is refused and nothing is kept;
while Redis refuses the update the answer is an error status, and the update, delivered again,
is answered once."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from membot.config import Settings
from membot.memory.redis import RedisRepository
from membot.roles.process import Process
from tests.api_support import free_port
from tests.conftest import RunningBot, StartBot
from tests.e2e.test_redis_outage import PrivateRedis, redis_server, redis_settings
from tests.e2e.test_stream_intake import queued, stream_lengths
from tests.fakes import FakeLLM, FakeTelegram

__all__ = ["redis_server"]  # a fixture, used by name

SECRET = "webhook-secret_42"
CHAT = 5005

StartHooked = Callable[..., Awaitable[RunningBot]]


@pytest.fixture
async def start_hooked(
    tg: FakeTelegram, make_settings: Callable[..., Settings]
) -> AsyncIterator[StartHooked]:
    """Start the bot in webhook mode; ready once it has registered its webhook."""
    running: list[RunningBot] = []

    async def start(**overrides: Any) -> RunningBot:
        port = free_port()
        settings = make_settings(
            telegram_mode="webhook",
            webhook_url=f"http://127.0.0.1:{port}/tg/hook",
            webhook_port=port,
            webhook_secret=SECRET,
            **overrides,
        )
        registered = tg.call_count("setWebhook")
        app = Process(settings)
        bot = RunningBot(app, asyncio.create_task(app.run(handle_signals=False)))
        running.append(bot)
        await tg.wait_for_call("setWebhook", count=registered + 1)
        return bot

    yield start
    for bot in reversed(running):
        await bot.stop()


async def post(url: str, update: dict[str, Any], secret: str | None) -> int:
    headers = {} if secret is None else {"X-Telegram-Bot-Api-Secret-Token": secret}
    async with (
        aiohttp.ClientSession() as session,
        session.post(url, json=update, headers=headers) as response,
    ):
        return response.status


def update(update_id: int, text: str) -> dict[str, Any]:
    return {
        "update_id": update_id,
        "message": {
            "message_id": update_id,
            "date": 0,
            "chat": {"id": CHAT, "type": "private", "first_name": "Alice"},
            "from": {"id": CHAT, "is_bot": False, "first_name": "Alice"},
            "text": text,
        },
    }


async def test_updates_come_through_the_webhook_in_order_and_it_stays_registered(
    tg: FakeTelegram, llm: FakeLLM, start_hooked: StartHooked, redis_repo: RedisRepository
) -> None:
    bot = await start_hooked(**queued(redis_repo))
    assert tg.webhook_url == bot.app.settings.webhook_url  # verbatim
    assert tg.webhook_secret == SECRET
    for i in range(4):
        for chat in (CHAT, CHAT + 1):
            tg.push_text(chat, f"w{i}")
    for chat in (CHAT, CHAT + 1):
        sent = await tg.wait_for_messages(chat, 4)
        assert [m.text for m in sent] == [f"ANSWER: w{i}" for i in range(4)]
    assert tg.call_count("getUpdates") == 0
    await bot.stop()
    # Still registered: Telegram keeps the updates and retries while no receiver is up.
    assert tg.webhook_url == bot.app.settings.webhook_url
    assert tg.call_count("deleteWebhook") == 0


async def test_a_request_without_the_secret_is_refused_and_nothing_is_kept(
    tg: FakeTelegram, llm: FakeLLM, start_hooked: StartHooked, redis_repo: RedisRepository
) -> None:
    bot = await start_hooked(**queued(redis_repo))
    url = bot.app.settings.webhook_url
    assert url is not None
    assert await post(url, update(900001, "no secret"), None) == 401
    assert await post(url, update(900002, "wrong secret"), "not-the-secret") == 401
    assert await stream_lengths(redis_repo) == 0
    assert await redis_repo.client.exists(f"{redis_repo.prefix}q:u:900001") == 0
    assert await post(url, update(900003, "right secret"), SECRET) == 200
    sent = await tg.wait_for_messages(CHAT, 1)
    assert [m.text for m in sent] == ["ANSWER: right secret"]
    assert len(llm.chat_requests) == 1


async def test_while_redis_refuses_the_update_telegram_is_told_to_send_it_again(
    tg: FakeTelegram,
    llm: FakeLLM,
    start_hooked: StartHooked,
    redis_server: PrivateRedis,
) -> None:
    await redis_server.start()
    await start_hooked(**redis_settings(redis_server), queue="redis", claim_idle=1.0)
    tg.push_text(CHAT, "before")
    await tg.wait_for_messages(CHAT, 1)
    await redis_server.stop(signal.SIGKILL)
    update_id = tg.push_text(CHAT, "during")
    await tg.wait_until(
        lambda: any(d.update_id == update_id and d.status >= 500 for d in tg.webhook_deliveries),
        what="the webhook to refuse the update with an error status",
    )
    assert len(tg.messages_to(CHAT)) == 1  # nothing answered without the stream
    await redis_server.start()  # the same port and append-only file: the stream is back
    sent = await tg.wait_for_messages(CHAT, 2, timeout=20)
    assert [m.text for m in sent] == ["ANSWER: before", "ANSWER: during"]
    statuses = [d.status for d in tg.webhook_deliveries if d.update_id == update_id]
    assert statuses[-1] == 200 and all(s >= 500 for s in statuses[:-1])
    # Answered once: nothing more comes once the update is acknowledged.
    tg.push_text(CHAT, "after")
    sent = await tg.wait_for_messages(CHAT, 3, timeout=20)
    assert [m.text for m in sent][2:] == ["ANSWER: after"]


async def test_a_single_process_takes_a_webhook_too(
    tg: FakeTelegram, llm: FakeLLM, start_hooked: StartHooked, data_dir: Path
) -> None:
    await start_hooked()  # QUEUE=local: the journal keeps the update before the 200
    for i in range(3):
        tg.push_text(CHAT, f"l{i}")
    sent = await tg.wait_for_messages(CHAT, 3)
    assert [m.text for m in sent] == [f"ANSWER: l{i}" for i in range(3)]
    assert all(d.status == 200 for d in tg.webhook_deliveries)


async def test_switching_to_polling_deletes_the_webhook(
    tg: FakeTelegram, llm: FakeLLM, start_hooked: StartHooked, start_bot: StartBot
) -> None:
    hooked = await start_hooked()
    await hooked.stop()
    assert tg.webhook_url
    await start_bot()  # TELEGRAM_MODE=polling
    assert tg.webhook_url == ""
    tg.push_text(CHAT, "polled")
    assert [m.text for m in await tg.wait_for_messages(CHAT, 1)] == ["ANSWER: polled"]
