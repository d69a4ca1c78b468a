"""The storage contract's `forget`, on every backend (the `repository` fixture of
test_contract.py): forgotten messages keep their slots as tombstones, their files and facts
go, the summaries made from them are dropped, and nothing of their words is left in what the
backend stores (every file under its directory, every Redis key under its prefix)."""

from __future__ import annotations

from pathlib import Path

from membot.ids import ConversationId
from membot.memory import ChatRepository, FileRepository, Message
from membot.memory.contract.attachment import Attachment, new_file_key
from membot.memory.contract.delivery import Delivery
from membot.memory.contract.models import Source
from membot.memory.outage import ResilientRepository
from membot.memory.redis import RedisRepository
from tests.redis_keys import stored_values
from tests.unit.memory import test_contract
from tests.unit.memory.test_contract import ONE, summarize, tg

repository = test_contract.repository  # the fixture: every backend

SECRET = "hunter2swordfish"


async def stored_text(repo: ChatRepository, tmp_path: Path) -> str:
    """Everything the backend keeps, as text: every file's bytes, or every Redis value."""
    if isinstance(repo, FileRepository):
        paths = [p for p in tmp_path.rglob("*") if p.is_file()]
        return "\n".join(p.read_bytes().decode("utf-8", "replace") for p in paths)
    inner = repo.inner if isinstance(repo, ResilientRepository) else repo
    if not isinstance(inner, RedisRepository):
        return repr(vars(inner))  # the memory backend: its records, files' bytes included
    return "\n".join(await stored_values(inner.client, inner.prefix))


async def a_chat(repo: ChatRepository) -> str:
    """Six messages (the 3rd and 5th hold the secret, the 3rd with a file), two summaries
    (1-2, then 1-4), two facts; returns the file's key."""
    key = new_file_key("txt")
    await repo.put_file(ONE, key, f"the document says {SECRET}".encode())
    doc = Attachment(kind="document", file=key, name="a.txt", chars=30)
    await repo.append(ONE, [Message("user", "hello", user_id=5), Message("assistant", "hi")])
    await repo.append(
        ONE,
        [
            Message("user", f"my password is {SECRET}", user_id=5, attachments=(doc,)),
            Message(
                "assistant",
                "noted",
                sources=(Source("https://example.com/x", "page"),),
                delivery=Delivery(reply_to=3),
            ),
        ],
    )
    await repo.append(ONE, [Message("assistant", f"it was {SECRET}"), Message("user", "ok")])
    assert await summarize(repo, ONE, "They greeted each other.", 1, 2)
    assert await summarize(repo, ONE, f"Greetings; the password {SECRET}.", 3, 4)
    await repo.add_fact(ONE, "Lives in Porto", 10)
    await repo.add_fact(ONE, f"Password: {SECRET}", 10)
    return key


async def test_forgotten_messages_keep_their_slots_and_lose_their_words(
    repository: ChatRepository, tmp_path: Path
) -> None:
    key = await a_chat(repository)
    before = await repository.get_meta(ONE)
    assert SECRET in await stored_text(repository, tmp_path)

    found = await repository.forget(ONE, [3, 5])

    assert found == 2
    messages = [m async for m in repository.iter_messages(ONE)]
    assert [m.seq for m in messages] == [1, 2, 3, 4, 5, 6]
    gone = {m.seq: m for m in messages if m.forgotten}
    assert sorted(gone) == [3, 5]
    assert (gone[3].role, gone[3].user_id, gone[3].content, gone[3].attachments) == (
        "user",
        5,
        "",
        (),
    )
    assert [m.content for m in messages if not m.forgotten] == ["hello", "hi", "noted", "ok"]
    assert messages[3].sources  # a message not forgotten is as it was
    assert [m.seq for m in await repository.tail(ONE, 2)] == [5, 6]
    assert await repository.get_file(ONE, key) is None
    # The summary made before message 3 is the summary again; the one after it is gone.
    assert await repository.get_summary(ONE) == "They greeted each other."
    meta = await repository.get_meta(ONE)
    assert (meta.summarized_upto, meta.messages_total) == (2, 6)
    assert meta.generation != before.generation
    # A summary made meanwhile, from what was read before, is dropped.
    assert not await repository.save_summary(ONE, SECRET, 3, 4, before.generation)
    # A fact: every summary goes (each is made agreeing with the facts).
    assert await repository.forget(ONE, [], [f"Password: {SECRET}"]) == 0
    assert await repository.get_facts(ONE) == ["Lives in Porto"]
    assert await repository.get_summary(ONE) == ""
    assert (await repository.get_meta(ONE)).summarized_upto == 0
    assert SECRET not in await stored_text(repository, tmp_path)
    # The conversation goes on where it was.
    stored = await repository.append(ONE, [Message("user", "next")])
    assert stored[0].seq == 7
    assert await summarize(repository, ONE, "Greetings, then ok.", 1, 4)
    assert await repository.get_summary(ONE) == "Greetings, then ok."


async def test_forgetting_what_the_first_summary_covered_leaves_no_summary(
    repository: ChatRepository, tmp_path: Path
) -> None:
    await a_chat(repository)
    assert await repository.forget(ONE, [1]) == 1
    assert await repository.get_summary(ONE) == ""
    meta = await repository.get_meta(ONE)
    assert (meta.summarized_upto, meta.summaries_made) == (0, 0)
    assert "They greeted" not in await stored_text(repository, tmp_path)
    assert len(await repository.get_facts(ONE)) == 2  # no facts named: none dropped


async def test_forgetting_in_an_unknown_conversation_creates_nothing(
    repository: ChatRepository,
) -> None:
    cid: ConversationId = tg(404)
    assert await repository.forget(cid, [1, 2], ["x"]) == 0
    assert await repository.conversations("tg") == []
    assert (await repository.get_meta(cid)).messages_total == 0


async def test_a_summary_that_alone_says_the_words_goes_with_every_later_one(
    repository: ChatRepository, tmp_path: Path
) -> None:
    # The messages a summary was made from may be gone (REDIS_MAX_MESSAGES trims them): the
    # summary is then where the words are left.
    await repository.append(ONE, [Message("user", "hello", user_id=5), Message("assistant", "hi")])
    assert await summarize(repository, ONE, "They greeted each other.", 1, 2)
    await repository.append(ONE, [Message("user", "a", user_id=5), Message("assistant", "b")])
    assert await summarize(repository, ONE, f"The password is {SECRET}.", 3, 4)
    await repository.append(ONE, [Message("user", "c", user_id=5), Message("assistant", "d")])
    assert await summarize(repository, ONE, f"The password is {SECRET}; then c.", 5, 6)
    before = await repository.get_meta(ONE)

    def holds(text: str) -> bool:
        return SECRET in text

    assert await repository.forget(ONE, [], [], holds) == 0
    assert await repository.get_summary(ONE) == "They greeted each other."
    meta = await repository.get_meta(ONE)
    assert (meta.summarized_upto, meta.summaries_made) == (2, 1)
    assert meta.generation != before.generation
    assert SECRET not in await stored_text(repository, tmp_path)
    # The messages are as they were.
    assert [m.content async for m in repository.iter_messages(ONE)] == [
        "hello",
        "hi",
        "a",
        "b",
        "c",
        "d",
    ]
    # Nothing says them now: nothing changes.
    assert await repository.forget(ONE, [], [], holds) == 0
    assert (await repository.get_meta(ONE)).generation == meta.generation
