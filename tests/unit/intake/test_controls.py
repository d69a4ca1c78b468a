"""Control updates (Stop on a draft) with the Redis stream: published by whichever process
receives them, heard by every worker listening, never added to the stream; a listener whose
connection is lost listens again. On the real Redis, under the test's own prefix."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

from redis.asyncio import Redis

from membot.errors import StorageUnavailable
from membot.intake.controls import RedisControls
from membot.intake.redis import StreamIntake
from membot.intake.stream import UpdateStream
from tests.unit.conftest import REDIS_URL


def stop_update(update_id: int, chat: int = 5, draft_id: int = 11) -> dict[str, Any]:
    stopped = {"chat": {"id": chat, "type": "private"}, "draft_id": draft_id}
    return {"update_id": update_id, "stopped_message_generation": stopped}


async def test_a_stop_goes_to_every_listener_and_never_into_the_stream(prefix: str) -> None:
    receiver_client = Redis.from_url(REDIS_URL, decode_responses=True)
    workers = [Redis.from_url(REDIS_URL, decode_responses=True) for _ in range(2)]
    receiver = StreamIntake(UpdateStream(receiver_client, prefix, 4), None, claim_idle=5)
    listeners = [RedisControls(client, prefix) for client in workers]
    try:
        await receiver.start()
        for listener in listeners:
            await listener.listen()
        await receiver.put([stop_update(1)])
        for listener in listeners:
            async with asyncio.timeout(5):
                entries = await listener.next()
                while not entries:
                    entries = await listener.next()
            [entry] = entries
            assert (entry.update_id, entry.chat, json.loads(entry.data)) == (1, "5", stop_update(1))
        lengths = [await receiver_client.xlen(f"{prefix}q:s:{n}") for n in range(4)]
        assert lengths == [0, 0, 0, 0]
        assert await receiver_client.exists(f"{prefix}q:u:1") == 0  # no mark: nothing kept
    finally:
        for listener in listeners:
            await listener.close()
        for client in (receiver_client, *workers):
            await client.aclose()


async def test_a_listener_that_lost_its_connection_listens_again(prefix: str) -> None:
    name = f"controls-{uuid.uuid4().hex[:8]}"
    worker = Redis.from_url(REDIS_URL, decode_responses=True, client_name=name)
    admin = Redis.from_url(REDIS_URL, decode_responses=True)
    listener = RedisControls(worker, prefix)
    publisher = RedisControls(admin, prefix)
    try:
        await listener.listen()
        killed = 0
        for client in await admin.client_list():
            if client.get("name") == name and "P" in client.get("flags", ""):
                await admin.client_kill_filter(_id=client["id"])
                killed += 1
        assert killed == 1
        # Stops published while it is not listening are missed (pub/sub keeps nothing);
        # once it listens again (a failed look raises, the next subscribes), they come.
        got: list[int] = []
        failures = 0
        async with asyncio.timeout(10):
            update_id = 1
            while not got:
                await publisher.publish(stop_update(update_id))
                try:
                    got = [e.update_id for e in await listener.next()]
                except StorageUnavailable:  # redis-py's error, translated
                    failures += 1
                update_id += 1
        assert got and failures <= 1  # one failed look at most: then it listened again
    finally:
        await listener.close()
        await worker.aclose()
        await admin.aclose()
