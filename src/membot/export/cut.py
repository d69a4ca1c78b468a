"""What an export holds, read at one moment: the cut.

The archive is append-only, so "every message up to seq N" is fixed once N is read: the cut
reads the last seq, the summary, the facts and the chat's tasks (quick reads, done while
the caller may hold the chat's turn), and the export then streams the messages up to that
seq and the files they refer to, however long that takes, beside the chat's next turns.
A message a later turn appends is not in it. A /forget meanwhile makes the cut stale: the
export is stopped and taken again (export/watch.py)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from membot.clock import Clock, utc_now
from membot.export.watch import label_of
from membot.ids import TELEGRAM, ConversationId
from membot.memory.contract.repository import ChatRepository, StorageUnavailable
from membot.schedule.models import Task
from membot.schedule.show import chat_zone
from membot.schedule.store import TaskStore


@dataclass(frozen=True, slots=True)
class Cut:
    cid: ConversationId
    upto: int  # the last seq exported
    summary: str
    summarized_upto: int
    facts: tuple[str, ...]
    tasks: tuple[Task, ...]
    zone: ZoneInfo  # the chat's: the transcript's times are on its wall clock
    taken: datetime
    # Files the conversation keeps that no message refers to (an API session's system prompt).
    extra_files: tuple[str, ...] = ()
    # The conversation's life when the cut was taken: a /forget (or /reset) gives a new one,
    # and an export of the old is not sent (export/watch.py).
    generation: str = ""

    @property
    def label(self) -> str:
        """The conversation as a file name has it: `tg-123`, `api-<uuid>`."""
        return label_of(self.cid)


async def take_cut(
    repository: ChatRepository,
    task_store: TaskStore | None,
    cid: ConversationId,
    default_zone: str,
    clock: Clock = utc_now,
) -> Cut:
    """The cut of `cid` now. StorageUnavailable when the storage answers with a stand-in
    (Redis down): an export of that would say the chat is empty."""
    meta = await repository.get_meta(cid)
    if meta.degraded:
        raise StorageUnavailable(f"{cid}: the conversation cannot be read now")
    summary = await repository.get_summary(cid)
    facts = await repository.get_facts(cid)
    tasks: list[Task] = []
    if task_store is not None and cid.namespace == TELEGRAM:
        tasks = await task_store.tasks(cid.chat_id)
    session = meta.state.session
    extra = (session.system_prompt_file,) if session and session.system_prompt_file else ()
    return Cut(
        cid=cid,
        upto=meta.messages_total,
        summary=summary,
        summarized_upto=min(meta.summarized_upto, meta.messages_total) if summary else 0,
        facts=tuple(facts),
        tasks=tuple(tasks),
        zone=chat_zone(meta.state.timezone, default_zone),
        taken=clock(),
        extra_files=extra,
        generation=meta.generation,
    )
