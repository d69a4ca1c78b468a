"""The bot's sends: messages (validated as Telegram does), drafts, chat actions, edits. A
mixin of FakeTelegram.
"""

from __future__ import annotations

import time
from typing import Any

from tests.fakes.telegram.markup import PARSERS, ParseError, utf16_len, validate_entities
from tests.fakes.telegram.protocol import (
    ApiError,
    bad_entities,
    chat_id_of,
    opt_bool,
    opt_int,
)
from tests.fakes.telegram.records import (
    BOT_ID,
    MAX_MESSAGE_LENGTH,
    Draft,
    SentMessage,
)

CHAT_ACTIONS = frozenset(
    {
        "typing",
        "upload_photo",
        "record_video",
        "upload_video",
        "record_voice",
        "upload_voice",
        "upload_document",
        "choose_sticker",
        "find_location",
        "record_video_note",
        "upload_video_note",
    }
)


class Sending:
    async def _send_message(self, params: dict[str, Any]) -> dict[str, Any]:
        chat_id = chat_id_of(params)
        raw = params.get("text")
        if not isinstance(raw, str) or not raw.strip():
            raise ApiError(400, "Bad Request: message text is empty")
        parse_mode = params.get("parse_mode") or None
        if parse_mode is not None and not isinstance(parse_mode, str):
            raise ApiError(400, "Bad Request: unsupported parse_mode")
        if parse_mode is not None and parse_mode.lower() == "none":
            parse_mode = None  # the Bot API's explicit "no markup" value
        explicit = params.get("entities")
        formatted = parse_mode is not None or bool(explicit)
        if formatted and self._reject_entities is not None and self._reject_entities(params):
            raise bad_entities("rejected by the test (reject_entities_when)")
        try:
            if parse_mode is not None:
                # Telegram ignores `entities` when a parse_mode is given.
                parser = PARSERS.get(parse_mode.lower())
                if parser is None:
                    raise ApiError(400, "Bad Request: unsupported parse_mode")
                text, entities = parser(raw)
            else:
                text = raw
                entities = validate_entities(raw, explicit) if explicit else []
        except ParseError as exc:
            raise bad_entities(str(exc)) from None
        if not text.strip():
            raise ApiError(400, "Bad Request: message text is empty")
        if utf16_len(text) > MAX_MESSAGE_LENGTH:
            raise ApiError(400, "Bad Request: message is too long")
        receiver = self._ephemeral_target(chat_id, params)
        if chat_id > 0:
            self._check_private(chat_id)
        reply_to = self._reply_target(chat_id, params)
        message = self._bot_message(chat_id, text)
        if entities:
            message["entities"] = entities
        if reply_to is not None:
            message["reply_to_message"] = {
                k: v for k, v in reply_to.items() if k != "reply_to_message"
            }
        markup = params.get("reply_markup")
        if isinstance(markup, dict) and "inline_keyboard" in markup:
            message["reply_markup"] = markup
        if receiver is not None:
            self._keep_ephemeral(message, receiver)
        self._record(
            SentMessage(
                chat_id=chat_id,
                text=text,
                entities=entities,
                parse_mode=parse_mode,
                reply_to_message_id=int(reply_to["message_id"]) if reply_to else None,
                message_id=int(message["message_id"]),
                raw_text=raw,
                params=params,
                at=time.monotonic(),
                receiver_user_id=receiver,
                ephemeral_message_id=message.get("ephemeral_message_id"),
            )
        )
        return message

    def _record(self, sent: SentMessage) -> None:
        self.sent.append(sent)
        self._sent_by_chat.setdefault(sent.chat_id, []).append(sent)

    def _reply_target(self, chat_id: int, params: dict[str, Any]) -> dict[str, Any] | None:
        reply = params.get("reply_parameters")
        allow_missing = opt_bool(params, "allow_sending_without_reply")
        if isinstance(reply, dict):
            target_id = opt_int(reply, "message_id")
            allow_missing = allow_missing or opt_bool(reply, "allow_sending_without_reply")
            if reply.get("chat_id") not in (None, chat_id, str(chat_id)):
                raise ApiError(400, "Bad Request: cross-chat replies are not supported here")
        else:
            target_id = opt_int(params, "reply_to_message_id")
        if target_id is None:
            return None
        target = self._messages.get(chat_id, {}).get(target_id)
        if target is None and not allow_missing:
            raise ApiError(400, "Bad Request: message to be replied not found")
        quote = reply.get("quote") if isinstance(reply, dict) else None
        if target is not None and quote is not None:
            # As Telegram: the quote must be a part of the replied message's text or caption.
            said = str(target.get("text") or target.get("caption") or "")
            if not isinstance(quote, str) or utf16_len(quote) > 1024 or quote not in said:
                raise ApiError(400, "Bad Request: QUOTE_TEXT_INVALID")
        return target

    def drafts_to(self, chat_id: int) -> list[Draft]:
        return [d for d in self.drafts if d.chat_id == chat_id]

    async def _send_message_draft(self, params: dict[str, Any]) -> bool:
        """Private chats only, as Telegram; a non-zero draft_id; text of at most 4096."""
        chat_id = chat_id_of(params)
        if self._chat(chat_id).get("type") != "private":
            raise ApiError(400, "Bad Request: drafts can be sent only to private chats")
        draft_id = opt_int(params, "draft_id")
        if not draft_id:
            raise ApiError(400, "Bad Request: draft_id must be non-zero")
        raw = params.get("text") or ""
        if not isinstance(raw, str):
            raise ApiError(400, "Bad Request: text must be a string")
        explicit = params.get("entities")
        if explicit and self._reject_entities is not None and self._reject_entities(params):
            raise bad_entities("rejected by the test (reject_entities_when)")
        try:
            entities = validate_entities(raw, explicit) if explicit else []
        except ParseError as exc:
            raise bad_entities(str(exc)) from None
        if utf16_len(raw) > MAX_MESSAGE_LENGTH:
            raise ApiError(400, "Bad Request: text is too long")
        can_stop = opt_bool(params, "can_stop")
        self.drafts.append(Draft(chat_id, draft_id, raw, entities, can_stop, time.monotonic()))
        return True

    async def _send_chat_action(self, params: dict[str, Any]) -> bool:
        chat_id = chat_id_of(params)
        action = params.get("action")
        if action not in CHAT_ACTIONS:
            raise ApiError(400, "Bad Request: wrong parameter action in request")
        self.actions.append((chat_id, str(action)))
        self.action_params.append(params)
        return True

    async def _delete_message(self, params: dict[str, Any]) -> bool:
        chat_id = chat_id_of(params)
        message_id = opt_int(params, "message_id") or 0
        if self._messages.get(chat_id, {}).pop(message_id, None) is None:
            raise ApiError(400, "Bad Request: message to delete not found")
        self.deleted.append((chat_id, message_id))
        return True

    async def _edit_message_text(self, params: dict[str, Any]) -> dict[str, Any]:
        chat_id = chat_id_of(params)
        message_id = opt_int(params, "message_id")
        message = self._messages.get(chat_id, {}).get(message_id or 0)
        if message is None:
            raise ApiError(400, "Bad Request: message to edit not found")
        if message.get("from", {}).get("id") != BOT_ID:
            raise ApiError(400, "Bad Request: message can't be edited")
        text = params.get("text")
        if not isinstance(text, str) or not text.strip():
            raise ApiError(400, "Bad Request: message text is empty")
        markup = params.get("reply_markup")
        if text == message.get("text") and markup == message.get("reply_markup"):
            raise ApiError(
                400,
                "Bad Request: message is not modified: specified new message content and reply "
                "markup are exactly the same as a current content and reply markup of the message",
            )
        message["text"] = text
        if isinstance(markup, dict):
            message["reply_markup"] = markup
        self.edits.append(params)
        return message
