"""Guest Mode: a guest message (the bot called into a chat it is not in) is answered from
its caller's memory by bot/guest.py's door."""

from __future__ import annotations

from aiogram import Router
from aiogram.types import Message

from membot.bot.guest import GuestDoor


def build_router() -> Router:
    router = Router(name="guest")
    router.guest_message.register(on_guest_message)
    return router


async def on_guest_message(message: Message, guests: GuestDoor) -> None:
    await guests.answer(message)
