"""The durable inbox: an update is on disk before Telegram is told it was received.

With long polling, asking for the next batch (`getUpdates` with a higher offset) confirms
the previous one, and aiogram asks while that batch is still being answered. A crash then
would lose every message received but not yet answered: Telegram never sends them again.

So every batch is appended to `DATA_DIR/inbox.jsonl` and fdatasync'd (one sync per batch,
in a worker thread) by a request middleware on `getUpdates`, before the dispatcher sees it.
At start-up, the journal is read back: a text message whose question is not in its chat's
archive was never answered, and is handled again, before anything new. Commands and other
updates are not replayed (a second `/reset` could wipe what came after the first), and
Telegram's own redelivery of an update already journaled is skipped. Only updates that would
be answered again are journaled, and the journal is emptied whenever nothing in it is still
being handled, so a message stays there only about as long as it is in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, cast

from aiogram import BaseMiddleware, Bot
from aiogram.client.session.middlewares.base import (
    BaseRequestMiddleware,
    NextRequestMiddlewareType,
)
from aiogram.methods import GetUpdates, Response, TelegramMethod
from aiogram.methods.base import TelegramType
from aiogram.types import TelegramObject, Update
from pydantic import ValidationError

from membot.bot.filters import AddressedToBot
from membot.bot.texts import COMMANDS
from membot.ids import ConversationId
from membot.memory.base import ChatRepository
from membot.memory.durable import append_lines, replace_atomic

log = logging.getLogger(__name__)

INBOX = "inbox.jsonl"
# Past this size, the next write rewrites the journal with only the updates still pending.
COMPACT_BYTES = 64 * 1024
# How far back a chat's archive is read at first to find a question whose done mark was lost.
DEDUP_WINDOW = 100


class Inbox:
    """The journal of received updates, and which of them are still being handled.

    Lines are updates as Telegram sent them, or `{"done": [update ids]}`. The journal is
    emptied whenever nothing in it is in flight; under steady load, done marks ride with the
    next batch instead (no write or sync of their own): one lost to a crash only means its
    update is checked against its chat's archive at start-up, which the turn reached before
    its answer was sent.
    """

    def __init__(self, data_dir: Path) -> None:
        self.path = Path(data_dir) / INBOX
        self._pending: dict[int, bytes] = {}  # update id -> its journal line
        self._done: list[int] = []  # handled since the last write
        self._io = asyncio.Lock()
        self._size = 0
        self._compact = False  # rewrite at the next write, whatever the size
        self._dir_synced = False  # the journal's directory entry, once per process
        # Updates the crashed run journaled: Telegram may send them again, as duplicates. (By id,
        # not by "up to": after a week without updates Telegram may pick a lower next id.)
        self.journaled_before: frozenset[int] = frozenset()

    # -- the hot path ----------------------------------------------------------------------

    async def record(self, updates: list[Update]) -> None:
        """Journal a batch durably, before the dispatcher (and so the next poll) sees it."""
        fresh = {
            # by_alias and no exclude_defaults: the `type` tags of aiogram's unions (a
            # forward's origin, say) must survive, or the update cannot be read back.
            u.update_id: u.model_dump_json(exclude_none=True, by_alias=True).encode()
            for u in updates
            if u.update_id not in self.journaled_before
        }
        if not fresh:
            return
        async with self._io:
            self._pending.update(fresh)
            batch = b"".join(line + b"\n" for line in fresh.values())
            if self._done:
                batch = json.dumps({"done": self._done}).encode() + b"\n" + batch
                self._done = []
            self._size = await asyncio.to_thread(_append, self.path, batch, not self._dir_synced)
            self._dir_synced = True
            if self._compact or self._size >= COMPACT_BYTES:
                # Only what is still pending survives; everything else was handled. (The
                # batch is already durable above, whatever becomes of this rewrite.)
                keep = b"".join(line + b"\n" for line in self._pending.values())
                self._size = await asyncio.to_thread(_rewrite, self.path, keep)
                self._compact = False

    async def done(self, update_id: int) -> None:
        """An update is handled (answered, refused or ignored): it need not come back.

        When nothing journaled is in flight any more, the journal is emptied at once (after
        the answer was sent): a handled message does not linger on disk, and cannot come
        back after a crash that follows, say, the chat's /reset.
        """
        if self._pending.pop(update_id, None) is None:
            return
        self._done.append(update_id)
        if self._pending:
            return
        async with self._io:
            if not self._pending:
                await asyncio.to_thread(_truncate, self.path)
                self._size = 0
                self._done = []
                self._compact = False

    async def flush(self) -> None:
        """Write the done marks now, durably (before a command, and at shutdown)."""
        async with self._io:
            if self._done:
                line = json.dumps({"done": self._done}).encode() + b"\n"
                self._done = []
                self._size = await asyncio.to_thread(_append, self.path, line)

    # -- start-up ----------------------------------------------------------------------------

    async def unanswered(self, repository: ChatRepository) -> list[dict[str, Any]]:
        """The journaled text messages, not marked done, whose question never reached its
        chat's archive. They count as pending until handled again."""
        records, done, self._size = await asyncio.to_thread(_read, self.path)
        self.journaled_before = frozenset(int(r["update_id"]) for r in records)
        replay: list[dict[str, Any]] = []
        skipped = 0
        for record in records:
            if int(record["update_id"]) in done:
                continue
            message = record.get("message")
            if not isinstance(message, dict) or not _replayable(message.get("text")):
                skipped += 1
                continue
            try:
                Update.model_validate(record)
            except ValidationError:
                log.warning("inbox: skipping update %s: it no longer reads", record["update_id"])
                skipped += 1
                continue
            if await answered(repository, int(message["chat"]["id"]), int(message["message_id"])):
                continue
            replay.append(record)
        self._pending = {int(r["update_id"]): json.dumps(r).encode() for r in replay}
        if replay or skipped:
            log.warning(
                "inbox: %d message(s) received before a crash and never answered are answered "
                "now; %d other update(s) from then are not replayed",
                len(replay),
                skipped,
            )
        # The crashed run's records are all dealt with now: keep only what is pending.
        if replay:
            self._compact = True  # at the next write
        else:
            await asyncio.to_thread(_truncate, self.path)
            self._size = 0
        return replay


class JournalUpdates(BaseRequestMiddleware):
    """Bot API request middleware: every `getUpdates` batch is journaled before it is used.

    Only what would be answered again is kept: text (not commands) from an allowed user,
    and in a group only when addressed to the bot. A refused outsider or group chatter
    leaves no trace on disk, as everywhere else.
    """

    def __init__(self, inbox: Inbox, allowed_user_ids: frozenset[int]) -> None:
        self.inbox = inbox
        self.allowed = allowed_user_ids
        self._addressed = AddressedToBot()

    async def __call__(
        self,
        make_request: NextRequestMiddlewareType[TelegramType],
        bot: Bot,
        method: TelegramMethod[TelegramType],
    ) -> Response[TelegramType]:
        # What comes back is the method's result (a list of updates here), despite the name
        # of the annotation aiogram gives it.
        result: Any = await make_request(bot, method)
        if isinstance(method, GetUpdates) and isinstance(result, list):
            await self.inbox.record([u for u in result if await self.worth_keeping(u, bot)])
        return cast(Response[TelegramType], result)

    async def worth_keeping(self, update: Update, bot: Bot) -> bool:
        message = update.message
        if message is None or not _replayable(message.text):
            return False
        user = message.from_user
        if self.allowed and (user is None or user.id not in self.allowed):
            return False
        return await self._addressed(message, bot)


class InboxMiddleware(BaseMiddleware):
    """Outer update middleware: skips Telegram's redelivery of a journaled update, and marks
    every update done once it has been handled, however that ended."""

    def __init__(self, inbox: Inbox) -> None:
        self.inbox = inbox

    async def __call__(
        self,
        handler: Callable[[TelegramObject, dict[str, Any]], Awaitable[Any]],
        event: TelegramObject,
        data: dict[str, Any],
    ) -> Any:
        if not isinstance(event, Update):
            return await handler(event, data)
        if event.update_id in self.inbox.journaled_before and not data.get("replay"):
            return None  # journaled by the run that crashed: replayed, or judged answered
        message = event.message
        if message is not None and message.text and _is_command(message.text):
            # A command may change what a replay would find (/reset empties the archive the
            # replay checks against): what is done must be on disk before it runs.
            await self.inbox.flush()
        try:
            return await handler(event, data)
        finally:
            await self.inbox.done(event.update_id)


async def answered(repository: ChatRepository, chat_id: int, message_id: int) -> bool:
    """Whether the question with this Telegram message id is in its chat's archive. Message ids
    grow within a chat, so the look-back widens until it reaches an older question (a turn
    with tool rounds is many lines) or the start of the archive."""
    limit = DEDUP_WINDOW
    while True:
        stored = await repository.tail(ConversationId.telegram(chat_id), limit)
        ids = [m.tg_message_id for m in stored if m.role == "user" and m.tg_message_id]
        if message_id in ids:
            return True
        if len(stored) < limit or (ids and min(ids) < message_id):
            return False
        limit *= 4


_COMMANDS = frozenset(f"/{name}" for name, _ in COMMANDS)


def _is_command(text: str) -> bool:
    return text.split(maxsplit=1)[0].split("@", 1)[0].lower() in _COMMANDS if text else False


def _replayable(text: Any) -> bool:
    """Text the model answers, worth answering again. The bot's commands are not (a second
    /reset could wipe what came after the first); "/other text" goes to the model, so it is."""
    return isinstance(text, str) and bool(text.strip()) and not _is_command(text)


# -- file work (worker threads) -------------------------------------------------------------


def _append(path: Path, payload: bytes, sync_dir: bool = False) -> int:
    """Append whole lines durably; the journal's size after it. `sync_dir` also makes the
    file's directory entry durable (the journal is truncated, never deleted: once is enough)."""
    return append_lines(path, payload, sync_dir=sync_dir)


def _truncate(path: Path) -> None:
    # No sync: after a power cut the old, handled lines may come back, and each is checked
    # against its chat's archive at start-up.
    with contextlib.suppress(FileNotFoundError):
        os.truncate(path, 0)


def _rewrite(path: Path, content: bytes) -> int:
    """Replace the journal atomically; its new size. With the directory's fsync: the
    updates still pending must not fall back to an older journal after a power cut."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    replace_atomic(path, content, sync_dir=True)
    return len(content)


def _read(path: Path) -> tuple[list[dict[str, Any]], set[int], int]:
    """The journal's readable updates, the ids marked done, and its size."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return [], set(), 0
    records = []
    seen: set[int] = set()
    done: set[int] = set()
    for line in raw.split(b"\n"):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            if "done" in record:
                done.update(int(i) for i in record["done"])
            elif int(record["update_id"]) not in seen:  # a batch appended twice after an error
                seen.add(int(record["update_id"]))
                records.append(record)
        except (ValueError, KeyError, TypeError, AttributeError):
            log.warning("inbox: skipping a torn or corrupt line")
    return records, done, len(raw)
