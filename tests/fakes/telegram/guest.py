"""Guest Mode (Bot API 10.0): a user calls the bot with an @mention into a chat the bot is not
in; Telegram sends a ``guest_message`` carrying a ``guest_query_id``, and the bot posts its
one answer there with ``answerGuestQuery``. A mixin of FakeTelegram: its state is set up by
``_init_guest``.

``push_guest`` delivers the update (only to a bot that asked for ``guest_message`` in its
``allowed_updates``, like any update); ``answerGuestQuery`` takes one answer per query, an
``article`` with a text message, within ``GUEST_QUERY_TTL`` seconds of the update, as
Telegram does, and records it (``guest_answers``, by query id) with how long it took.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass
from typing import Any, Unpack

from tests.fakes.telegram.markup import ParseError, utf16_len, validate_entities
from tests.fakes.telegram.protocol import ApiError, bad_entities
from tests.fakes.telegram.records import BOT_USERNAME, MAX_MESSAGE_LENGTH, MessageOptions

# Telegram's time to answer a guest query, in seconds.
GUEST_QUERY_TTL = 30.0
QUERY_INVALID = "Bad Request: query is too old and response timeout expired or query ID is invalid"


@dataclass(slots=True)
class GuestAnswer:
    """One accepted ``answerGuestQuery``: the message posted in the guest chat."""

    query_id: str
    chat_id: int  # the chat the bot was called into
    text: str
    entities: list[dict[str, Any]]
    after: float  # seconds from the guest message's update to the answer
    params: dict[str, Any]


class Guest:
    def _init_guest(self) -> None:
        self.guest_answers: dict[str, GuestAnswer] = {}
        self._guest_queries: dict[str, tuple[int, float]] = {}  # id -> (chat, pushed at)
        self._guest_ids = itertools.count(1)

    def push_guest(
        self,
        chat_id: int,
        text_without_mention: str,
        **options: Unpack[MessageOptions],
    ) -> str:
        """A user (``user_id``) wrote "@membot_test_bot <text>" in ``chat_id``, a chat the
        bot is not in; the guest query's id. ``reply_to`` quotes an earlier message of that
        chat (Telegram sends it with the guest message)."""
        message = self._incoming(chat_id, options)
        mention = f"@{BOT_USERNAME}"
        message["text"] = f"{mention} {text_without_mention}"
        message["entities"] = [{"type": "mention", "offset": 0, "length": utf16_len(mention)}]
        query = f"gq-{next(self._guest_ids)}"
        message["guest_query_id"] = query
        self._messages.setdefault(chat_id, {})[message["message_id"]] = message
        self._guest_queries[query] = (chat_id, time.monotonic())
        self.push_update({"guest_message": message})
        return query

    async def wait_for_guest_answer(self, query: str, timeout: float = 30.0) -> GuestAnswer:
        await self.wait_until(
            lambda: query in self.guest_answers, timeout, what=f"the answer to guest query {query}"
        )
        return self.guest_answers[query]

    async def _answer_guest_query(self, params: dict[str, Any]) -> dict[str, Any]:
        query = str(params.get("guest_query_id") or "")
        asked = self._guest_queries.get(query)
        if asked is None or query in self.guest_answers:
            raise ApiError(400, QUERY_INVALID)
        chat_id, pushed = asked
        after = time.monotonic() - pushed
        if after > GUEST_QUERY_TTL:
            raise ApiError(400, QUERY_INVALID)
        result = params.get("result")
        if not isinstance(result, dict) or result.get("type") != "article":
            raise ApiError(400, "Bad Request: result must be an InlineQueryResult")
        if not result.get("id") or not result.get("title"):
            raise ApiError(400, "Bad Request: result id and title are required")
        content = result.get("input_message_content")
        text = content.get("message_text") if isinstance(content, dict) else None
        if not isinstance(text, str) or not text.strip():
            raise ApiError(400, "Bad Request: message text is empty")
        try:
            entities = validate_entities(text, content.get("entities") or [])
        except ParseError as exc:
            raise bad_entities(str(exc)) from None
        if utf16_len(text) > MAX_MESSAGE_LENGTH:
            raise ApiError(400, "Bad Request: message is too long")
        self.guest_answers[query] = GuestAnswer(query, chat_id, text, entities, after, params)
        return {"inline_message_id": f"im-{query}"}
