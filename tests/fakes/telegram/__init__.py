"""A fake Telegram Bot API server: a real aiohttp HTTP server on 127.0.0.1.

The bot under test reaches it only through configuration (``TELEGRAM_API_BASE`` =
:attr:`FakeTelegram.base_url`), so every request goes through aiogram's real HTTP session,
serialisation and error mapping. The fake validates requests the way Telegram does where
mistakes are easy to make (text length in UTF-16 units, HTML / MarkdownV2 markup, entity
offsets) and records everything the bot did so tests can assert on it.

Synchronisation is event driven: every state change wakes the waiters, nothing polls or sleeps.
"""

from tests.fakes.telegram.markup import utf16_len, validate_entities
from tests.fakes.telegram.records import (
    BOT_ID,
    BOT_USERNAME,
    Draft,
    MessageOptions,
    SentMessage,
)
from tests.fakes.telegram.server import FakeTelegram

__all__ = [
    "BOT_ID",
    "BOT_USERNAME",
    "Draft",
    "FakeTelegram",
    "MessageOptions",
    "SentMessage",
    "utf16_len",
    "validate_entities",
]
