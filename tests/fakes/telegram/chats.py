"""What the bot asks about chats and sets for them: administrators, answers to buttons, its
commands. A mixin of FakeTelegram.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tests.fakes.telegram.protocol import (
    ApiError,
    chat_id_of,
)

_COMMAND_RE = re.compile(r"[a-z0-9_]{1,32}")


class Chats:
    async def _get_chat_administrators(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        chat_id = chat_id_of(params)
        if chat_id > 0:
            raise ApiError(400, "Bad Request: there are no administrators in the private chat")
        members: list[dict[str, Any]] = []
        for n, user_id in enumerate(self._admins.get(chat_id, [])):
            user = {"id": user_id, "is_bot": False, "first_name": f"Admin {user_id}"}
            if n == 0:
                members.append({"status": "creator", "user": user, "is_anonymous": False})
                continue
            rights = [
                "can_be_edited",
                "can_manage_chat",
                "can_delete_messages",
                "can_manage_video_chats",
                "can_restrict_members",
                "can_promote_members",
                "can_change_info",
                "can_invite_users",
                "can_post_stories",
                "can_edit_stories",
                "can_delete_stories",
                "can_send_welcome_messages",
            ]
            members.append(
                {"status": "administrator", "user": user, "is_anonymous": False}
                | dict.fromkeys(rights, n == 1)
            )
        return members

    async def _answer_callback_query(self, params: dict[str, Any]) -> bool:
        if not params.get("callback_query_id") or self.callback_answers_too_old:
            raise ApiError(400, "Bad Request: query is too old or query ID is invalid")
        self.callback_answers.append(params)
        return True

    def commands_for(self, language_code: str = "") -> list[dict[str, Any]]:
        """The menu registered for the default scope and this language ("" = all)."""
        key = (json.dumps({"type": "default"}, sort_keys=True), language_code)
        return list(self._commands_by_scope.get(key, []))

    @staticmethod
    def _scope_key(params: dict[str, Any]) -> tuple[str, str]:
        scope = params.get("scope") or {"type": "default"}
        return json.dumps(scope, sort_keys=True), str(params.get("language_code") or "")

    async def _set_my_commands(self, params: dict[str, Any]) -> bool:
        commands = params.get("commands")
        if not isinstance(commands, list):
            raise ApiError(400, "Bad Request: commands must be an array")
        if len(commands) > 100:
            raise ApiError(400, "Bad Request: too many commands")
        for command in commands:
            name = command.get("command") if isinstance(command, dict) else None
            if not isinstance(name, str) or not _COMMAND_RE.fullmatch(name):
                raise ApiError(400, "Bad Request: BOT_COMMAND_INVALID")
            description = command.get("description")
            if not isinstance(description, str) or not 1 <= len(description.strip()) <= 256:
                raise ApiError(400, "Bad Request: BOT_COMMAND_DESCRIPTION_INVALID")
        self.commands = [dict(c) for c in commands]
        self._commands_by_scope[self._scope_key(params)] = self.commands
        return True

    async def _get_my_commands(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        return list(self._commands_by_scope.get(self._scope_key(params), []))

    async def _delete_my_commands(self, params: dict[str, Any]) -> bool:
        self._commands_by_scope.pop(self._scope_key(params), None)
        self.commands = []
        return True
