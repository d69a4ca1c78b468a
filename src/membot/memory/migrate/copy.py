"""Steps of `membot migrate` (memory/migrate/run.py): messages in batches, and a conversation's
files copied from one backend to another."""

from __future__ import annotations

from collections.abc import AsyncIterator

from membot.ids import ConversationId
from membot.memory.contract.models import Message
from membot.memory.contract.repository import ChatRepository


async def batches(messages: AsyncIterator[Message], size: int) -> AsyncIterator[list[Message]]:
    batch: list[Message] = []
    async for message in messages:
        batch.append(message)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


async def copy_files(source: ChatRepository, target: ChatRepository, cid: ConversationId) -> int:
    """Copy the files the conversation's messages refer to (images, documents' text); how
    many were copied. A file the source no longer has (expired) is not there to copy."""
    copied = 0
    messages = source.iter_messages(cid)
    try:
        async for message in messages:
            for attachment in message.attachments:
                if attachment.file is None:
                    continue
                data = await source.get_file(cid, attachment.file)
                if data is not None:
                    await target.put_file(cid, attachment.file, data)
                    copied += 1
    finally:
        await messages.aclose()
    return copied
