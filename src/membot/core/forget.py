"""Forgetting messages for good (/forget, and the model's forget_messages on the user's
request): find every message holding the words, let the one who asked confirm, then have the
repository forget them (memory/contract/repository.py `forget`) and the search index built
again from what remains.

Finding is the chat's own search, without its limit: a message matches when it holds every
word of the request (stems, as the search index compares them; stopwords dropped) or the
request's words as written. What is looked at is everything the archive keeps of a message:
its text, its sources and its citations' quotes, the arguments of its tool calls (a
`remember` or a search that quoted the words), the names and text of the documents it
brought. A tool call that matches takes
its results with it. The facts and the current summary are looked in too (a summary may be
all that is left of words REDIS_MAX_MESSAGES trimmed away): a summary saying them is made
again from what is left. So are the chat's reminders and scheduled tasks (their text, in the
user's words): a task holding the words is listed, and cancelled on confirming. In a group a
member finds only their own messages, the bot's turns answering them and the tasks they set
(`member`); an administrator finds everyone's.

A request waits for its confirmation here, in this process's memory only (no file, no key:
it holds the words), for `PENDING_TTL`; confirming looks again, so what was said about the
words since (the request to the model itself, its answer) goes too. Confirming also stops
the conversation's exports in progress and deletes its files in DATA_DIR/.exports
(export/watch.py).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from membot.core.forget_words import Words, enough, text_of
from membot.core.turn import Incoming
from membot.export.watch import ExportWatch
from membot.ids import TELEGRAM, ConversationId
from membot.memory.contract.models import Message
from membot.memory.contract.repository import ChatRepository
from membot.schedule.models import Task
from membot.schedule.store import TaskStore
from membot.search import HistorySearch
from membot.tasks import TaskSupervisor

log = logging.getLogger(__name__)

PENDING_TTL = 600.0  # seconds a request waits for its confirmation
MAX_PENDING = 1000
_BATCH = 1000  # messages matched per worker-thread hop


@dataclass(frozen=True, slots=True)
class Found:
    """What a request would forget: every message's seq, the ones to show (the user's and
    the bot's words; tool plumbing is only counted), and the facts holding the words."""

    seqs: tuple[int, ...] = ()
    shown: tuple[Message, ...] = ()
    facts: tuple[str, ...] = ()
    # The current summary says the words (its messages may be trimmed away: Redis).
    summary: bool = False
    # The chat's reminders and scheduled tasks whose text holds the words.
    tasks: tuple[Task, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.seqs and not self.facts and not self.summary and not self.tasks


@dataclass(frozen=True, slots=True)
class Forgotten:
    """What a confirmed request erased."""

    messages: int
    facts: int
    summary: bool = False  # a summary said the words: it and the later ones are made again
    tasks: int = 0  # scheduled tasks cancelled


@dataclass(frozen=True, slots=True)
class Request:
    """A request waiting for its confirmation: only `user_id` may confirm it."""

    token: str
    cid: ConversationId
    words: str
    user_id: int | None
    member: bool  # limited to the asker's own messages
    found: Found
    at: float
    by_model: bool = False  # asked through the model's tool: the door still has to show it
    # Where the door showed the list apart from its buttons (chat, message id), to take back.
    shown: tuple[tuple[int, int], ...] = ()


@dataclass
class Forgetting:
    """Finds, holds and carries out requests to forget (one per agent)."""

    repository: ChatRepository
    search: HistorySearch | None
    tasks: TaskSupervisor
    clock: Callable[[], float] = time.monotonic
    # This process's exports in progress and DATA_DIR/.exports: none, in a core without them.
    exports: ExportWatch | None = None
    # The chats' reminders and scheduled tasks (a Telegram chat's): none, without TASKS' store.
    task_store: TaskStore | None = None
    _pending: OrderedDict[str, Request] = field(default_factory=OrderedDict)

    async def find(self, cid: ConversationId, words: str, member: int | None = None) -> Found:
        """Every message (of `member` and the bot's turns answering them, when given) and
        fact holding `words`."""
        wanted = Words(words)
        if not enough(words):  # the doors refuse them first; nothing is ever found by them
            return Found()
        seqs: list[int] = []
        shown: list[Message] = []
        batch: list[tuple[Message, list[bytes]]] = []
        owner: int | None = None
        calls: set[str] = set()  # the ids of matched tool calls: their results go too

        async def match() -> None:
            # Off the loop: a document's text is decoded and every text matched there.
            hits = await asyncio.to_thread(
                lambda: [wanted.held_by(text_of(m, d)) for m, d in batch]
            )
            for (message, _), hit in zip(batch, hits, strict=True):
                if hit or (message.role == "tool" and message.tool_call_id in calls):
                    seqs.append(message.seq)
                    calls.update(str(c.get("id", "")) for c in message.tool_calls)
                    if message.role != "tool" and (message.content or message.attachments):
                        shown.append(message)
            batch.clear()

        async for message in self.repository.iter_messages(cid):
            if message.role == "user":
                owner = message.user_id
            if message.forgotten or (member is not None and owner != member):
                continue
            batch.append((message, await self._documents(cid, message)))
            if len(batch) >= _BATCH and message.role != "tool":
                await match()
        await match()
        facts = [f for f in await self.repository.get_facts(cid) if wanted.held_by(f)]
        summary = await self.repository.get_summary(cid)
        said = bool(summary) and await asyncio.to_thread(wanted.held_by, summary)
        return Found(
            tuple(seqs), tuple(shown), tuple(facts), said, await self._tasks(cid, wanted, member)
        )

    async def _tasks(
        self, cid: ConversationId, wanted: Words, member: int | None
    ) -> tuple[Task, ...]:
        """The chat's tasks whose text holds the words (a member's: the ones they set)."""
        if self.task_store is None or cid.namespace != TELEGRAM:
            return ()
        tasks = await self.task_store.tasks(cid.chat_id)
        return tuple(
            t for t in tasks if (member is None or t.author == member) and wanted.held_by(t.text)
        )

    async def _documents(self, cid: ConversationId, message: Message) -> list[bytes]:
        found = []
        for attachment in message.attachments:
            if attachment.kind == "document" and attachment.file:
                data = await self.repository.get_file(cid, attachment.file)
                if data is not None:
                    found.append(data)
        return found

    def ask(
        self,
        cid: ConversationId,
        words: str,
        found: Found,
        user_id: int | None,
        *,
        member: bool = False,
        by_model: bool = False,
    ) -> Request:
        """Keep a request until it is confirmed, dropped or too old."""
        self._expire()
        request = Request(
            uuid.uuid4().hex[:16], cid, words, user_id, member, found, self.clock(), by_model
        )
        self._pending[request.token] = request
        while len(self._pending) > MAX_PENDING:
            self._pending.popitem(last=False)
        return request

    def pending(self, token: str) -> Request | None:
        self._expire()
        return self._pending.get(token)

    def shown_at(self, token: str, places: Sequence[tuple[int, int]]) -> None:
        """The list of a request was shown there too (a private chat, for a group's)."""
        request = self._pending.get(token)
        if request is not None:
            self._pending[token] = replace(request, shown=tuple(places))

    def drop(self, token: str) -> None:
        self._pending.pop(token, None)

    def asked_by_model(self, cid: ConversationId) -> Request | None:
        """The request the model's tool made in this chat's turn, for the door to show
        (once: it is marked shown)."""
        for token, request in reversed(self._pending.items()):
            if request.cid == cid and request.by_model:
                self._pending[token] = replace(request, by_model=False)
                return request
        return None

    def _expire(self) -> None:
        old = self.clock() - PENDING_TTL
        for token in [t for t, r in self._pending.items() if r.at < old]:
            del self._pending[token]

    async def confirm(self, request: Request) -> Forgotten:
        """Forget what the request holds now (looked for again); the caller holds the
        conversation's turn. What was forgotten."""
        self.drop(request.token)
        cid = request.cid
        found = await self.find(cid, request.words, request.user_id if request.member else None)
        # A summary being made now read what goes: stopped (the new generation drops it too).
        await self.tasks.cancel(("summary", cid))
        # Any summary saying the words goes, with the later ones: made again from what is left.
        wanted = Words(request.words)
        count = await self.repository.forget(cid, found.seqs, found.facts, wanted.held_by)
        cancelled = 0
        if self.task_store is not None:
            # Cancelled: removed from the store, their text with them (tasks.json, the hash).
            for task in found.tasks:
                cancelled += await self.task_store.remove(task.chat, task.id) is not None
        if self.search is not None:
            await self.search.rebuild(cid)
        if self.exports is not None:
            # An export being made read what went: stopped (and made again), its files and
            # any a killed process left deleted.
            await self.exports.forgotten(cid)
        log.info(
            "%s: forgot %d message(s), %d fact(s), %d task(s)%s",
            cid,
            count,
            len(found.facts),
            cancelled,
            ", and the summary" if found.summary else "",
        )
        return Forgotten(count, len(found.facts), found.summary, cancelled)

    def desk(self, incoming: Incoming) -> ForgetDesk | None:
        """The model's way to ask for a turn: only in a Telegram chat's own turn (the
        button to confirm with is shown after it: not after a guest query's answer, posted
        elsewhere, nor a due task's), and in a group only for the asker's own messages
        (administrators use /forget for everyone's)."""
        cid = incoming.conversation
        if cid.namespace != TELEGRAM or incoming.user_id is None or incoming.aside:
            return None
        return ForgetDesk(self, cid, incoming.user_id, member=incoming.group)


@dataclass(frozen=True, slots=True)
class ForgetDesk:
    """forget_messages' side of one turn: the chat, who asks, and whether only their own."""

    forgetting: Forgetting
    cid: ConversationId
    user_id: int
    member: bool

    async def request(self, words: str) -> Found:
        """What `words` would forget; when anything, a request the door shows to confirm."""
        found = await self.forgetting.find(self.cid, words, self.user_id if self.member else None)
        if not found.empty:
            self.forgetting.ask(
                self.cid, words, found, self.user_id, member=self.member, by_model=True
            )
        return found
