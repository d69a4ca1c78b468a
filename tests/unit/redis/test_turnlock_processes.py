"""Ten writers in two real processes on one conversation in Redis: with the cross-process turn
lock, each turn's read-then-append is never interleaved with another's, and nothing is lost.

Each process runs five concurrent "turns" through its own ConversationService (its own
Redis pool and RedisTurnLocks): read the tail, then append a turn that names the seq it
read. If two turns ever overlapped, one would name a seq that is not the one right before
its own first message."""

from __future__ import annotations

import asyncio
import sys
import textwrap

from membot.ids import ConversationId
from membot.memory.redis import RedisRepository
from membot.redis.client import create_client
from tests.unit.conftest import REDIS_URL

CID = ConversationId.telegram(777)

WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from membot.core.service import ConversationService
    from membot.redis.turnlock import RedisTurnLocks
    from membot.ids import ConversationId
    from membot.memory.contract.models import Message
    from membot.memory.redis import RedisRepository
    from membot.redis.client import create_client

    async def main(url, prefix, name):
        repo = RedisRepository(create_client(url), prefix=prefix)
        service = ConversationService(
            None, repo, consult_rounds=3, max_rounds=10,
            turn_locks=RedisTurnLocks(repo.client, prefix, timeout=10.0, poll=0.005),
        )
        cid = ConversationId.telegram(777)

        async def turn(n):
            async with service.ordered(cid):
                tail = await repo.tail(cid, 1)
                seen = tail[-1].seq if tail else 0
                await asyncio.sleep(0)  # a turn awaits the model here
                await repo.append(cid, [
                    Message(role="user", content=f"{name}-{n} saw {seen}"),
                    Message(role="assistant", content=f"{name}-{n} done"),
                ])

        await asyncio.gather(*(turn(n) for n in range(5)))
        await repo.close()

    asyncio.run(main(*sys.argv[1:]))
    """
)


async def test_ten_writers_in_two_processes_never_interleave(prefix: str) -> None:
    procs = [
        await asyncio.create_subprocess_exec(sys.executable, "-c", WRITER, REDIS_URL, prefix, name)
        for name in ("a", "b")
    ]
    assert [await proc.wait() for proc in procs] == [0, 0]
    repo = RedisRepository(create_client(REDIS_URL), prefix=prefix)
    try:
        messages = [m async for m in repo.iter_messages(CID)]
    finally:
        await repo.close()
    assert [m.seq for m in messages] == list(range(1, 21))
    users = messages[0::2]
    answers = messages[1::2]
    # Every turn is two contiguous lines, and read the state the previous turn left.
    for user, answer in zip(users, answers, strict=True):
        writer = user.content.split()[0]
        assert answer.content == f"{writer} done"
        assert user.content == f"{writer} saw {user.seq - 1}"
    assert sorted(u.content.split()[0] for u in users) == sorted(
        f"{p}-{n}" for p in "ab" for n in range(5)
    )
