"""Fixtures of the handler tests: the real Telegram door (MembotApp: its Bot, Dispatcher,
middlewares and routers) over the real core (build_core: the in-memory backend, the ledger
and the search index in the test's directory, the scripted model behind the metered one),
fed updates directly with `Dispatcher.feed_update`: no polling, no journal, no runner.

The updates are the ones the e2e tests push (FakeTelegram's `push_*` builders), fetched
from the fake with one getUpdates call, and the bot's sends go to the same fake over real
HTTP on 127.0.0.1, recorded as in e2e. `feed_update` returns once the handler is done, so
what the user saw is in `tg` by then: no waiting."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, Unpack

import pytest

from membot.bot.app import MembotApp
from membot.clock import Clock, utc_now
from membot.config import Settings, load_settings
from membot.memory import MemoryRepository
from membot.wiring import Core, build_core
from tests.conftest import TOKEN
from tests.fakes import FakeTelegram, MessageOptions, SentMessage
from tests.scripted import ScriptedModel

# Nothing listens there: a request that reached the provider (the model is scripted) fails.
NO_PROVIDER = "http://127.0.0.1:9/v1"


class Door:
    """The door as a test talks to it: push an update to the fake, feed it, read the sends."""

    def __init__(self, tg: FakeTelegram, app: MembotApp, core: Core, model: ScriptedModel):
        self.tg = tg
        self.app = app
        self.core = core
        self.model = model
        self.repository = core.repository

    async def feed(self, update_id: int) -> None:
        """Take update `update_id` from the fake, as a poll would, and answer it."""
        bot = self.app.bot
        updates = await bot.get_updates(
            offset=update_id, timeout=0, allowed_updates=self.app.allowed_updates()
        )
        [update] = [u for u in updates if u.update_id == update_id]
        await self.app.dispatcher.feed_update(bot, update)

    async def sent(self, chat_id: int, update_id: int) -> list[SentMessage]:
        """Feed the update; the messages the chat got while it was answered."""
        before = len(self.tg.messages_to(chat_id))
        await self.feed(update_id)
        return self.tg.messages_to(chat_id)[before:]

    async def say(self, chat_id: int, text: str, **options: Unpack[MessageOptions]) -> list[str]:
        """A user writes `text`; what the chat then reads, message by message."""
        update_id = self.tg.push_text(chat_id, text, **options)
        return [m.text for m in await self.sent(chat_id, update_id)]

    async def mention(
        self, chat_id: int, text: str, **options: Unpack[MessageOptions]
    ) -> list[str]:
        """ "@bot text" in a group."""
        update_id = self.tg.push_mention(chat_id, text, **options)
        return [m.text for m in await self.sent(chat_id, update_id)]

    async def press(
        self, chat_id: int, message_id: int, data: str, **options: Unpack[MessageOptions]
    ) -> dict[str, Any]:
        """A user presses a button under the bot's message; Telegram's record of the answer
        the bot gave the press (its `text`, `show_alert`)."""
        answered = len(self.tg.callback_answers)
        await self.feed(self.tg.push_callback(chat_id, message_id, data, **options))
        [answer] = self.tg.callback_answers[answered:]
        return answer

    async def press_ephemeral(
        self, chat_id: int, sent: SentMessage, data: str, user_id: int
    ) -> dict[str, Any]:
        """As `press`, under an ephemeral message of the bot's (only its receiver can)."""
        assert sent.ephemeral_message_id is not None, "not an ephemeral message"
        answered = len(self.tg.callback_answers)
        pressed = self.tg.press_ephemeral(chat_id, sent.ephemeral_message_id, data, user_id)
        await self.feed(pressed)
        [answer] = self.tg.callback_answers[answered:]
        return answer


OpenDoor = Callable[..., Awaitable[Door]]


@pytest.fixture
async def open_door(
    tg: FakeTelegram, model: ScriptedModel, repo: MemoryRepository, tmp_path: Path
) -> AsyncIterator[OpenDoor]:
    """`await open_door(**settings)`: the door with these settings (as `load_settings`
    takes them: models="a,b", allowed_user_ids="1"), closed at teardown; `passing` as
    MembotApp takes it (the stream's workers give `transient`); `clock`, the core's."""
    opened: list[Door] = []

    async def open_(
        passing: Callable[[BaseException], bool] | None = None,
        clock: Clock = utc_now,
        **overrides: Any,
    ) -> Door:
        values: dict[str, Any] = {
            "telegram_bot_token": TOKEN,
            "telegram_api_base": tg.base_url,
            "openrouter_api_key": "sk-test-key",
            "openrouter_base_url": NO_PROVIDER,
            "openrouter_model": "test/model",
            "data_dir": tmp_path / "data",
            # As in e2e: Telegram's own pace would hold every second message of a chat.
            "telegram_chat_rate": 1000.0,
            "telegram_chat_burst": 100,
            "telegram_group_rate": 60_000.0,
        }
        values.update(overrides)
        settings: Settings = load_settings(_env_file=None, **values)
        core = build_core(settings, model=model, repository=repo, clock=clock)
        await core.start()
        app = (
            MembotApp(settings, core)
            if passing is None
            else MembotApp(settings, core, passing=passing)
        )
        door = Door(tg, app, core, model)
        opened.append(door)
        return door

    yield open_
    for door in reversed(opened):
        await _close_quickly(door.app)
        await door.core.aclose()


async def _close_quickly(app: MembotApp) -> None:
    # aiogram's session close waits 250 ms for TLS connections to wind down; plain HTTP to
    # 127.0.0.1 has none, and a quarter second per test is most of this suite's time.
    client = getattr(app.bot.session, "_session", None)
    if client is not None:
        await client.close()
    await app.close()


@pytest.fixture
async def door(open_door: OpenDoor) -> Door:
    """The door with the default settings."""
    return await open_door()
