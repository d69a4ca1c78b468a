"""The fake Bot API server: its HTTP routes, the method table, and what tests inspect and
wait on. The methods live by concern in the mixins it is made of.
"""

from __future__ import annotations

import itertools
import json
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from aiohttp import web

from tests.fakes.server import LocalServer
from tests.fakes.telegram.chats import Chats
from tests.fakes.telegram.documents import Documents
from tests.fakes.telegram.ephemeral import Ephemeral
from tests.fakes.telegram.faults import Faults
from tests.fakes.telegram.files import FileError, FileStore
from tests.fakes.telegram.guest import Guest
from tests.fakes.telegram.media_updates import MediaUpdates
from tests.fakes.telegram.polling import Polling
from tests.fakes.telegram.protocol import (
    JSON_FIELDS,
    ApiError,
    Notifier,
)
from tests.fakes.telegram.records import (
    BOT_FIRST_NAME,
    BOT_ID,
    BOT_USERNAME,
    Draft,
    SentMessage,
)
from tests.fakes.telegram.sending import Sending
from tests.fakes.telegram.updates import Updates
from tests.fakes.telegram.webhook import Delivery, WebhookSender

log = logging.getLogger("tests.fakes.telegram")

_Method = Callable[[dict[str, Any]], Awaitable[Any]]


class FakeTelegram(
    Updates,
    MediaUpdates,
    Faults,
    Ephemeral,
    Guest,
    Polling,
    Sending,
    Documents,
    Chats,
    LocalServer,
):
    """Fake Bot API server. ``async with FakeTelegram(token=...) as tg:`` starts and stops it."""

    def __init__(self, token: str = "4242:TEST-TOKEN") -> None:
        super().__init__()
        self.token = token
        self.bot_user: dict[str, Any] = {
            "id": BOT_ID,
            "is_bot": True,
            "first_name": BOT_FIRST_NAME,
            "username": BOT_USERNAME,
            "can_join_groups": True,
            "can_read_all_group_messages": False,
            "supports_inline_queries": False,
        }
        self.sent: list[SentMessage] = []
        self.drafts: list[Draft] = []  # every accepted sendMessageDraft, in order
        self.actions: list[tuple[int, str]] = []
        self.action_params: list[dict[str, Any]] = []  # every sendChatAction's parameters
        self.commands: list[dict[str, Any]] = []
        self.errors: list[tuple[str, str]] = []
        self.calls: list[str] = []
        # Per-chat / per-method indexes keep wait predicates O(1): benchmarks send thousands.
        self._sent_by_chat: dict[int, list[SentMessage]] = {}
        self._call_counts: Counter[str] = Counter()
        self._updates: list[dict[str, Any]] = []  # unconfirmed, ascending update_id
        # The update types the bot asked for (getUpdates' or setWebhook's allowed_updates;
        # None: all). Like Telegram, an update of another type is never delivered: it is
        # dropped into `not_delivered`.
        self.allowed_updates: list[str] | None = None
        self.not_delivered: list[dict[str, Any]] = []
        self._last_update_id = 0
        self._chats: dict[int, dict[str, Any]] = {}
        self._messages: dict[int, dict[int, dict[str, Any]]] = {}
        self._next_message_id: dict[int, int] = {}
        self._commands_by_scope: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self._file_ids = itertools.count(1)
        self._notifier = Notifier()
        self._poll_generation = 0
        self._polling = 0
        self._closing = False
        self._method_table = self._build_method_table()
        # Webhook: what setWebhook registered, and every delivery attempt.
        self.webhook_url = ""
        self.webhook_secret: str | None = None
        self.webhook_deliveries: list[Delivery] = []
        self.webhook_retry_delay = 0.05
        self._webhook_max_connections = 40
        self._sender: WebhookSender | None = None
        self._init_faults()
        self._init_ephemeral()
        self._init_guest()
        # Buttons: answers to callback queries, message edits, and each group's administrators.
        self.callback_answers: list[dict[str, Any]] = []
        # Set: every answerCallbackQuery is refused as too old (Telegram's ~15 s limit).
        self.callback_answers_too_old = False
        self.edits: list[dict[str, Any]] = []
        self.deleted: list[tuple[int, int]] = []  # (chat, message id) the bot deleted
        self._admins: dict[int, list[int]] = {}
        self._callback_ids = itertools.count(1)
        # Files: bytes registered by tests (add_file), served by getFile and /file/bot<token>/.
        self.files = FileStore()
        self._init_documents()  # every document the bot uploaded (sendDocument)

    def build_app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/bot{token}/{method}", self._handle)
        app.router.add_get("/file/bot{token}/{path:.+}", self._download)
        return app

    def _on_start(self) -> None:
        self._closing = False

    def _on_stop(self) -> None:
        # Release pending long polls so the graceful shutdown does not wait on them.
        self._closing = True
        self._notifier.notify()

    @property
    def base_url(self) -> str:
        return self.origin

    async def start(self) -> None:
        await super().start()
        if self.webhook_url:
            self._start_sender()

    async def stop(self) -> None:
        await self._stop_sender()
        await super().stop()

    def clear_records(self) -> None:
        """Forget what was recorded so far (messages sent, drafts, actions, edits, the call
        log) and the messages of every chat, the users' and the bot's (a reply to or an edit of
        one from before is then refused, as Telegram refuses an unknown message); call counts,
        chats, their message numbering and pending updates stay. For long benchmarks, between
        measured runs: thousands of kept records make the collector's full passes slower for
        whatever runs next in the process."""
        for log in (self.sent, self.drafts, self.actions, self.action_params, self.calls):
            log.clear()
        self.edits.clear()
        self._sent_by_chat.clear()
        self._messages.clear()

    def messages_to(self, chat_id: int) -> list[SentMessage]:
        return list(self._sent_by_chat.get(chat_id, ()))

    def call_count(self, method: str) -> int:
        """How many times ``method`` was called (case-insensitive, failed calls included)."""
        return self._call_counts[method.lower()]

    def pending_updates(self) -> int:
        """Updates not yet confirmed by a getUpdates ``offset``."""
        return len(self._updates)

    @property
    def polling(self) -> int:
        """Number of getUpdates requests currently waiting."""
        return self._polling

    async def wait_until(
        self, predicate: Callable[[], bool], timeout: float = 30.0, *, what: str = "condition"
    ) -> None:
        """Wait until ``predicate()`` holds; AssertionError with the server's state otherwise."""
        if not await self._notifier.wait_for(predicate, timeout):
            raise AssertionError(
                f"timed out after {timeout}s waiting for {what}\n{self.describe()}"
            )

    async def wait_for_messages(
        self, chat_id: int, count: int, timeout: float = 30.0
    ) -> list[SentMessage]:
        """The first ``count`` messages sent to ``chat_id``, once that many exist."""

        def enough() -> bool:
            return len(self._sent_by_chat.get(chat_id, ())) >= count

        await self.wait_until(enough, timeout, what=f"{count} message(s) to chat {chat_id}")
        return self.messages_to(chat_id)[:count]

    async def wait_for_total(self, count: int, timeout: float = 30.0) -> list[SentMessage]:
        """The first ``count`` messages sent to any chat, once that many exist."""
        await self.wait_until(
            lambda: len(self.sent) >= count, timeout, what=f"{count} message(s) in total"
        )
        return self.sent[:count]

    async def wait_for_call(self, method: str, timeout: float = 30.0, count: int = 1) -> None:
        """Wait until ``method`` has been called at least ``count`` times (ever)."""
        await self.wait_until(
            lambda: self.call_count(method) >= count, timeout, what=f"{count} call(s) of {method}"
        )

    def describe(self) -> str:
        """Human-readable state, used in timeout messages."""
        lines = [f"sent ({len(self.sent)}):"]
        lines += [f"  chat {m.chat_id} #{m.message_id}: {m.text[:120]!r}" for m in self.sent]
        lines.append(f"errors: {self.errors}")
        lines.append(f"last calls: {self.calls[-20:]}")
        lines.append(f"pending updates: {self.pending_updates()}, polling: {self._polling}")
        return "\n".join(lines)

    async def _handle(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        handler = self._method_table.get(method.lower())
        canonical = handler[0] if handler else method
        self.calls.append(canonical)
        self._call_counts[canonical.lower()] += 1
        self._notifier.notify()
        if request.match_info["token"] != self.token:
            return self._error_response(request, canonical, ApiError(401, "Unauthorized"))
        try:
            if canonical == "sendDocument" and not await self._held_upload(request):
                raise ApiError(400, "Bad Request: the upload was not completed")
            params = await self._read_params(request)
            fault = self._take_fault(canonical, params)
            if fault is not None:
                raise ApiError(fault.status, fault.description, fault.retry_after)
            self._flood(canonical, params)
            if handler is None:
                raise ApiError(404, "Not Found: method not found")
            result = await handler[1](params)
        except ApiError as exc:
            return self._error_response(request, canonical, exc)
        finally:
            self._notifier.notify()
        return web.json_response({"ok": True, "result": result})

    def _error_response(self, request: web.Request, method: str, exc: ApiError) -> web.Response:
        log.debug("FakeTelegram %s -> %d %s", method, exc.status, exc.description)
        # An answer to a client that already hung up (a superseded long poll racing its own
        # cancellation) reaches nobody, so it is not an error the bot saw.
        if request.transport is not None and not request.transport.is_closing():
            self.errors.append((method, exc.description))
            self._notifier.notify()
        body: dict[str, Any] = {
            "ok": False,
            "error_code": exc.status,
            "description": exc.description,
        }
        if exc.retry_after is not None:
            body["parameters"] = {"retry_after": exc.retry_after}
        return web.json_response(body, status=exc.status)

    async def _read_params(self, request: web.Request) -> dict[str, Any]:
        """Merge query string and body (JSON, urlencoded or multipart) into one dict."""
        params: dict[str, Any] = dict(request.query)
        if request.body_exists:
            if request.content_type == "application/json":
                try:
                    body = await request.json()
                except ValueError:
                    raise ApiError(400, "Bad Request: can't parse JSON body") from None
                if not isinstance(body, dict):
                    raise ApiError(400, "Bad Request: JSON body must be an object")
                params.update(body)
            elif request.content_type in (
                "application/x-www-form-urlencoded",
                "multipart/form-data",
            ):
                form = await request.post()
                params.update(form.items())
            else:
                raise ApiError(400, f"Bad Request: unsupported Content-Type {request.content_type}")
        for key in JSON_FIELDS & params.keys():
            value = params[key]
            if isinstance(value, str):
                try:
                    params[key] = json.loads(value)
                except ValueError:
                    raise ApiError(
                        400, f"Bad Request: can't parse {key.replace('_', ' ')} JSON object"
                    ) from None
        return params

    def _build_method_table(self) -> dict[str, tuple[str, _Method]]:
        # Bot API method names are case-insensitive; `calls` records the canonical spelling.
        table: Iterable[tuple[str, _Method]] = (
            ("getMe", self._get_me),
            ("getUpdates", self._get_updates),
            ("setWebhook", self._set_webhook),
            ("deleteWebhook", self._delete_webhook),
            ("getWebhookInfo", self._get_webhook_info),
            ("sendMessage", self._send_message),
            ("sendChatAction", self._send_chat_action),
            ("sendMessageDraft", self._send_message_draft),
            ("sendDocument", self._send_document),
            ("getChatAdministrators", self._get_chat_administrators),
            ("getFile", self._get_file),
            ("answerCallbackQuery", self._answer_callback_query),
            ("editMessageText", self._edit_message_text),
            ("deleteMessage", self._delete_message),
            ("editEphemeralMessageText", self._edit_ephemeral_message_text),
            ("deleteEphemeralMessage", self._delete_ephemeral_message),
            ("answerGuestQuery", self._answer_guest_query),
            ("setMyCommands", self._set_my_commands),
            ("getMyCommands", self._get_my_commands),
            ("deleteMyCommands", self._delete_my_commands),
            ("close", self._ok),
            ("logOut", self._ok),
        )
        return {name.lower(): (name, handler) for name, handler in table}

    async def _ok(self, params: dict[str, Any]) -> bool:
        return True

    async def _get_me(self, params: dict[str, Any]) -> dict[str, Any]:
        return dict(self.bot_user)

    def add_file(self, data: bytes, kind: str = "document", file_name: str = "") -> dict[str, Any]:
        """Register ``data`` for getFile and download; the message's file fields."""
        return self.files.add(data, kind, file_name)

    async def _get_file(self, params: dict[str, Any]) -> dict[str, Any]:
        try:
            return self.files.get_file(params.get("file_id"))
        except FileError as exc:
            raise ApiError(exc.status, exc.description) from None

    async def _download(self, request: web.Request) -> web.Response:
        self.calls.append("download")
        self._call_counts["download"] += 1
        self._notifier.notify()
        if request.match_info["token"] != self.token:
            return web.json_response(
                {"ok": False, "error_code": 401, "description": "Unauthorized"}, status=401
            )
        data = self.files.download(request.match_info["path"])
        if data is None:
            return web.json_response(
                {"ok": False, "error_code": 404, "description": "Not Found"}, status=404
            )
        return web.Response(body=data, content_type="application/octet-stream")
