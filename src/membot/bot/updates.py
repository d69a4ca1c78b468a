"""The Bot API calls the intake's sources make (intake/polling.py `Telegram`), through the
bot's own client: getUpdates, and registering or deleting the webhook. aiogram's errors of a
poll become the intake's (SourceConflict, SourceUnavailable): the intake never sees aiogram."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from aiogram import Bot
from aiogram.exceptions import TelegramConflictError, TelegramNetworkError, TelegramServerError
from aiogram.methods import GetUpdates, TelegramMethod

from membot.intake.contract import SourceConflict, SourceUnavailable


class RawUpdates(GetUpdates):
    """getUpdates answered with Telegram's JSON, not aiogram's `Update` models: the intake
    keeps an update as Telegram sent it (the journal's line, the stream's entry) and the
    dispatcher reads it once, when it is fed. Reading each into models here and writing it
    back out cost ~34 us per update; the call itself (its errors, timeouts, middlewares) is
    aiogram's as before."""

    __returning__ = list[dict[str, Any]]


class BotUpdates:
    def __init__(self, bot: Bot) -> None:
        self.bot = bot

    async def get_updates(
        self, offset: int | None, timeout: int, allowed_updates: Sequence[str]
    ) -> list[Mapping[str, Any]]:
        try:
            raw = RawUpdates(offset=offset, timeout=timeout, allowed_updates=list(allowed_updates))
            updates = await self.bot(
                cast("TelegramMethod[list[dict[str, Any]]]", raw), request_timeout=timeout + 10
            )
        except TelegramConflictError:
            raise SourceConflict("409 Conflict") from None
        except (TelegramNetworkError, TelegramServerError) as exc:
            raise SourceUnavailable(type(exc).__name__) from None
        return list(updates)

    async def delete_webhook(self) -> None:
        # A webhook left registered would make every getUpdates fail.
        await self.bot.delete_webhook(drop_pending_updates=False)

    async def set_webhook(self, url: str, secret: str, allowed_updates: Sequence[str]) -> None:
        # Registered verbatim; kept when the process stops (Telegram keeps the updates).
        await self.bot.set_webhook(
            url=url,
            secret_token=secret,
            allowed_updates=list(allowed_updates),
            drop_pending_updates=False,
        )
