"""Ephemeral messages (Bot API 10.2): a message in a group that only its receiver sees, with
its edits, deletion and the buttons under it. A mixin of FakeTelegram: its state is set up
by ``_init_ephemeral``.

An ephemeral message has no ``message_id`` of its own (0): it is named by
``ephemeral_message_id``, per chat, and carries ``receiver_user``. The fake keeps it apart
from the chat's messages, so nothing can reply to it or press it but its receiver
(``press_ephemeral``). Tests read what each member saw with ``seen_by``.
"""

from __future__ import annotations

from typing import Any

from tests.fakes.telegram.protocol import ApiError, chat_id_of, opt_int
from tests.fakes.telegram.records import SentMessage

# What Telegram answers where a chat takes no ephemeral messages (a test's refuse_ephemeral).
REFUSED = "Bad Request: ephemeral messages can't be sent to the chat"
NEVER_STARTED = "Forbidden: bot can't initiate conversation with a user"


class Ephemeral:
    def _init_ephemeral(self) -> None:
        self._ephemeral: dict[tuple[int, int], dict[str, Any]] = {}
        self._next_ephemeral: dict[int, int] = {}
        self._ephemeral_refusal: tuple[int, str] | None = None
        self._never_started: set[int] = set()

    def refuse_ephemeral(self, status: int = 400, description: str = REFUSED) -> None:
        """Answer every sendMessage with ephemeral_message_parameters with this error, as a
        server or chat without ephemeral messages would. ``allow_ephemeral`` undoes it."""
        self._ephemeral_refusal = (status, description)

    def allow_ephemeral(self) -> None:
        self._ephemeral_refusal = None

    def never_started(self, user_id: int) -> None:
        """The user never opened a private chat with the bot: Telegram answers 403 to a
        message to them."""
        self._never_started.add(user_id)

    def _check_private(self, chat_id: int) -> None:
        if chat_id in self._never_started:
            raise ApiError(403, NEVER_STARTED)

    def _ephemeral_target(self, chat_id: int, params: dict[str, Any]) -> int | None:
        """The receiver of an ephemeral sendMessage; None for an ordinary one."""
        given = params.get("ephemeral_message_parameters")
        if given is None:
            return None
        if not isinstance(given, dict):
            raise ApiError(400, "Bad Request: can't parse ephemeral message parameters")
        receiver = opt_int(given, "receiver_user_id")
        if receiver is None:
            raise ApiError(400, "Bad Request: receiver_user_id is required")
        if self._ephemeral_refusal is not None:
            raise ApiError(*self._ephemeral_refusal)
        if self._chat(chat_id).get("type") not in ("group", "supergroup"):
            raise ApiError(400, "Bad Request: ephemeral messages can be sent only to groups")
        return receiver

    def _keep_ephemeral(self, message: dict[str, Any], receiver: int) -> None:
        """Make the bot's new message `message` (not yet in the chat's store) ephemeral."""
        chat_id = int(message["chat"]["id"])
        store = self._messages.get(chat_id, {})
        store.pop(int(message["message_id"]), None)
        number = self._next_ephemeral.get(chat_id, 1)
        self._next_ephemeral[chat_id] = number + 1
        message["message_id"] = 0
        message["ephemeral_message_id"] = number
        message["receiver_user"] = {"id": receiver, "is_bot": False, "first_name": "Member"}
        self._ephemeral[(chat_id, number)] = message

    def seen_by(self, chat_id: int, user_id: int) -> list[SentMessage]:
        """What the member sees of the bot's messages to the chat: every ordinary one and
        the ephemeral ones sent to them."""
        return [
            m
            for m in self.messages_to(chat_id)
            if m.receiver_user_id is None or m.receiver_user_id == user_id
        ]

    def ephemeral_message(self, chat_id: int, ephemeral_message_id: int) -> dict[str, Any]:
        """The ephemeral message as it stands now (edits applied); KeyError once deleted."""
        return self._ephemeral[(chat_id, ephemeral_message_id)]

    def press_ephemeral(
        self, chat_id: int, ephemeral_message_id: int, data: str, user_id: int
    ) -> int:
        """The receiver of an ephemeral message pressed a button (``data``) under it."""
        message = self._ephemeral.get((chat_id, ephemeral_message_id))
        if message is None:
            raise ValueError(f"chat {chat_id} has no ephemeral message {ephemeral_message_id}")
        if message["receiver_user"]["id"] != user_id:
            raise ValueError(
                f"user {user_id} does not see ephemeral message {ephemeral_message_id}"
            )
        buttons = [
            b.get("callback_data")
            for row in message.get("reply_markup", {}).get("inline_keyboard", [])
            for b in row
        ]
        if data not in buttons:
            raise ValueError(f"no button {data!r} under ephemeral message {ephemeral_message_id}")
        user = self._incoming(chat_id, {"user_id": user_id})["from"]
        query = {
            "id": f"cbq-{next(self._callback_ids)}",
            "from": user,
            "message": dict(message),
            "chat_instance": f"ci-{chat_id}",
            "data": data,
        }
        return self.push_update({"callback_query": query})

    def _ephemeral_of(self, params: dict[str, Any]) -> dict[str, Any]:
        chat_id = chat_id_of(params)
        number = opt_int(params, "ephemeral_message_id") or 0
        message = self._ephemeral.get((chat_id, number))
        if message is None or message["receiver_user"]["id"] != opt_int(params, "receiver_user_id"):
            raise ApiError(400, "Bad Request: ephemeral message not found")
        return message

    async def _edit_ephemeral_message_text(self, params: dict[str, Any]) -> bool:
        message = self._ephemeral_of(params)
        text = params.get("text")
        if not isinstance(text, str) or not text.strip():
            raise ApiError(400, "Bad Request: message text is empty")
        markup = params.get("reply_markup")
        if text == message.get("text") and markup == message.get("reply_markup"):
            raise ApiError(400, "Bad Request: message is not modified")
        message["text"] = text
        if isinstance(markup, dict):
            message["reply_markup"] = markup
        else:
            message.pop("reply_markup", None)
        self.edits.append(params)
        return True

    async def _delete_ephemeral_message(self, params: dict[str, Any]) -> bool:
        message = self._ephemeral_of(params)
        del self._ephemeral[(int(message["chat"]["id"]), int(message["ephemeral_message_id"]))]
        return True
