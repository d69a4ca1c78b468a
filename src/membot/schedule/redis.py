"""Tasks in Redis (`STORAGE=redis`): every process sees every task; each change is one step.

Keys, under REDIS_PREFIX (default `membot:`):
    {prefix}tasks:due          ZSET  member "<chat>:<id>", score = when to look at the task
                               next (epoch ms): its due time, later while a firing is held
    {prefix}task:<chat>:<id>   HASH  the task (Task.to_dict, one field each)
    {prefix}tasks:<chat>       SET   the chat's task ids

A task is in all three or in none: `add` (the count and the write), `advance` (comparing the
stored due time, then moving or removing), `remove` and `clear` are each one Lua script,
atomic for all the server's clients. `hold` moves only a later score onto a task still
at the time held (ZADD XX GT, in a script comparing the due time). Chat ids are ints and
task ids our own (schedule/models.py), so a key is never made from what a user typed.
redis-py's errors are StorageUnavailable to callers (membot/redis/errors.py).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import cast

from redis.asyncio import Redis
from redis.typing import EncodableT

from membot.clock import iso
from membot.redis.errors import call, unavailable
from membot.schedule.models import Task

log = logging.getLogger(__name__)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
PAGE = 500  # tasks per pipeline of put_all, members per ZSCAN of chats

# KEYS: the due set, the task's hash, the chat's set. ARGV: the member, the id, the chat's
# limit (negative: none), the score, then the hash's fields and values.
ADD = """
if tonumber(ARGV[3]) >= 0 and redis.call('SCARD', KEYS[3]) >= tonumber(ARGV[3]) then
  return 0
end
redis.call('DEL', KEYS[2])
redis.call('HSET', KEYS[2], unpack(ARGV, 5))
redis.call('SADD', KEYS[3], ARGV[2])
redis.call('ZADD', KEYS[1], ARGV[4], ARGV[1])
return 1
"""

# KEYS as ADD's. ARGV: the member, the id, the due time it must be at, the next one ('': the
# task ends) and its score.
ADVANCE = """
if redis.call('HGET', KEYS[2], 'due') ~= ARGV[3] then
  return 0
end
if ARGV[4] == '' then
  redis.call('DEL', KEYS[2])
  redis.call('SREM', KEYS[3], ARGV[2])
  redis.call('ZREM', KEYS[1], ARGV[1])
else
  redis.call('HSET', KEYS[2], 'due', ARGV[4])
  redis.call('ZADD', KEYS[1], ARGV[5], ARGV[1])
end
return 1
"""

# KEYS as ADD's. ARGV: the member, the id. Returns the task's fields (none: it was not there).
REMOVE = """
local fields = redis.call('HGETALL', KEYS[2])
if #fields > 0 then
  redis.call('DEL', KEYS[2])
  redis.call('SREM', KEYS[3], ARGV[2])
  redis.call('ZREM', KEYS[1], ARGV[1])
end
return fields
"""

# KEYS: the due set, the task's hash. ARGV: the member, the due time it must be at, the
# hold's end (a score): only a later score, and only while the task is at that time.
HOLD = """
if redis.call('HGET', KEYS[2], 'due') ~= ARGV[2] then
  return 0
end
return redis.call('ZADD', KEYS[1], 'XX', 'GT', ARGV[3], ARGV[1])
"""

# KEYS: the due set, the chat's set. ARGV: its tasks' key before the id, its members' before
# the id. Returns how many tasks were dropped.
CLEAR = """
local ids = redis.call('SMEMBERS', KEYS[2])
for _, id in ipairs(ids) do
  redis.call('DEL', ARGV[1] .. id)
  redis.call('ZREM', KEYS[1], ARGV[2] .. id)
end
redis.call('DEL', KEYS[2])
return #ids
"""


def score(at: datetime) -> int:
    """A time as the due set's score: epoch milliseconds (exact in a double)."""
    return (at - _EPOCH) // timedelta(milliseconds=1)


def _time(ms: float) -> datetime:
    return _EPOCH + timedelta(milliseconds=int(ms))


class RedisTaskStore:
    """TaskStore in Redis. Safe for any number of processes sharing one server."""

    def __init__(self, client: Redis, prefix: str = "membot:") -> None:
        self.client = client
        self.prefix = prefix
        self.due_key = f"{prefix}tasks:due"
        self._add = client.register_script(ADD)
        self._advance = client.register_script(ADVANCE)
        self._remove = client.register_script(REMOVE)
        self._clear = client.register_script(CLEAR)
        self._hold = client.register_script(HOLD)

    def task_key(self, chat: int, task_id: str) -> str:
        return f"{self.prefix}task:{int(chat)}:{task_id}"

    def chat_key(self, chat: int) -> str:
        return f"{self.prefix}tasks:{int(chat)}"

    def _keys(self, chat: int, task_id: str) -> list[str]:
        return [self.due_key, self.task_key(chat, task_id), self.chat_key(chat)]

    def _put_args(self, task: Task, limit: int) -> list[EncodableT]:
        fields = [part for item in task.to_dict().items() for part in item]
        return [f"{task.chat}:{task.id}", task.id, limit, score(task.due), *fields]

    async def start(self) -> None:
        return None

    async def add(self, task: Task, limit: int) -> bool:
        keys, args = self._keys(task.chat, task.id), self._put_args(task, limit)
        return bool(await call(self._add(keys=keys, args=args), "tasks"))

    async def get(self, chat: int, task_id: str) -> Task | None:
        fields = await call(self.client.hgetall(self.task_key(chat, task_id)), "tasks")
        return _task(chat, cast(dict[str, str], fields))

    async def tasks(self, chat: int) -> list[Task]:
        ids = cast(set[str], await call(self.client.smembers(self.chat_key(chat)), "tasks"))
        tasks, _ = await self._read([(chat, task_id) for task_id in sorted(ids)])
        return tasks

    async def _read(self, which: list[tuple[int, str]]) -> tuple[list[Task], list[str]]:
        """The tasks, soonest first, and the members of those gone (removed meanwhile, or
        their hash lost alone: evicted, deleted by hand) or that do not read."""
        if not which:
            return [], []
        async with self.client.pipeline(transaction=False) as pipe:
            for chat, task_id in which:
                pipe.hgetall(self.task_key(chat, task_id))
            found = cast(list[dict[str, str]], await call(pipe.execute(), "tasks"))
        tasks: list[Task] = []
        broken: list[str] = []
        for (chat, task_id), fields in zip(which, found, strict=True):
            task = _task(chat, fields)
            if task is not None:
                tasks.append(task)
            else:
                broken.append(f"{chat}:{task_id}")
        return sorted(tasks, key=lambda t: (t.due, t.id)), broken

    async def remove(self, chat: int, task_id: str) -> Task | None:
        keys = self._keys(chat, task_id)
        flat = await call(self._remove(keys=keys, args=[f"{chat}:{task_id}", task_id]), "tasks")
        return _task(chat, dict(zip(flat[::2], flat[1::2], strict=True)))

    async def advance(
        self, chat: int, task_id: str, due: datetime, next_due: datetime | None
    ) -> bool:
        following: tuple[str, int] = (
            ("", 0) if next_due is None else (iso(next_due), score(next_due))
        )
        args: list[EncodableT] = [f"{chat}:{task_id}", task_id, iso(due), *following]
        return bool(await call(self._advance(keys=self._keys(chat, task_id), args=args), "tasks"))

    async def clear(self, chat: int) -> int:
        keys = [self.due_key, self.chat_key(chat)]
        args = [self.task_key(chat, ""), f"{int(chat)}:"]
        return int(await call(self._clear(keys=keys, args=args), "tasks"))

    async def due(self, now: datetime, limit: int) -> list[Task]:
        members = await call(
            self.client.zrangebyscore(self.due_key, "-inf", score(now), start=0, num=limit),
            "tasks",
        )
        which = [_member(m) for m in cast(list[str], members)]
        tasks, broken = await self._read([w for w in which if w is not None])
        if broken:
            # Out of the due set, or it would be due forever (a hash that does not read stays,
            # to be looked at; one removed meanwhile took its member with it).
            await call(self.client.zrem(self.due_key, *broken), "tasks")
        return tasks

    async def hold(self, task: Task, until: datetime) -> None:
        keys = [self.due_key, self.task_key(task.chat, task.id)]
        args: list[EncodableT] = [f"{task.chat}:{task.id}", iso(task.due), score(until)]
        await call(self._hold(keys=keys, args=args), "tasks")

    async def hold_all(self, tasks: Sequence[Task], until: datetime) -> None:
        """One round trip: the scripts in a pipeline."""
        if not tasks:
            return
        pipe = self.client.pipeline(transaction=False)
        for task in tasks:
            keys = [self.due_key, self.task_key(task.chat, task.id)]
            args: list[EncodableT] = [f"{task.chat}:{task.id}", iso(task.due), score(until)]
            await self._hold(keys=keys, args=args, client=pipe)
        await call(pipe.execute(), "tasks")

    async def next_time(self) -> datetime | None:
        first = await call(self.client.zrange(self.due_key, 0, 0, withscores=True), "tasks")
        found = cast(list[tuple[str, float]], first)
        return _time(found[0][1]) if found else None

    async def chats(self) -> list[int]:
        found: set[int] = set()
        with unavailable("tasks"):
            async for member, _ in self.client.zscan_iter(self.due_key, count=PAGE):
                which = _member(cast(str, member))
                if which is not None:
                    found.add(which[0])
        return sorted(found)

    async def put_all(self, tasks: Sequence[Task]) -> None:
        for start in range(0, len(tasks), PAGE):
            async with self.client.pipeline(transaction=False) as pipe:
                for task in tasks[start : start + PAGE]:
                    keys, args = self._keys(task.chat, task.id), self._put_args(task, -1)
                    await self._add(keys=keys, args=args, client=pipe)
                await call(pipe.execute(), "tasks")

    async def close(self) -> None:
        return None  # the client is the process's: its owner closes it


def _member(member: str) -> tuple[int, str] | None:
    chat, _, task_id = member.partition(":")
    try:
        return int(chat), task_id
    except ValueError:
        return None


def _task(chat: int, fields: dict[str, str]) -> Task | None:
    if not fields:
        return None
    try:
        return Task.from_dict(fields)
    except (ValueError, KeyError, TypeError):
        log.warning("chat %s: a task in Redis does not read; it is not fired", chat)
        return None
