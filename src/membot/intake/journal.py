"""The file journal (QUEUE=local): an update is on disk before Telegram is told it was received.

With long polling, asking for the next batch (`getUpdates` with a higher offset) confirms
the previous one. A crash before its updates are answered would lose every message received
but not yet answered: Telegram never sends them again.

So every batch is appended to `DATA_DIR/inbox.jsonl` and fdatasync'd (one sync per batch, in
the journal's own worker thread) by `put`, before the source asks for more and before the
runner takes it. That one thread does all of the journal's file work in the order it was
asked for, so emptying the journal need not be waited for: a later write runs after it.
At start-up, the journal is read back: a message (text, a voice, an audio file, a video
note, a photo, a document; an album's parts as one, answered when any of them is) whose
question is not in its chat's archive was never answered, and is handled again, before
anything new. A due task (an update from the clock, intake/due.py) is journaled and
replayed like a message. Commands are not replayed (a second `/reset` could wipe what came
after the first); Telegram's redelivery of an update already journaled is dropped at `put`. Only
updates that would be answered again are journaled (`keep`), and the journal is emptied
whenever nothing in it is being handled: a message stays there about as long as it is in
flight.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from membot.intake import journal_files as files
from membot.intake.albums import RecentAlbums, album_key
from membot.intake.contract import Entry, IntakeUnavailable, entry_of, has_media, text_of
from membot.intake.controls import LocalControls
from membot.intake.repeats import unanswered_of
from membot.memory.contract.repository import ChatRepository
from membot.schedule.models import firing_of

log = logging.getLogger(__name__)

INBOX = "inbox.jsonl"
# Past this size, the next write rewrites the journal with only the updates still pending.
COMPACT_BYTES = 64 * 1024

Update = Mapping[str, Any]  # as Telegram sent it


class Journal:
    """The journal of received updates, which of them are still being handled, and the
    updates put but not taken yet.

    Lines are updates as Telegram sent them, or `{"done": [update ids]}`. The journal is
    emptied whenever nothing in it is in flight; under steady load, done marks ride with the
    next batch instead (no write or sync of their own): one lost to a crash only means its
    update is checked against its chat's archive at start-up, which the turn reached before
    its answer was sent.

    `commands` are the bot's commands ("/reset"): never journaled nor replayed, and the done
    marks are made durable before one runs. `keep` says which other updates are worth
    keeping (text or media from an allowed user, addressed to the bot; an album's later
    parts, which carry no caption, are kept with its first); `readable` whether a record
    of a crashed run can still be read.
    """

    leaves_pending = False  # what was put is all answered before the runner stops
    retries = False  # a failed update got its apology: it is done

    def __init__(
        self,
        data_dir: Path,
        *,
        commands: frozenset[str] = frozenset(),
        keep: Callable[[Update], Awaitable[bool]] | None = None,
        readable: Callable[[Update], bool] | None = None,
        repository: ChatRepository | None = None,
    ) -> None:
        self.path = Path(data_dir) / INBOX
        self.commands = commands
        self._keep = keep
        self._readable = readable
        self._repository = repository  # what a replay is checked against at start-up
        self._pending: dict[int, bytes] = {}  # update id -> its journal line
        self._done: list[int] = []  # handled since the last write
        self._file = files.Worker()  # in the order asked for: no lock
        self._journal = files.JournalFile(self.path)  # the worker's thread's alone
        self._size = 0
        self._compact = False  # rewrite at the next write, whatever the size
        self._dir_synced = False  # the journal's directory entry, once per process
        # Updates the crashed run journaled: Telegram may send them again, as duplicates. (By id,
        # not by "up to": after a week without updates Telegram may pick a lower next id.)
        self.journaled_before: frozenset[int] = frozenset()
        self._ready: deque[Entry] = deque()
        self._arrived = asyncio.Event()
        self._controls = LocalControls()
        self._commands_in_flight: set[int] = set()
        self._albums = RecentAlbums()

    # -- the contract ----------------------------------------------------------------------

    async def start(self) -> None:
        """What a crashed run received and never answered is taken first."""
        if self._repository is not None:
            await self.replay(self._repository)

    async def stop(self) -> None:
        return None

    async def close(self) -> None:
        try:
            await self.flush()
        finally:
            self._file.close(self._journal)

    def let_go(self, entry: Entry) -> None:
        return None

    async def put(self, batch: Sequence[Update]) -> None:
        """Journal what is worth keeping durably, then hand the batch to `take` (control
        updates to `control`, never journaled)."""
        # A due task's firing is the clock's, not Telegram's: put again while still due (its
        # turn failed), it is taken, and its turn checks whether it ran (core/timed.py).
        fresh = self._controls.split(
            u
            for u in batch
            if int(u["update_id"]) not in self.journaled_before or firing_of(u) is not None
        )
        lines: dict[int, bytes] = {}
        for update in fresh:
            text = text_of(update)
            message = update.get("message")
            if firing_of(update) is not None:  # a due task: kept like a message until done
                lines[int(update["update_id"])] = json.dumps(update).encode()
            elif text is not None and self.is_command(text):
                self._commands_in_flight.add(int(update["update_id"]))
            elif (
                isinstance(message, dict)
                and self.answerable(message)
                and await self._kept(update, message)
            ):
                lines[int(update["update_id"])] = json.dumps(update).encode()
        try:
            await self.record(lines)
        except OSError as exc:
            raise IntakeUnavailable(f"journal: {exc.strerror or exc}") from None
        for update in fresh:
            update_id = int(update["update_id"])
            line = lines.get(update_id)
            data = line.decode() if line is not None else json.dumps(update)
            self._ready.append(entry_of(update, data))
        if fresh:
            self._arrived.set()

    async def take(self, room: int) -> list[Entry]:
        while not self._ready:
            self._arrived.clear()
            await self._arrived.wait()
        return [self._ready.popleft() for _ in range(min(room, len(self._ready)))]

    async def control(self) -> list[Entry]:
        return await self._controls.next()

    def rest(self) -> list[Entry]:
        rest = list(self._ready)
        self._ready.clear()
        return rest

    def keeps(self, entry: Entry) -> bool:
        return True

    # Never retried (the handler apologised, the journal forgets it): no outage to tell of.
    def outage(self, exc: BaseException) -> None: ...
    def up(self) -> None: ...

    async def fence(self, entry: Entry) -> bool:
        """A command may change what a replay would find (/reset empties the archive the
        replay checks against): what is done must be on disk before it runs."""
        if entry.update_id in self._commands_in_flight:
            self._commands_in_flight.discard(entry.update_id)
            await self.flush()
        return False

    async def done(self, entry: Entry) -> None:
        """An update is handled (answered, refused or ignored): it need not come back.

        When nothing journaled is in flight any more, the journal is emptied at once (after
        the answer was sent): a handled message does not linger on disk, and cannot come
        back after a crash that follows, say, the chat's /reset. Not waited for: the worker
        empties it before any later write (a batch put meanwhile lands after it), and the
        chat's next update need not wait for it.
        """
        self._commands_in_flight.discard(entry.update_id)
        if self._pending.pop(entry.update_id, None) is None:
            return
        self._done.append(entry.update_id)
        if self._pending:
            return
        self._size = 0
        self._done = []
        self._compact = False
        self._file.empty(self._journal)

    # -- the file ---------------------------------------------------------------------------

    async def record(self, lines: Mapping[int, bytes]) -> None:
        """Journal these lines (update id -> its JSON) durably."""
        if not lines:
            return
        self._pending.update(lines)
        batch = b"".join(line + b"\n" for line in lines.values())
        if self._done:
            batch = json.dumps({"done": self._done}).encode() + b"\n" + batch
            self._done = []
        # Past COMPACT_BYTES only what is still pending survives, rewritten after the append
        # (the batch is durable first, whatever becomes of the rewrite).
        compact = self._compact or self._size + len(batch) >= COMPACT_BYTES
        keep = list(self._pending.values()) if compact else None
        at = 0 if self._compact else COMPACT_BYTES
        self._compact = False
        self._size = await self._file.run(
            self._journal.append, batch, not self._dir_synced, keep, at
        )
        self._dir_synced = True

    async def flush(self) -> None:
        """Write the done marks now, durably (before a command, and at shutdown); or, with
        none to write, wait for the file work asked for before (an emptying)."""
        if self._done:
            line = json.dumps({"done": self._done}).encode() + b"\n"
            self._done = []
            self._size = await self._file.run(self._journal.append, line)
        else:
            await self._file.settled()

    # -- start-up ----------------------------------------------------------------------------

    async def replay(self, repository: ChatRepository) -> int:
        """Read back what a crashed run left unanswered: it is taken first. How many."""
        records = await self.unanswered(repository)
        self._ready.extendleft(reversed([entry_of(r, json.dumps(r)) for r in records]))
        if records:
            self._arrived.set()
        return len(records)

    async def unanswered(self, repository: ChatRepository) -> list[dict[str, Any]]:
        """The journaled messages, not marked done, whose question never reached its
        chat's archive. They count as pending until handled again."""
        records, done, self._size = await self._file.run(self._journal.read)
        self.journaled_before = frozenset(int(r["update_id"]) for r in records)
        replay, skipped = await unanswered_of(
            [r for r in records if int(r["update_id"]) not in done],
            repository,
            answerable=self.answerable,
            readable=self._readable,
        )
        self._pending = {int(r["update_id"]): json.dumps(r).encode() for r in replay}
        if replay or skipped:
            log.warning(
                "journal: %d message(s) received before a crash or a hurried stop and never "
                "answered are answered now; %d other update(s) from then are not replayed",
                len(replay),
                skipped,
            )
        # The crashed run's records are all dealt with now: keep only what is pending.
        if replay:
            self._compact = True  # at the next write
        else:
            await self._file.run(self._journal.truncate)
            self._size = 0
        return replay

    def is_command(self, text: str) -> bool:
        return (
            text.split(maxsplit=1)[0].split("@", 1)[0].lower() in self.commands if text else False
        )

    def answerable(self, message: Any) -> bool:
        """A message the bot answers: text (not a command) or a file it reads."""
        return isinstance(message, dict) and (
            self.replayable(message.get("text")) or has_media(message)
        )

    async def _kept(self, update: Update, message: Mapping[str, Any]) -> bool:
        """Worth keeping (`keep`); an album's later parts go with its first."""
        album = album_key(message)
        if album is not None and album in self._albums:
            return True
        if self._keep is not None and not await self._keep(update):
            return False
        if album is not None:
            self._albums.add(album)
        return True

    def replayable(self, text: Any) -> bool:
        """Text the model answers, worth answering again. The bot's commands are not (a second
        /reset could wipe what came after the first); "/other text" goes to the model."""
        return isinstance(text, str) and bool(text.strip()) and not self.is_command(text)
