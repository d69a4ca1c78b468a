"""Guest Mode in the intake: a guest message belongs to its caller's private chat (its lane,
its shard, its turn), never to the chat the bot was called into; one whose question is
stored already (marked with its guest query id) is not answered again when it comes back.

Against the real Redis stream (tests/unit/intake/test_stream.py's worker)."""

from __future__ import annotations

from typing import Any

from redis.asyncio import Redis

from membot.core.service import ConversationService
from membot.errors import StorageUnavailable
from membot.ids import ConversationId
from membot.intake.contract import Entry, chat_of
from membot.intake.redis import StreamIntake
from membot.intake.repeats import guest_answered
from membot.intake.runner import Runner
from membot.intake.shards import ShardLeases
from membot.intake.stream import UpdateStream
from membot.memory.contract.models import Message
from membot.memory.inmemory import MemoryRepository
from tests.e2e.processes import until
from tests.unit.intake.test_stream import (
    CLAIM_IDLE,
    SHARDS,
    Recorder,
    client,
    make_worker,
    text_update,
)

__all__ = ["client"]  # a fixture, used by name

CALLER = 42
GUEST_CHAT = -900  # a group the bot is not in; its id could be any other chat's


def guest_update(update_id: int, query: str, caller: int = CALLER) -> dict[str, Any]:
    message = {
        "message_id": 1,  # the guest chat's numbering, not the private chat's
        "date": 0,
        "chat": {"id": GUEST_CHAT, "type": "group", "title": "Anna and me"},
        "from": {"id": caller, "is_bot": False, "first_name": "Alice"},
        "text": "@membot_test_bot when is it due?",
        "guest_query_id": query,
    }
    return {"update_id": update_id, "guest_message": message}


def test_a_guest_message_is_its_callers_private_chats() -> None:
    assert chat_of(guest_update(1, "gq-1")) == str(CALLER)
    assert chat_of(guest_update(2, "gq-2", caller=7)) == "7"


async def test_guest_and_private_updates_of_a_caller_share_one_lane_in_order(
    client: Redis, prefix: str
) -> None:
    recorder = Recorder()
    worker = make_worker(client, prefix, "w", recorder)
    await worker.start()
    try:
        await worker.stream.publish(text_update(1, CALLER))
        await worker.stream.publish(guest_update(2, "gq-1"))
        await worker.stream.publish(text_update(3, CALLER))
        await recorder.wait_for(3)
    finally:
        await worker.stop(grace=5)
    assert recorder.by_chat() == {str(CALLER): [1, 2, 3]}


async def test_a_guest_query_is_answered_only_until_its_question_is_stored() -> None:
    repository = MemoryRepository()
    private = ConversationId.telegram(CALLER)
    # The private chat's own question with the guest message's id does not count.
    await repository.append(private, [Message(role="user", content="hi", tg_message_id=1)])
    assert not await guest_answered(repository, CALLER, "gq-1")
    await repository.append(private, [Message(role="user", content="q", guest="gq-1")])
    assert await guest_answered(repository, CALLER, "gq-1")
    assert not await guest_answered(repository, CALLER, "gq-2")
    assert not await guest_answered(repository, 7, "gq-1")  # another caller's private chat


async def test_a_guest_message_stored_then_failed_is_not_answered_again(
    client: Redis, prefix: str
) -> None:
    """The turn stored its question and answer, then failed for a passing reason (Redis
    went away before the update was acknowledged): tried again, as a possible repeat, it is
    recognised by its query id and acknowledged without a second answer."""
    repository = MemoryRepository()
    calls: list[Entry] = []

    async def handle(entry: Entry, *parts: Entry) -> None:
        calls.append(entry)
        stored = Message(role="user", content="when is it due?", guest="gq-1")
        await repository.append(ConversationId.telegram(CALLER), [stored])
        raise StorageUnavailable("storage: Redis did not answer")

    stream = UpdateStream(client, prefix, SHARDS)
    intake = StreamIntake(
        stream, ShardLeases(client, prefix, "w", ttl=CLAIM_IDLE), claim_idle=CLAIM_IDLE
    )
    turns = ConversationService(None, repository, consult_rounds=3, max_rounds=10)  # type: ignore[arg-type]
    runner = Runner(intake, handle, turns=turns, repository=repository, concurrency=16)
    await intake.start()
    await runner.start()
    try:
        await stream.publish(guest_update(1, "gq-1"))
        await until(lambda: runner.handled == 1, what="the guest update acknowledged")
        assert await stream.handled(1)
    finally:
        await runner.stop(grace=5)
        await intake.close()
    assert len(calls) == 1
