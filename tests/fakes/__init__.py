"""What the tests and the bench share: local HTTP fakes of the Telegram Bot API and an
OpenAI-compatible LLM endpoint, generated media files and search corpora, and a membot
process's environment. bench/ imports nothing else from `tests`."""

from tests.fakes.openai_media import Transcription
from tests.fakes.openai_server import FakeLLM, Reply, Responder, without_now
from tests.fakes.openai_stream import Pacing
from tests.fakes.telegram import (
    BOT_ID,
    BOT_USERNAME,
    Draft,
    FakeTelegram,
    MessageOptions,
    SentMessage,
    utf16_len,
)

__all__ = [
    "BOT_ID",
    "BOT_USERNAME",
    "Draft",
    "FakeLLM",
    "FakeTelegram",
    "MessageOptions",
    "Pacing",
    "Reply",
    "Responder",
    "SentMessage",
    "Transcription",
    "utf16_len",
    "without_now",
]
