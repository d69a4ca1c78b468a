"""The webhook receiver (TELEGRAM_MODE=webhook): Telegram posts each update here.

It listens on WEBHOOK_HOST:WEBHOOK_PORT at the path of WEBHOOK_URL (a reverse proxy maps the
public address to it). A request must carry WEBHOOK_SECRET in Telegram's
`X-Telegram-Bot-Api-Secret-Token` header, or it gets 401 and nothing is kept. The answer is
200 only once the update is kept (in the Redis stream, or in the journal with
QUEUE=local: the intake's `put`); when that fails it is 503, and Telegram delivers the
update again later. The URL is registered with Telegram verbatim once the server listens.
"""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from aiohttp import web

from membot.intake.contract import Intake, IntakeUnavailable
from membot.listen import listen

if TYPE_CHECKING:
    from membot.intake.polling import Telegram

log = logging.getLogger(__name__)

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
# Telegram's updates are small; a file's contents never come in one (only its id).
MAX_BODY_BYTES = 1 << 20


class WebhookServer:
    def __init__(self, *, host: str, port: int, path: str, secret: str, intake: Intake) -> None:
        self.host = host
        self.port = port
        self.path = path
        self._secret = secret.encode()
        self.intake = intake
        self.received = 0
        self.app = web.Application(client_max_size=MAX_BODY_BYTES)
        self.app.router.add_post(path, self._update)
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{self.path}"

    async def start(self) -> None:
        self._runner = await listen(self.app, self.host, self.port, shutdown_timeout=5.0)
        log.info("webhook: listening on %s", self.url)

    async def close(self) -> None:
        """Stop taking updates; one being kept finishes (its answer decides Telegram's)."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def _update(self, request: web.Request) -> web.Response:
        given = request.headers.get(SECRET_HEADER, "").encode()
        if not hmac.compare_digest(given, self._secret):
            log.warning("webhook: refused a request without the right secret (401)")
            return _json(401, {"ok": False, "error": "unauthorized"})
        try:
            raw = await request.text()
            update = json.loads(raw)
            if not isinstance(update, dict) or not isinstance(update.get("update_id"), int):
                raise ValueError("not an update")
        except (ValueError, UnicodeDecodeError):
            # Telegram never sends this; answering 400 makes it stop retrying if it did.
            return _json(400, {"ok": False, "error": "bad_update"})
        except web.HTTPRequestEntityTooLarge:
            return _json(413, {"ok": False, "error": "too_large"})
        try:
            await self.intake.put([update])
        except IntakeUnavailable as exc:
            log.warning("webhook: update %s not kept (%s): 503", update["update_id"], exc)
            return _json(503, {"ok": False, "error": "unavailable"})
        self.received += 1
        return _json(200, {"ok": True})


def _json(status: int, payload: dict[str, Any]) -> web.Response:
    return web.Response(status=status, body=json.dumps(payload), content_type="application/json")


class WebhookSource:
    """Listen, then register WEBHOOK_URL verbatim with Telegram. It stays registered when
    the process stops, so Telegram keeps the updates and retries until a receiver is back."""

    def __init__(
        self,
        telegram: Telegram,
        intake: Intake,
        *,
        url: str,
        host: str,
        port: int,
        path: str,
        secret: str,
        allowed_updates: Sequence[str],
    ) -> None:
        self.telegram = telegram
        self.url = url
        self._secret = secret
        self.allowed_updates = list(allowed_updates)
        self.server = WebhookServer(host=host, port=port, path=path, secret=secret, intake=intake)

    @property
    def received(self) -> int:
        return self.server.received

    async def start(self) -> None:
        await self.server.start()
        try:
            await self.telegram.set_webhook(self.url, self._secret, self.allowed_updates)
        except BaseException:
            await self.server.close()
            raise

    async def stop(self) -> None:
        await self.server.close()
