"""The updates a test pushes to the bot (texts, edits, mentions, buttons, Stop) and the
fake's message store they go through. A mixin of FakeTelegram.
"""

from __future__ import annotations

import bisect
import time
from typing import Any, Unpack

from tests.fakes.telegram.markup import utf16_len
from tests.fakes.telegram.records import (
    BOT_ID,
    BOT_USERNAME,
    DEFAULT_GROUP_USER_ID,
    SUPERGROUP_ID_LIMIT,
    MessageOptions,
)


class Updates:
    def push_update(self, update: dict[str, Any]) -> int:
        """Enqueue a raw update (``update_id`` is assigned if missing) and wake long polls."""
        update = dict(update)
        if "update_id" in update:
            update_id = int(update["update_id"])
        else:
            update_id = self._last_update_id + 1
            update["update_id"] = update_id
        self._last_update_id = max(self._last_update_id, update_id)
        for key in ("message", "edited_message", "channel_post"):
            message = update.get(key)
            if isinstance(message, dict) and isinstance(message.get("chat"), dict):
                self._remember(message)
        bisect.insort(self._updates, update, key=lambda u: int(u["update_id"]))
        self._notifier.notify()
        return update_id

    def push_text(
        self,
        chat_id: int,
        text: str,
        *,
        entities: list[dict[str, Any]] | None = None,
        **options: Unpack[MessageOptions],
    ) -> int:
        """Enqueue a text message from a user.

        ``chat_type`` defaults to "private" for positive ids and "group"/"supergroup" for
        negative ones; ``user_id`` defaults to ``chat_id`` in private chats. Text starting with
        "/" gets a ``bot_command`` entity unless one is supplied at offset 0.
        """
        message = self._incoming(chat_id, options)
        message["text"] = text
        all_entities = [dict(e) for e in entities or []]
        if text.startswith("/") and not any(e.get("offset") == 0 for e in all_entities):
            command = text.split(maxsplit=1)[0]
            all_entities.insert(
                0, {"type": "bot_command", "offset": 0, "length": utf16_len(command)}
            )
        if all_entities:
            message["entities"] = all_entities
        return self.push_update({"message": message})

    def push_edit(
        self,
        chat_id: int,
        text: str,
        *,
        message_id: int | None = None,
        entities: list[dict[str, Any]] | None = None,
    ) -> int:
        """Enqueue an ``edited_message``: the user changed the text of their message
        ``message_id`` (by default the chat's latest from a user, sent earlier with a
        ``push_*`` builder) to ``text``. Telegram sends the whole message again, with its new
        text and entities and an ``edit_date``."""
        known = self._messages.get(chat_id, {})
        if message_id is None:
            users = [i for i, m in known.items() if m.get("from", {}).get("id") != BOT_ID]
            message_id = max(users, default=0)
        original = known.get(message_id)
        if original is None or original.get("from", {}).get("id") == BOT_ID:
            raise ValueError(f"chat {chat_id} has no user message {message_id} to edit")
        message = {k: v for k, v in original.items() if k not in ("text", "entities", "edit_date")}
        message["text"] = text
        message["edit_date"] = int(message["date"]) + 1
        all_entities = [dict(e) for e in entities or []]
        if text.startswith("/") and not any(e.get("offset") == 0 for e in all_entities):
            command = text.split(maxsplit=1)[0]
            all_entities.insert(
                0, {"type": "bot_command", "offset": 0, "length": utf16_len(command)}
            )
        if all_entities:
            message["entities"] = all_entities
        return self.push_update({"edited_message": message})

    def push_mention(
        self,
        chat_id: int,
        text_without_mention: str,
        *,
        entities: list[dict[str, Any]] | None = None,
        **options: Unpack[MessageOptions],
    ) -> int:
        """Enqueue "@membot_test_bot <text>" with a ``mention`` entity."""
        mention = f"@{BOT_USERNAME}"
        shift = utf16_len(mention) + 1
        shifted = [{**e, "offset": int(e["offset"]) + shift} for e in entities or []]
        return self.push_text(
            chat_id,
            f"{mention} {text_without_mention}",
            entities=[{"type": "mention", "offset": 0, "length": shift - 1}, *shifted],
            **options,
        )

    def push_callback(
        self, chat_id: int, message_id: int, data: str, **options: Unpack[MessageOptions]
    ) -> int:
        """A user pressed a button (with ``data``) under the bot's message ``message_id``."""
        message = self._messages.get(chat_id, {}).get(message_id)
        if message is None:
            raise ValueError(f"chat {chat_id} has no message {message_id}")
        user = self._incoming(chat_id, options)["from"]
        query = {
            "id": f"cbq-{next(self._callback_ids)}",
            "from": user,
            "message": message,
            "chat_instance": f"ci-{chat_id}",
            "data": data,
        }
        return self.push_update({"callback_query": query})

    def press_stop(self, chat_id: int, draft_id: int) -> int:
        """The user pressed Stop on the draft `draft_id` (Telegram shows the button only on a
        draft sent with can_stop): a `stopped_message_generation` update, as Bot API 10.3."""
        if not any(d.draft_id == draft_id and d.can_stop for d in self.drafts_to(chat_id)):
            raise ValueError(f"chat {chat_id} was shown no draft {draft_id} with a Stop button")
        return self.push_stop(chat_id, draft_id)

    def push_stop(self, chat_id: int, draft_id: int) -> int:
        """A `stopped_message_generation` update for any draft id (press_stop checks that
        the button was there)."""
        stopped = {"chat": self._chat(chat_id), "draft_id": draft_id}
        return self.push_update({"stopped_message_generation": stopped})

    def set_admins(self, chat_id: int, user_ids: list[int]) -> None:
        """The group's administrators, as getChatAdministrators reports them (first: owner)."""
        self._admins[chat_id] = list(user_ids)

    def _allocate_message_id(self, chat_id: int) -> int:
        message_id = self._next_message_id.get(chat_id, 1)
        self._next_message_id[chat_id] = message_id + 1
        return message_id

    def _remember(self, message: dict[str, Any]) -> None:
        chat = message["chat"]
        chat_id = int(chat["id"])
        self._chats.setdefault(chat_id, dict(chat))
        message_id = int(message.get("message_id", 0))
        self._messages.setdefault(chat_id, {})[message_id] = message
        # Raw updates may carry their own ids: keep the counter ahead of them.
        if message_id >= self._next_message_id.get(chat_id, 1):
            self._next_message_id[chat_id] = message_id + 1

    def _chat(self, chat_id: int) -> dict[str, Any]:
        chat = self._chats.get(chat_id)
        if chat is not None:
            return chat
        if chat_id > 0:
            return {"id": chat_id, "type": "private", "first_name": "Alice"}
        kind = "supergroup" if chat_id <= SUPERGROUP_ID_LIMIT else "group"
        return {"id": chat_id, "type": kind, "title": f"Group {chat_id}"}

    def _bot_message(self, chat_id: int, text: str) -> dict[str, Any]:
        message = {
            "message_id": self._allocate_message_id(chat_id),
            "date": int(time.time()),
            "chat": self._chat(chat_id),
            "from": dict(self.bot_user),
            "text": text,
        }
        self._remember(message)
        return message

    def _file(self, kind: str) -> dict[str, Any]:
        n = next(self._file_ids)
        return {"file_id": f"fake-{kind}-{n}", "file_unique_id": f"u-{kind}-{n}"}

    def _incoming(self, chat_id: int, options: MessageOptions) -> dict[str, Any]:
        """A message dict from a user in ``chat_id``; registers the chat on first use."""
        chat_type = options.get("chat_type") or self._chat(chat_id)["type"]
        if chat_type == "private" and chat_id <= 0:
            raise ValueError(f"private chat ids are positive user ids, got {chat_id}")
        user_id = options.get("user_id")
        if user_id is None:
            user_id = chat_id if chat_type == "private" else DEFAULT_GROUP_USER_ID
        user: dict[str, Any] = {
            "id": user_id,
            "is_bot": False,
            "first_name": options.get("first_name", "Alice"),
        }
        for key in ("last_name", "username", "language_code"):
            value = options.get(key)
            if value is not None:
                user[key] = value
        chat: dict[str, Any] = {"id": chat_id, "type": chat_type}
        if chat_type == "private":
            chat.update(
                (k, v) for k, v in user.items() if k in ("first_name", "last_name", "username")
            )
        else:
            chat["title"] = (
                options.get("title")
                or self._chats.get(chat_id, {}).get("title")
                or f"Group {chat_id}"
            )
        self._chats[chat_id] = chat
        # Resolve the reply target first: a synthetic bot message must get the earlier id.
        reply_to = options.get("reply_to")
        if options.get("reply_to_bot") and reply_to is None:
            from_bot = [
                m
                for m in self._messages.get(chat_id, {}).values()
                if m.get("from", {}).get("id") == BOT_ID
            ]
            target = from_bot[-1] if from_bot else self._bot_message(chat_id, "Earlier bot message")
            reply_to = int(target["message_id"])
        message: dict[str, Any] = {
            "message_id": self._allocate_message_id(chat_id),
            "date": int(time.time()),
            "chat": chat,
            "from": user,
        }
        thread_id = options.get("thread_id")
        if thread_id is not None:
            message["message_thread_id"] = thread_id
            message["is_topic_message"] = True
        if reply_to is not None:
            quoted = self._messages.get(chat_id, {}).get(reply_to)
            if quoted is None:
                raise ValueError(f"chat {chat_id} has no message {reply_to} to reply to")
            # Telegram does not nest replies: the quoted message has no reply_to_message.
            message["reply_to_message"] = {
                k: v for k, v in quoted.items() if k != "reply_to_message"
            }
        return message
