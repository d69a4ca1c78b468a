"""What the fake Bot API records, and the bot it plays: sent messages, drafts, the
options of the update builders.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypedDict

BOT_ID = 4242
BOT_USERNAME = "membot_test_bot"
BOT_FIRST_NAME = "membot"
MAX_MESSAGE_LENGTH = 4096  # UTF-16 code units, counted after markup is parsed
# Group messages need a sender; a stable id makes "same person in two groups" tests easy.
DEFAULT_GROUP_USER_ID = 1001
# Supergroup ids look like -100xxxxxxxxxx; plain groups are small negative numbers.
SUPERGROUP_ID_LIMIT = -1_000_000_000_000


@dataclass(slots=True)
class SentMessage:
    """One successful ``sendMessage``.

    ``text`` and ``entities`` are what the user sees: when ``parse_mode`` was used they are the
    result of parsing the markup (exactly what Telegram stores); ``raw_text`` is the text as
    the bot sent it.
    """

    chat_id: int
    text: str
    entities: list[dict[str, Any]]
    parse_mode: str | None
    reply_to_message_id: int | None
    message_id: int
    raw_text: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    at: float = 0.0  # time.monotonic() when the fake accepted it
    # An ephemeral message (Bot API 10.2): seen only by this member of the group.
    receiver_user_id: int | None = None
    ephemeral_message_id: int | None = None


@dataclass(slots=True)
class Draft:
    """One accepted ``sendMessageDraft``: the partial answer a private chat was shown."""

    chat_id: int
    draft_id: int
    text: str
    entities: list[dict[str, Any]]
    can_stop: bool
    at: float  # time.monotonic() when the fake accepted it


class MessageOptions(TypedDict, total=False):
    """Keyword options shared by the ``push_*`` update builders."""

    user_id: int
    first_name: str
    last_name: str | None
    username: str | None
    language_code: str | None
    chat_type: str | None
    title: str | None
    reply_to_bot: bool
    reply_to: int | None
    thread_id: int | None  # a forum topic of a supergroup
