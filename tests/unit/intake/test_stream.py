"""The Redis stream intake on the real Redis: the stream and its marks, the shard assignment,
and workers (the runner taking from the stream) sharing shards, taking over a dead one's
updates, and trying a failed update again.

The handler here records what it was given; tests/e2e/test_stream_intake.py and test_scaleout.py run
the real bot."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime

import pytest
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError

from membot.core.service import ConversationService
from membot.errors import StorageUnavailable
from membot.ids import ConversationId
from membot.intake.contract import Entry, chat_of
from membot.intake.redis import StreamIntake
from membot.intake.runner import Runner, Turns
from membot.intake.shards import ShardLeases, assign
from membot.intake.stream import QueueMismatch, UpdateStream
from membot.memory.inmemory import MemoryRepository
from membot.redis.client import create_client
from membot.schedule.models import Task
from tests.redis_proxy import CuttingProxy
from tests.unit.conftest import REDIS_URL

SHARDS = 4
CLAIM_IDLE = 0.5


def text_update(update_id: int, chat: int, text: str = "hi") -> dict[str, object]:
    message = {"message_id": update_id, "date": 0, "chat": {"id": chat, "type": "private"}}
    return {"update_id": update_id, "message": {**message, "text": text}}


@pytest.fixture
async def client() -> AsyncIterator[Redis]:
    made = create_client(REDIS_URL, socket_timeout=5.0)
    yield made
    await made.aclose()


class Recorder:
    """A handler: records (worker, update) and wakes waiters; `hold` makes it wait."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, Entry]] = []
        self.changed = asyncio.Event()
        self.hold: asyncio.Event | None = None
        self.fail: dict[int, int] = {}  # update id -> failures left
        self.albums: list[list[int]] = []  # the update ids of each call (an album: its parts)

    def handler(self, name: str) -> Callable[..., Awaitable[None]]:
        async def handle(entry: Entry, *parts: Entry) -> None:
            if self.fail.get(entry.update_id, 0) > 0:
                self.fail[entry.update_id] -= 1
                # What the turn raises when Redis goes away (membot/redis/errors.py).
                raise StorageUnavailable("storage: Redis did not answer") from (
                    RedisConnectionError("Redis went away")
                )
            self.seen.append((name, entry))
            self.albums.append([entry.update_id, *(p.update_id for p in parts)])
            self.changed.set()
            if self.hold is not None:
                await self.hold.wait()

        return handle

    async def wait_for(self, count: int, timeout: float = 10.0) -> None:
        async with asyncio.timeout(timeout):
            while len(self.seen) < count:
                self.changed.clear()
                await self.changed.wait()

    def by_chat(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = defaultdict(list)
        for _, entry in self.seen:
            out[entry.chat].append(entry.update_id)
        return dict(out)


def service() -> ConversationService:
    """The chats' turns, as the bot's runner holds them (no model: nothing is answered)."""
    return ConversationService(None, MemoryRepository(), consult_rounds=3, max_rounds=10)  # type: ignore[arg-type]


class StreamWorker:
    """What `membot worker` runs: the stream intake (taking) and the runner, together."""

    def __init__(
        self,
        stream: UpdateStream,
        leases: ShardLeases,
        handler: Callable[..., Awaitable[None]],
        *,
        concurrency: int,
        claim_idle: float,
        turns: Turns | None = None,
    ) -> None:
        self.stream = stream
        self.intake = StreamIntake(stream, leases, claim_idle=claim_idle)
        turns = turns or service()
        self.runner = Runner(
            self.intake,
            handler,
            turns=turns,
            repository=MemoryRepository(),
            concurrency=concurrency,
        )

    async def start(self) -> None:
        await self.intake.start()
        await self.runner.start()

    async def stop(self, grace: float) -> None:
        await self.runner.stop(grace)
        await self.intake.close()

    async def wait_for_shards(self) -> None:
        await self.intake.wait_for_shards()

    def holding(self) -> list[int]:
        return self.intake.holding()

    def tasks(self) -> list[asyncio.Task[None]]:
        """Its background tasks and lanes (as a kill -9 would end them)."""
        own = [self.runner._taking, self.intake._balancer]
        return [t for t in own if t is not None] + list(self.runner.lanes.tasks.values())


def make_worker(client: Redis, prefix: str, name: str, recorder: Recorder) -> StreamWorker:
    stream = UpdateStream(client, prefix, SHARDS)
    leases = ShardLeases(client, prefix, name, ttl=CLAIM_IDLE)
    return StreamWorker(
        stream, leases, recorder.handler(name), concurrency=16, claim_idle=CLAIM_IDLE
    )


def test_every_shard_goes_to_one_live_worker_and_a_leaver_moves_only_its_own() -> None:
    three = assign(16, ["a", "b", "c"])
    assert set(three) == set(range(16)) and set(three.values()) == {"a", "b", "c"}
    two = assign(16, ["a", "c"])
    assert all(two[s] == w for s, w in three.items() if w != "b")  # only b's shards moved
    assert assign(16, []) == {}


def test_an_update_is_routed_by_its_chat() -> None:
    assert chat_of(text_update(1, -100)) == "-100"
    callback = {
        "update_id": 2,
        "callback_query": {
            "id": "x",
            "from": {"id": 5},
            "message": {"message_id": 1, "date": 0, "chat": {"id": 77, "type": "private"}},
        },
    }
    assert chat_of(callback) == "77"
    assert chat_of({"update_id": 3, "inline_query": {"id": "q", "from": {"id": 9}}}) == "u9"


async def test_an_update_is_queued_once_even_when_it_comes_again(
    client: Redis, prefix: str
) -> None:
    stream = UpdateStream(client, prefix, SHARDS)
    await stream.prepare()
    assert await stream.publish(text_update(10, 1))
    assert not await stream.publish(text_update(10, 1))  # Telegram's redelivery
    leases = ShardLeases(client, prefix, "w", ttl=5)
    for shard in range(SHARDS):
        assert await leases.hold(shard)
    held = [(shard, leases.lease_key(shard)) for shard in range(SHARDS)]
    entries, _ = await stream.read_held("w", held, 10, "t1")
    assert [(e.update_id, e.chat) for e in entries] == [(10, "1")]
    assert json.loads(entries[0].data)["message"]["text"] == "hi"
    await stream.ack(entries[0])
    assert await stream.handled(10)
    assert not await stream.publish(text_update(10, 1))  # handled: still not again
    assert sum([await client.xlen(stream.key(s)) for s in range(SHARDS)]) == 0


async def test_a_due_tasks_firing_is_queued_again_once_handled_but_never_twice_at_once(
    client: Redis, prefix: str
) -> None:
    # The clock puts a firing again only while its task is still due at that time: its turn
    # failed for good (the runner acknowledged it) without moving the task. Marked handled,
    # it must be queued again, or the task waits a day (the mark's life) and is dropped as
    # too late; while it is queued, it is not queued twice.
    due = datetime(2026, 3, 28, 8, 0, tzinfo=UTC)
    firing = Task(id="aaaa1111", chat=7, text="x", due=due, zone="UTC").firing.update()
    stream = UpdateStream(client, prefix, SHARDS)
    await stream.prepare()
    assert await stream.publish(firing)
    assert not await stream.publish(firing)  # queued: once
    leases = ShardLeases(client, prefix, "w", ttl=5)
    for shard in range(SHARDS):
        assert await leases.hold(shard)
    held = [(shard, leases.lease_key(shard)) for shard in range(SHARDS)]
    [entry], _ = await stream.read_held("w", held, 10, "t1")
    await stream.ack(entry)
    assert await stream.publish(firing)
    [again], _ = await stream.read_held("w", held, 10, "t2")
    assert again.update_id == entry.update_id < 0
    assert not await stream.handled(again.update_id)  # its turn is not skipped by the fence


async def test_only_the_holder_of_a_shard_reads_from_it(client: Redis, prefix: str) -> None:
    # A worker that lost its lease (and does not know yet) takes nothing more from the
    # shard, so every entry is in the holder's hands or claimable by the next holder.
    stream = UpdateStream(client, prefix, SHARDS)
    await stream.prepare()
    holder, former = (ShardLeases(client, prefix, name, ttl=5) for name in ("a", "b"))
    shard = stream.shard_of("1", 0)
    assert await holder.hold(shard)
    await stream.publish(text_update(11, 1))
    taken, _ = await stream.read_held("b", [(shard, former.lease_key(shard))], 10, "t1")
    assert taken == []
    entries, last = await stream.read_held("a", [(shard, holder.lease_key(shard))], 10, "t2")
    assert [e.update_id for e in entries] == [11]
    assert last == {shard: entries[0].entry_id}  # what the next wait waits past


async def test_a_process_with_another_shard_count_is_refused(client: Redis, prefix: str) -> None:
    await UpdateStream(client, prefix, SHARDS).prepare()
    with pytest.raises(QueueMismatch, match="QUEUE_SHARDS"):
        await UpdateStream(client, prefix, SHARDS * 2).prepare()


async def test_two_workers_share_the_chats_each_in_order_and_none_twice(
    client: Redis, prefix: str
) -> None:
    recorder = Recorder()
    workers = [make_worker(client, prefix, n, recorder) for n in ("w1", "w2")]
    for worker in workers:
        await worker.start()
    try:
        stream = workers[0].stream
        # Let both see each other and split the shards before the load.
        async with asyncio.timeout(5):
            for worker in workers:
                await worker.wait_for_shards()
        chats = [11, 12, 13, 14, 15, 16, 17, 18]
        update_id = 100
        for _ in range(5):
            for chat in chats:
                update_id += 1
                await stream.publish(text_update(update_id, chat))
        await recorder.wait_for(5 * len(chats))
    finally:
        for worker in workers:
            await worker.stop(grace=5)
    by_chat = recorder.by_chat()
    assert all(ids == sorted(ids) and len(ids) == 5 for ids in by_chat.values())
    assert len({e.update_id for _, e in recorder.seen}) == len(recorder.seen)
    assert {name for name, _ in recorder.seen} == {"w1", "w2"}  # both worked


async def test_an_idle_worker_hands_shards_over_to_a_newcomer(client: Redis, prefix: str) -> None:
    # An idle worker spends its time waiting for new entries; that wait must not keep the
    # shards it no longer should hold (a second worker started later would never get any).
    recorder = Recorder()
    first = make_worker(client, prefix, "w1", recorder)
    await first.start()
    second = make_worker(client, prefix, "w2", recorder)
    try:
        assert sorted(first.holding()) == list(range(SHARDS))  # alone, it holds every shard
        await second.start()
        async with asyncio.timeout(20 * CLAIM_IDLE):
            await second.wait_for_shards()
        await second.stream.publish(text_update(1, chats_of(second)[0]))
        await recorder.wait_for(1)
    finally:
        await second.stop(grace=5)
        await first.stop(grace=5)
    assert [(name, e.update_id) for name, e in recorder.seen] == [("w2", 1)]


def chats_of(worker: StreamWorker) -> list[int]:
    """Chats whose updates land on the shards `worker` holds."""
    held = set(worker.holding())
    return [c for c in range(1, 1000) if worker.stream.shard_of(str(c), 0) in held]


async def test_a_dead_workers_updates_are_taken_over_in_order_after_claim_idle(
    client: Redis, prefix: str
) -> None:
    recorder = Recorder()
    recorder.hold = asyncio.Event()  # the first worker hangs in its first turn, then "dies"
    first = make_worker(client, prefix, "dead", recorder)
    await first.start()
    for update_id in (1, 2, 3):
        await first.stream.publish(text_update(update_id, 42))
    await recorder.wait_for(1)
    # Dies without a word, as under kill -9 (tests/e2e/test_scaleout.py kills a real process):
    # its tasks stop, nothing is released or acknowledged.
    loop = asyncio.get_running_loop()
    died = loop.time()
    first.runner._stop.set()  # (redis-py may swallow a cancel in mid-read: the loop must end)
    first.intake._stop.set()
    tasks = first.tasks()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    recorder.hold = None
    second = make_worker(client, prefix, "heir", recorder)
    await second.start()
    try:
        await recorder.wait_for(4)
    finally:
        await second.stop(grace=5)
    taken = [(name, e.update_id, e.redelivered) for name, e in recorder.seen]
    assert taken == [("dead", 1, False), ("heir", 1, True), ("heir", 2, True), ("heir", 3, True)]
    assert loop.time() - died >= CLAIM_IDLE * 0.5  # not before the dead one's lease lapsed
    assert all([await second.stream.handled(u) for u in (1, 2, 3)])


def photo_update(update_id: int, chat: int, album: str) -> dict[str, object]:
    message = {"message_id": update_id, "date": 0, "chat": {"id": chat, "type": "private"}}
    photo = [{"file_id": f"p{update_id}", "file_unique_id": "u", "width": 1, "height": 1}]
    return {
        "update_id": update_id,
        "message": {**message, "photo": photo, "media_group_id": album},
    }


async def test_an_album_is_one_turn_and_a_dead_workers_album_is_answered_once_whole(
    client: Redis, prefix: str
) -> None:
    recorder = Recorder()
    recorder.hold = asyncio.Event()  # the first worker hangs in the album's turn, then "dies"
    first = make_worker(client, prefix, "dead", recorder)
    await first.start()
    for update_id in (1, 2, 3):
        await first.stream.publish(photo_update(update_id, 42, "album"))
    await first.stream.publish(text_update(4, 42))
    await recorder.wait_for(1)
    assert recorder.albums == [[1, 2, 3]]  # gathered: one call
    first.runner._stop.set()  # dies as under kill -9 (see the test above)
    first.intake._stop.set()
    tasks = first.tasks()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    recorder.hold = None
    # No part was marked done: the turn never ended.
    assert not any([await first.stream.handled(u) for u in (1, 2, 3)])
    second = make_worker(client, prefix, "heir", recorder)
    await second.start()
    try:
        await recorder.wait_for(3)
    finally:
        await second.stop(grace=5)
    assert recorder.albums == [[1, 2, 3], [1, 2, 3], [4]]  # whole again, then the chat goes on
    assert [e.redelivered for _, e in recorder.seen] == [False, True, True]
    assert all([await second.stream.handled(u) for u in (1, 2, 3, 4)])


async def test_a_failed_update_is_tried_again_and_the_chat_waits_behind_it(
    client: Redis, prefix: str
) -> None:
    recorder = Recorder()
    recorder.fail[1] = 2
    worker = make_worker(client, prefix, "w", recorder)
    await worker.start()
    try:
        for update_id in (1, 2):
            await worker.stream.publish(text_update(update_id, 7))
        await recorder.wait_for(2)
    finally:
        await worker.stop(grace=5)
    assert [(e.update_id, e.redelivered) for _, e in recorder.seen] == [(1, True), (2, False)]


async def test_a_stopping_worker_finishes_its_turn_and_leaves_the_rest_to_the_next(
    client: Redis, prefix: str
) -> None:
    recorder = Recorder()
    recorder.hold = asyncio.Event()
    first = make_worker(client, prefix, "leaving", recorder)
    await first.start()
    for update_id in (1, 2, 3):
        await first.stream.publish(text_update(update_id, 5))
    await recorder.wait_for(1)
    stopping = asyncio.create_task(first.stop(grace=10))
    await asyncio.sleep(0)  # let stop() begin while the turn is in progress
    assert not stopping.done()
    recorder.hold.set()
    await stopping
    assert await first.stream.handled(1)  # the turn in progress was finished and acknowledged
    assert not await first.stream.handled(2)
    recorder.hold = None
    second = make_worker(client, prefix, "next", recorder)
    await second.start()  # the shards were released: taken at once, no CLAIM_IDLE wait
    try:
        await recorder.wait_for(3, timeout=CLAIM_IDLE * 0.9)
    finally:
        await second.stop(grace=5)
    assert [(n, e.update_id) for n, e in recorder.seen] == [
        ("leaving", 1),
        ("next", 2),
        ("next", 3),
    ]


async def test_a_worker_whose_lease_lapsed_leaves_the_rest_of_the_chat_to_the_new_holder(
    client: Redis, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    # The first worker stalls (its renewals stop) in the middle of a chat's first update,
    # long enough for its lease to lapse and a second worker to take the shard over. When it
    # comes back it finishes the turn in hand, but the chat's next updates are the new
    # holder's: answering them too, side by side, would answer the chat out of order.
    seen: list[tuple[str, int]] = []
    changed = asyncio.Event()
    stalled = asyncio.Event()
    workers: dict[str, StreamWorker] = {}

    def handler(name: str) -> Callable[[Entry], Awaitable[None]]:
        async def handle(entry: Entry) -> None:  # the runner asked the fence, in the turn
            seen.append((name, entry.update_id))
            changed.set()
            if name == "stalled" and entry.update_id == 1:
                await stalled.wait()

        return handle

    def make(name: str) -> StreamWorker:
        stream = UpdateStream(client, prefix, SHARDS)
        leases = ShardLeases(client, prefix, name, ttl=CLAIM_IDLE)
        workers[name] = StreamWorker(
            stream, leases, handler(name), concurrency=16, claim_idle=CLAIM_IDLE
        )
        return workers[name]

    async def wait_for(count: int) -> None:
        async with asyncio.timeout(10):
            while len(seen) < count:
                changed.clear()
                await changed.wait()

    first = make("stalled")
    await first.start()
    for update_id in (1, 2, 3):
        await first.stream.publish(text_update(update_id, 42))
    await wait_for(1)
    balance = first.intake._balancer  # its heartbeat and lease renewals stop; its turn goes on
    assert balance is not None
    balance.cancel()
    await asyncio.gather(balance, return_exceptions=True)
    second = make("heir")
    await second.start()
    try:
        await wait_for(4)  # the heir took the shard and its updates, the one in hand included
        with caplog.at_level(logging.WARNING, logger="membot.intake.redis"):
            lanes = list(first.runner.lanes.tasks.values())
            stalled.set()  # the stalled one finishes its turn and comes to the chat's next
            async with asyncio.timeout(10):  # update: its fence leaves it to the heir
                await asyncio.gather(*lanes)
        assert first.stream.shard_of("42", 0) not in first.holding()
    finally:
        await second.stop(grace=5)
        await first.stop(grace=5)
    assert seen == [("stalled", 1), ("heir", 1), ("heir", 2), ("heir", 3)]
    assert "has another holder now; its updates are left to it" in caplog.text
    assert all([await first.stream.handled(u) for u in (1, 2, 3)])


async def test_a_read_retried_after_its_reply_was_lost_returns_what_it_took(
    client: Redis, prefix: str
) -> None:
    stream = UpdateStream(client, prefix, SHARDS)
    await stream.prepare()
    leases = ShardLeases(client, prefix, "w", ttl=5)
    shard = stream.shard_of("42", 0)
    assert await leases.hold(shard)
    held = [(shard, leases.lease_key(shard))]
    await stream.publish(text_update(1, 42))
    lost, _ = await stream.read_held("w", held, 10, "first")  # its reply never arrives
    assert [e.update_id for e in lost] == [1]
    await stream.publish(text_update(2, 42))
    again, _ = await stream.read_held("w", held, 10, "first")  # the same read, sent again
    assert [(e.update_id, e.redelivered) for e in again] == [(1, True), (2, False)]
    after, _ = await stream.read_held("w", held, 10, "second")
    assert after == []
    assert (
        await client.get(f"{prefix}q:read:w") == "first"
    )  # a read that took nothing wrote nothing
    swept, _ = await stream.read_held("w", held, 10, "third", sweep=True)
    assert [(e.update_id, e.redelivered) for e in swept] == [(1, True), (2, True)]


@pytest.mark.parametrize("outage", [False, True], ids=["retried", "after-an-outage"])
async def test_updates_whose_read_reply_was_lost_are_answered_in_order(
    client: Redis, prefix: str, outage: bool
) -> None:
    # The read that took update 1 loses its reply. Either the client sends it again at once
    # (Redis is back), or Redis stays unreachable a while and the worker reads again later.
    proxy = CuttingProxy(6379)
    proxy.refuse_after_cut = outage
    via_proxy = create_client(await proxy.start(), socket_timeout=5.0)
    recorder = Recorder()
    stream = UpdateStream(via_proxy, prefix, SHARDS)
    leases = ShardLeases(via_proxy, prefix, "w", ttl=5)
    worker = StreamWorker(stream, leases, recorder.handler("w"), concurrency=16, claim_idle=5)
    await worker.start()
    publisher = UpdateStream(client, prefix, SHARDS)
    try:
        proxy.request, proxy.reply = f"{prefix}q:read:w".encode(), b'"text":"first"'
        await publisher.publish(text_update(1, 42, "first"))
        await publisher.publish(text_update(2, 42))
        async with asyncio.timeout(10):
            await proxy.cut.wait()
            if outage:  # the client's own tries are refused: the read fails for the worker
                await proxy.refused_enough.wait()
        proxy.refusing = False
        await publisher.publish(text_update(3, 42))
        await recorder.wait_for(3)
    finally:
        await worker.stop(grace=5)
        await via_proxy.aclose()
        await proxy.close()
    assert recorder.by_chat() == {"42": [1, 2, 3]}


async def test_an_update_stranded_in_the_workers_pending_list_is_answered(
    client: Redis, prefix: str
) -> None:
    # What a token cannot catch: Redis, stalled, ran a client's retry of a read before the read
    # itself, whose entries then went nowhere. The worker sweeps its pending list now and then.
    recorder = Recorder()
    worker = make_worker(client, prefix, "w", recorder)
    await worker.start()
    try:
        stream = worker.stream
        shard = stream.shard_of("42", 0)
        async with client.pipeline(transaction=True) as pipe:  # added and taken as one step
            pipe.xadd(stream.key(shard), {"u": 1, "c": "42", "d": json.dumps(text_update(1, 42))})
            pipe.xreadgroup("workers", "w", {stream.key(shard): ">"})
            await pipe.execute()
        await recorder.wait_for(1, timeout=20 * CLAIM_IDLE)
    finally:
        await worker.stop(grace=5)
    assert [(e.update_id, e.redelivered) for _, e in recorder.seen] == [(1, True)]


async def test_a_handled_update_is_marked_done_before_the_chats_turn_is_let_go(
    client: Redis, prefix: str
) -> None:
    marked: list[bool] = []
    finished = asyncio.Event()
    stream = UpdateStream(client, prefix, SHARDS)

    class Recorded:
        """The chat's turn: whether the update was marked done when it was let go."""

        @contextlib.asynccontextmanager
        async def ordered(self, cid: ConversationId | None) -> AsyncIterator[None]:
            yield
            marked.append(await stream.handled(1))
            finished.set()

    async def handle(entry: Entry) -> None:
        return None

    leases = ShardLeases(client, prefix, "w", ttl=CLAIM_IDLE)
    workers = [
        StreamWorker(
            stream, leases, handle, concurrency=16, claim_idle=CLAIM_IDLE, turns=Recorded()
        )
    ]
    await workers[0].start()
    try:
        await stream.publish(text_update(1, 42))
        async with asyncio.timeout(10):
            await finished.wait()
    finally:
        await workers[0].stop(grace=5)
    assert marked == [True]
    assert sum([await client.xlen(stream.key(s)) for s in range(SHARDS)]) == 0
