"""What every route of the fake Bot API shares: its error answer, the request parameters as
Telegram reads them, and the notifier every waiter wakes on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

# Form-encoded requests (aiogram's default) carry complex values as JSON strings. Only these
# fields are decoded: a message text that happens to start with "[" must stay a string.
JSON_FIELDS = frozenset(
    {
        "allowed_updates",
        "caption_entities",
        "commands",
        "entities",
        "ephemeral_message_parameters",
        "link_preview_options",
        "reply_markup",
        "reply_parameters",
        "result",
        "scope",
    }
)


class ApiError(Exception):
    """Raised by method handlers; rendered as Telegram's ``{"ok": false, ...}`` response."""

    def __init__(self, status: int, description: str, retry_after: int | None = None) -> None:
        super().__init__(description)
        self.status = status
        self.description = description
        self.retry_after = retry_after


def bad_entities(reason: str) -> ApiError:
    return ApiError(400, f"Bad Request: can't parse entities: {reason}")


class Notifier:
    """Broadcasts "state changed" to any number of waiters, callable from synchronous code.

    ``asyncio.Condition.notify_all()`` requires holding the condition's lock, which can only be
    taken with ``await``; the ``push_*`` builders are synchronous. So each change sets the
    current Event and swaps in a fresh one; waiters re-check their predicate after every
    wake-up, with the same semantics as ``Condition.wait_for()``.
    """

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def notify(self) -> None:
        self._event.set()
        self._event = asyncio.Event()

    @property
    def current(self) -> asyncio.Event:
        """Set at the next notify()."""
        return self._event

    async def wait_for(self, predicate: Callable[[], bool], timeout: float | None) -> bool:
        """Wait until ``predicate()`` is true; returns its final value if the timeout passes."""
        try:
            async with asyncio.timeout(timeout):
                while not predicate():
                    await self._event.wait()
        except TimeoutError:
            return predicate()
        return True


def opt_int(params: dict[str, Any], key: str) -> int | None:
    value = params.get(key)
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise ApiError(400, f'Bad Request: field "{key}" must be a Number')
    if isinstance(value, int):
        return value
    try:
        return int(str(value))
    except ValueError:
        raise ApiError(400, f'Bad Request: field "{key}" must be a Number') from None


def opt_bool(params: dict[str, Any], key: str) -> bool:
    value = params.get(key)
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1")
    return bool(value)


def update_type(update: dict[str, Any]) -> str:
    """An update's type: its one field besides update_id ("message", "callback_query"...)."""
    return next((key for key in update if key != "update_id"), "")


def chat_id_of(params: dict[str, Any]) -> int:
    value = params.get("chat_id")
    if value is None or value == "":
        raise ApiError(400, "Bad Request: chat_id is empty")
    try:
        return int(value)
    except (TypeError, ValueError):
        # "@channelusername" style ids: this fake only knows numeric chats.
        raise ApiError(400, "Bad Request: chat not found") from None
