"""Telegram's side of a webhook, for the fake Bot API server.

Like Telegram, it posts each pending update as JSON to the registered URL with the secret in
``X-Telegram-Bot-Api-Secret-Token``, keeps an update until it gets a 2xx answer, and tries a
refused or failed one again after a delay. One chat's updates go one at a time, in
``update_id`` order (the next waits for the previous one's 2xx); different chats go in
parallel, up to ``max_connections``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aiohttp

log = logging.getLogger(__name__)

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"


@dataclass(slots=True, frozen=True)
class Delivery:
    """One POST to the webhook: the update and the status it got (0: no HTTP answer)."""

    update_id: int
    status: int


def chat_key(update: dict[str, Any]) -> object:
    for value in update.values():
        if isinstance(value, dict):
            chat = value.get("chat") or (value.get("message") or {}).get("chat")
            if isinstance(chat, dict):
                return chat.get("id")
    return ("update", update.get("update_id"))


class WebhookSender:
    """Runs while a webhook is set. ``pending`` gives the updates not yet delivered (ascending
    update_id); ``delivered`` removes one; ``changed`` returns an Event that is set at the
    next change of the fake's state, which ``notify`` makes."""

    def __init__(
        self,
        *,
        url: str,
        secret: str | None,
        max_connections: int,
        retry_delay: float,
        pending: Callable[[], list[dict[str, Any]]],
        delivered: Callable[[int, int], None],
        failed: Callable[[int, int], None],
        changed: Callable[[], asyncio.Event],
        notify: Callable[[], None],
    ) -> None:
        self.url = url
        self.secret = secret
        self.max_connections = max_connections
        self.retry_delay = retry_delay
        self._pending = pending
        self._delivered = delivered
        self._failed = failed
        self._changed = changed
        self._notify = notify
        self._busy: dict[object, asyncio.Task[None]] = {}
        self._task: asyncio.Task[None] | None = None
        self._session: aiohttp.ClientSession | None = None

    def start(self) -> None:
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30))
        self._task = asyncio.create_task(self._run(), name="fake-telegram-webhook")

    async def stop(self) -> None:
        tasks = [t for t in (self._task, *self._busy.values()) if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._busy.clear()
        if self._session is not None:
            await self._session.close()

    async def _run(self) -> None:
        while True:
            changed = self._changed()  # taken first: a change while we look is not missed
            seen: set[object] = set()
            for update in self._pending():
                key = chat_key(update)
                if key in seen:
                    continue  # an earlier update of this chat goes first
                seen.add(key)
                if key in self._busy or len(self._busy) >= self.max_connections:
                    continue
                task = asyncio.create_task(self._deliver(update))
                self._busy[key] = task
                task.add_done_callback(lambda _t, k=key: self._done(k))
            await changed.wait()

    def _done(self, key: object) -> None:
        self._busy.pop(key, None)
        self._notify()  # the chat's next update (or this one again) may go now

    async def _deliver(self, update: dict[str, Any]) -> None:
        assert self._session is not None
        update_id = int(update["update_id"])
        headers = {"Content-Type": "application/json"}
        if self.secret is not None:
            headers[SECRET_HEADER] = self.secret
        try:
            async with self._session.post(
                self.url, data=json.dumps(update), headers=headers
            ) as response:
                status = response.status
                await response.read()
        except (aiohttp.ClientError, TimeoutError) as exc:
            log.debug("webhook delivery of %d failed: %s", update_id, exc)
            status = 0
        if 200 <= status < 300:
            self._delivered(update_id, status)
            return
        self._failed(update_id, status)
        # Telegram waits before it tries again; the chat's later updates wait behind it.
        await asyncio.sleep(self.retry_delay)
