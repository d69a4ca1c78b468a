"""How updates leave the fake: getUpdates (long polling, with Telegram's conflicts) or a
webhook. A mixin of FakeTelegram.
"""

from __future__ import annotations

import re
from typing import Any

from tests.fakes.telegram.protocol import (
    ApiError,
    opt_bool,
    opt_int,
    update_type,
)
from tests.fakes.telegram.webhook import Delivery, WebhookSender

_CONFLICT = (
    "Conflict: terminated by other getUpdates request; "
    "make sure that only one bot instance is running"
)


_WEBHOOK_ACTIVE = (
    "Conflict: can't use getUpdates method while webhook is active; "
    "use deleteWebhook to delete the webhook first"
)


class Polling:
    async def _set_webhook(self, params: dict[str, Any]) -> bool:
        url = params.get("url")
        if not isinstance(url, str):
            raise ApiError(400, "Bad Request: url is required")
        if not url:
            return await self._delete_webhook(params)  # Telegram: an empty url removes it
        # Telegram requires https; the fake also takes http, for servers on 127.0.0.1.
        if not url.startswith(("https://", "http://")):
            raise ApiError(400, "Bad Request: bad webhook: An HTTPS URL must be provided")
        secret = params.get("secret_token") or None
        if secret is not None and not re.fullmatch(r"[A-Za-z0-9_-]{1,256}", str(secret)):
            raise ApiError(400, "Bad Request: secret token contains unallowed characters")
        if opt_bool(params, "drop_pending_updates"):
            self._updates.clear()
        self._webhook_max_connections = opt_int(params, "max_connections") or 40
        self._set_allowed(params)
        await self._stop_sender()
        self.webhook_url, self.webhook_secret = url, secret
        self._start_sender()
        self._poll_generation += 1  # a waiting getUpdates ends with a conflict
        self._notifier.notify()
        return True

    async def _delete_webhook(self, params: dict[str, Any]) -> bool:
        await self._stop_sender()
        self.webhook_url, self.webhook_secret = "", None
        if opt_bool(params, "drop_pending_updates"):
            self._updates.clear()
        return True

    async def _get_webhook_info(self, params: dict[str, Any]) -> dict[str, Any]:
        return {
            "url": self.webhook_url,
            "has_custom_certificate": False,
            "pending_update_count": len(self._updates),
            "max_connections": self._webhook_max_connections,
        }

    def _start_sender(self) -> None:
        self._sender = WebhookSender(
            url=self.webhook_url,
            secret=self.webhook_secret,
            max_connections=self._webhook_max_connections,
            retry_delay=self.webhook_retry_delay,
            pending=lambda: list(self._deliverable()),
            delivered=self._webhook_delivered,
            failed=self._webhook_failed,
            changed=lambda: self._notifier.current,
            notify=self._notifier.notify,
        )
        self._sender.start()

    async def _stop_sender(self) -> None:
        sender, self._sender = self._sender, None
        if sender is not None:
            await sender.stop()

    def _webhook_delivered(self, update_id: int, status: int) -> None:
        self.webhook_deliveries.append(Delivery(update_id, status))
        self._updates = [u for u in self._updates if int(u["update_id"]) != update_id]
        self._notifier.notify()

    def _webhook_failed(self, update_id: int, status: int) -> None:
        self.webhook_deliveries.append(Delivery(update_id, status))
        self._notifier.notify()

    async def _get_updates(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        if self.webhook_url:
            raise ApiError(409, _WEBHOOK_ACTIVE)
        offset = opt_int(params, "offset")
        limit = min(max(opt_int(params, "limit") or 100, 1), 100)
        timeout = max(opt_int(params, "timeout") or 0, 0)
        if offset is not None:
            if offset < 0:
                # Negative offset: keep only the last -offset updates, forget the rest.
                del self._updates[: max(len(self._updates) + offset, 0)]
            else:
                self._updates = [u for u in self._updates if int(u["update_id"]) >= offset]
        # Like Telegram, a new poll terminates any older one still waiting (409 Conflict):
        # that is how two bot instances polling one token show up.
        self._poll_generation += 1
        generation = self._poll_generation
        self._notifier.notify()
        self._polling += 1
        try:
            self._set_allowed(params)
            await self._notifier.wait_for(
                lambda: (
                    bool(self._deliverable())
                    or self._closing
                    or self._poll_generation != generation
                ),
                timeout,
            )
        finally:
            self._polling -= 1
        if self._poll_generation != generation and not self._closing:
            raise ApiError(409, _CONFLICT)
        return self._deliverable()[:limit]

    def _set_allowed(self, params: dict[str, Any]) -> None:
        """Telegram keeps the last allowed_updates given; an empty list means all."""
        allowed = params.get("allowed_updates")
        if isinstance(allowed, list):
            self.allowed_updates = [str(kind) for kind in allowed] or None

    def _deliverable(self) -> list[dict[str, Any]]:
        """The unconfirmed updates, without those of a type the bot did not ask for."""
        allowed = self.allowed_updates
        if allowed is not None:
            unwanted = [u for u in self._updates if update_type(u) not in allowed]
            if unwanted:
                self.not_delivered.extend(unwanted)
                self._updates = [u for u in self._updates if update_type(u) in allowed]
        return self._updates
