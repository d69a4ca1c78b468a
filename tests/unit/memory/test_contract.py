"""The storage contract, run over every backend: what the core relies on, nothing more.

One contract, every backend (as aiogram tests its storages): a new backend joins by adding
itself to the `repository` fixture's params. The Redis backend runs against the real server at
127.0.0.1:6379 (there in CI too), each test under a prefix of its own that is deleted after;
so does the resilient one (memory/outage/repository.py) over it, as STORAGE=redis with QUEUE=local
runs it: while Redis answers it must keep the contract exactly, nothing spooled.
"""

from __future__ import annotations

import asyncio
import errno
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from membot.ids import ConversationId, InvalidConversationId
from membot.memory import (
    ChatRepository,
    ConversationState,
    FileRepository,
    MemoryRepository,
    Message,
    SessionConfig,
)
from membot.memory.contract.attachment import Attachment, InvalidFileKey, new_file_key
from membot.memory.contract.delivery import Delivery, DeliveryMark
from membot.memory.contract.models import Source
from membot.memory.files import repository as files_module
from membot.memory.outage import ResilientRepository
from membot.memory.redis import RedisRepository
from membot.redis.client import create_client
from membot.redis.health import RedisHealth

BACKENDS = ["files", "memory", "redis", "resilient"]
REDIS_URL = "redis://127.0.0.1:6379/0"

ONE = ConversationId.telegram(1)
GROUP = ConversationId.telegram(-1002)
SESSION = ConversationId.api(uuid.UUID("3f2b8c1e-9a4d-4c6b-8e2f-1a2b3c4d5e6f"))
OTHER_SESSION = ConversationId.api(uuid.UUID("00000000-0000-4000-8000-000000000001"))


def tg(n: int) -> ConversationId:
    return ConversationId.telegram(n)


@pytest.fixture(params=BACKENDS)
async def repository(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[ChatRepository]:
    repo: ChatRepository
    redis: RedisRepository | None = None
    health: RedisHealth | None = None
    if request.param == "files":
        repo = FileRepository(tmp_path / "data")
    elif request.param == "memory":
        repo = MemoryRepository()
    elif request.param in ("redis", "resilient"):
        # Not skipped when Redis is down: the test fails, as it must where Redis is promised.
        prefix = f"membot-test:{uuid.uuid4().hex}:"
        repo = redis = RedisRepository(create_client(REDIS_URL), prefix=prefix)
        if request.param == "resilient":
            # A budget far above the production one: these tests are about the contract,
            # and a loaded machine (the suite runs in parallel) must not open the breaker.
            health = RedisHealth(redis.client.ping, budget=30.0)
            repo = ResilientRepository(redis, health, tmp_path / "redis-spool.jsonl")
    else:  # pragma: no cover - a param without a backend
        raise AssertionError(request.param)
    assert isinstance(repo, ChatRepository)
    try:
        yield repo
        if isinstance(repo, ResilientRepository):
            # Every call reached Redis: the contract was kept by Redis, not by the spool.
            assert health is not None and health.available and health.outages == 0
            assert repo.spool.pending == []
    finally:
        if redis is not None:
            keys = [key async for key in redis.client.scan_iter(match=f"{redis.prefix}*")]
            if keys:
                await redis.client.delete(*keys)
        if health is not None:
            await health.close()
        await repo.close()


def user(text: str, **kw: object) -> Message:
    return Message(role="user", content=text, **kw)  # type: ignore[arg-type]


def bot(text: str) -> Message:
    return Message(role="assistant", content=text)


CONSULTING = ConversationState(
    mode="consultation", round=1, max_rounds=3, initial_request="Plan my trip to Kazan"
)
FINISHED = ConversationState(
    mode="chat", round=3, max_rounds=3, initial_request="Plan my trip to Kazan", complete=True
)


async def summarize(repo: ChatRepository, cid: ConversationId, text: str, a: int, b: int) -> bool:
    """Save a summary as the summarizer does: in the generation it read."""
    generation = (await repo.get_meta(cid)).generation
    return await repo.save_summary(cid, text, a, b, generation)


# -- the archive -------------------------------------------------------------------------------


async def test_unknown_conversation_is_empty(repository: ChatRepository) -> None:
    for cid in (ONE, SESSION):
        assert await repository.tail(cid, 20) == []
        assert await repository.get_summary(cid) == ""
        assert await repository.get_facts(cid) == []
        meta = await repository.get_meta(cid)
        assert meta.conversation == cid
        assert (meta.messages_total, meta.summarized_upto) == (0, 0)
        assert meta.state == ConversationState()
        ctx = await repository.context(cid, 20)
        assert (ctx.history, ctx.summary, ctx.facts) == ([], "", [])
        assert ctx.meta.state == ConversationState()
    assert await repository.conversations("tg") == []
    assert await repository.conversations("api") == []


async def test_append_assigns_sequence_and_tail_returns_last_in_order(
    repository: ChatRepository,
) -> None:
    cid = tg(7)
    stored = await repository.append(cid, [user("q1", user_id=5, name="Ann"), bot("a1")])
    assert [m.seq for m in stored] == [1, 2]
    for i in range(2, 31):
        await repository.append(cid, [user(f"q{i}"), bot(f"a{i}")])
    tail = await repository.tail(cid, 5)
    assert [m.content for m in tail] == ["a28", "q29", "a29", "q30", "a30"]
    assert [m.seq for m in tail] == [56, 57, 58, 59, 60]
    first = (await repository.tail(cid, 60))[0]
    assert (first.content, first.user_id, first.name) == ("q1", 5, "Ann")
    meta = await repository.get_meta(cid)
    assert meta.messages_total == 60
    assert meta.conversation == cid


async def test_tail_larger_than_history(repository: ChatRepository) -> None:
    await repository.append(ONE, [user("only")])
    assert [m.content for m in await repository.tail(ONE, 100)] == ["only"]


async def test_unicode_and_newlines_round_trip(repository: ChatRepository) -> None:
    text = 'строка 1\nline "2" \\ 🎉 <b>&amp;</b>\n\n\tend'
    await repository.append(tg(3), [user(text)])
    assert (await repository.tail(tg(3), 1))[0].content == text


async def test_tool_calls_round_trip(repository: ChatRepository) -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    await repository.append(
        tg(3),
        [
            user("hi"),
            Message(role="assistant", content="", tool_calls=(call,)),
            Message(role="tool", content="42", tool_call_id="c1"),
            bot("it is 42"),
        ],
    )
    msgs = await repository.tail(tg(3), 4)
    assert msgs[1].tool_calls == (call,)
    assert msgs[2].tool_call_id == "c1"


async def test_a_stopped_answer_keeps_its_mark(repository: ChatRepository) -> None:
    """An answer the user stopped reads back as stopped (tail, context, iter_messages);
    every other message reads back as not stopped."""
    partial = Message(role="assistant", content="half of it", stopped=True)
    await repository.append(tg(3), [user("tell me"), partial, user("go on"), bot("all")])
    tail = await repository.tail(tg(3), 4)
    assert [(m.content, m.stopped) for m in tail] == [
        ("tell me", False),
        ("half of it", True),
        ("go on", False),
        ("all", False),
    ]
    assert [m.stopped for m in (await repository.context(tg(3), 4)).history] == [
        False,
        True,
        False,
        False,
    ]
    assert [m.stopped async for m in repository.iter_messages(tg(3))] == [
        False,
        True,
        False,
        False,
    ]


async def test_conversations_are_isolated(repository: ChatRepository) -> None:
    await repository.append(ONE, [user("secret of one")])
    await repository.append(GROUP, [user("group talk")])
    assert await summarize(repository, ONE, "one's summary", 1, 1)
    await repository.add_fact(ONE, "one's fact", 10)
    assert [m.content for m in await repository.tail(GROUP, 10)] == ["group talk"]
    assert await repository.get_summary(GROUP) == ""
    assert await repository.get_facts(GROUP) == []


async def test_telegram_and_api_conversations_are_isolated(repository: ChatRepository) -> None:
    # tg:1 and the API session share nothing, whatever their keys look like.
    await repository.append(ONE, [user("telegram words"), bot("telegram answer")])
    await repository.append(SESSION, [user("api words")], state=CONSULTING)
    await repository.add_fact(SESSION, "api fact", 10)
    assert await summarize(repository, SESSION, "api summary", 1, 1)

    assert [m.content for m in await repository.tail(ONE, 10)] == [
        "telegram words",
        "telegram answer",
    ]
    one = await repository.context(ONE, 10)
    assert (one.summary, one.facts, one.meta.state) == ("", [], ConversationState())
    assert one.meta.messages_total == 2
    session = await repository.context(SESSION, 10)
    assert [m.content for m in session.history] == ["api words"]
    assert (session.summary, session.facts) == ("api summary", ["api fact"])
    assert session.meta.state == CONSULTING

    await repository.reset(SESSION)
    assert [m.content for m in await repository.tail(ONE, 10)] == [
        "telegram words",
        "telegram answer",
    ]


async def test_conversations_lists_each_namespace_separately(
    repository: ChatRepository,
) -> None:
    await repository.append(ONE, [user("a")])
    await repository.append(GROUP, [user("b")])
    await repository.append(SESSION, [user("c")])
    await repository.append(OTHER_SESSION, [user("d")])
    assert sorted(await repository.conversations("tg")) == sorted([ONE, GROUP])
    assert sorted(await repository.conversations("api")) == sorted([SESSION, OTHER_SESSION])
    await repository.reset(SESSION)
    await repository.reset(GROUP)
    assert await repository.conversations("tg") == [ONE]
    assert await repository.conversations("api") == [OTHER_SESSION]


# -- summaries and generations -------------------------------------------------------------


async def test_summary_save_and_meta(repository: ChatRepository) -> None:
    cid = tg(9)
    for i in range(10):
        await repository.append(cid, [user(f"q{i}"), bot(f"a{i}")])
    assert await summarize(repository, cid, "first summary", 1, 20) is True
    meta = await repository.get_meta(cid)
    assert (meta.messages_total, meta.summarized_upto, meta.summaries_made) == (20, 20, 1)
    assert meta.unsummarized == 0
    await repository.append(cid, [user("more"), bot("ok")])
    assert await summarize(repository, cid, "second summary", 21, 22) is True
    ctx = await repository.context(cid, 3)
    assert ctx.summary == "second summary"
    assert ctx.meta.summarized_upto == 22
    assert ctx.meta.summaries_made == 2
    assert [m.content for m in ctx.history] == ["a9", "more", "ok"]


async def test_a_summary_is_not_activity(repository: ChatRepository) -> None:
    # An API session expires SESSION_TTL after its last turn; a background summary made
    # later must not keep it alive.
    cid = tg(11)
    for i in range(3):
        await repository.append(cid, [user(f"q{i}"), bot(f"a{i}")])
    last_turn = (await repository.get_meta(cid)).updated_at
    assert await summarize(repository, cid, "a summary", 1, 6) is True
    meta = await repository.get_meta(cid)
    assert meta.updated_at == last_turn and meta.last_summary_at is not None


async def test_the_generation_lasts_until_a_reset(repository: ChatRepository) -> None:
    cid = tg(5)
    await repository.append(cid, [user("q"), bot("a")])
    generation = (await repository.get_meta(cid)).generation
    assert generation
    await repository.append(cid, [user("q2"), bot("a2")], state=CONSULTING)
    await repository.set_state(cid, FINISHED)
    await repository.add_fact(cid, "likes tea", 10)
    assert (await repository.get_meta(cid)).generation == generation
    assert (await repository.context(cid, 5)).meta.generation == generation
    await repository.reset(cid)
    await repository.append(cid, [user("new life")])
    assert (await repository.get_meta(cid)).generation not in ("", generation)


async def test_a_summary_made_before_a_reset_is_dropped_and_never_comes_back(
    repository: ChatRepository,
) -> None:
    cid = tg(5)
    for i in range(10):
        await repository.append(cid, [user(f"q{i}"), bot(f"a{i}")])
    # The summarizer reads the conversation, then a /reset lands while the model works.
    stale = (await repository.get_meta(cid)).generation
    await repository.reset(cid)
    await repository.append(cid, [user("new life")])
    assert await repository.save_summary(cid, "summary of the old life", 1, 20, stale) is False
    assert await repository.get_summary(cid) == ""
    for i in range(3):
        await repository.append(cid, [user(f"later {i}"), bot("ok")])
    ctx = await repository.context(cid, 50)
    assert ctx.summary == ""
    assert (ctx.meta.summarized_upto, ctx.meta.summaries_made) == (0, 0)
    assert ctx.meta.unsummarized == 7
    # A summary of this life is kept as usual.
    assert await summarize(repository, cid, "summary of the new life", 1, 7) is True
    assert await repository.get_summary(cid) == "summary of the new life"


async def test_a_summary_for_a_conversation_reset_to_nothing_is_dropped(
    repository: ChatRepository,
) -> None:
    cid = tg(5)
    await repository.append(cid, [user("q"), bot("a")])
    stale = (await repository.get_meta(cid)).generation
    await repository.reset(cid)
    assert await repository.save_summary(cid, "ghost", 1, 2, stale) is False
    assert await repository.get_summary(cid) == ""
    assert await repository.conversations("tg") == []


# -- conversation state ------------------------------------------------------------------------


async def test_a_chats_own_settings_are_kept(repository: ChatRepository) -> None:
    cid = tg(6)
    own = ConversationState(
        language="de",
        model="test/other",
        persona="Be brief.",
        timezone="Europe/Berlin",
        search_off=True,
    )
    await repository.set_state(cid, own)
    assert (await repository.get_meta(cid)).state == own
    await repository.append(cid, [user("q"), bot("a")])  # a turn that does not change it
    kept = (await repository.get_meta(cid)).state
    assert (kept.timezone, kept.search_off, kept.searches) == ("Europe/Berlin", True, False)
    assert ConversationState.from_dict(own.to_dict()) == own
    assert "timezone" not in ConversationState().to_dict()  # None: TIMEZONE, not stored
    assert "search_off" not in ConversationState().to_dict()  # the model may search


async def test_state_is_written_with_its_turn_and_read_back(repository: ChatRepository) -> None:
    session = SessionConfig(
        model="test/other",
        system_prompt="Be brief.",
        max_tokens=300,
        output_format="json",
        output_schema={"type": "object", "properties": {"plan": {"type": "string"}}},
        disable_search=True,
    )
    state = ConversationState(
        mode="consultation",
        round=1,
        max_rounds=4,
        initial_request="Plan my trip to Kazan",
        session=session,
    )
    stored = await repository.append(SESSION, [user("Plan my trip"), bot("How long?")], state)
    assert [m.seq for m in stored] == [1, 2]
    assert (await repository.get_meta(SESSION)).state == state
    ctx = await repository.context(SESSION, 10)
    assert ctx.meta.state == state
    assert [m.content for m in ctx.history] == ["Plan my trip", "How long?"]

    # A turn that does not change the state keeps it.
    await repository.append(SESSION, [user("a week"), bot("noted")])
    assert (await repository.get_meta(SESSION)).state == state
    # The next turn that does change it replaces it.
    await repository.append(SESSION, [user("go on"), bot("the full plan")], FINISHED)
    assert (await repository.get_meta(SESSION)).state == FINISHED
    assert (await repository.context(SESSION, 10)).meta.state == FINISHED
    assert (await repository.get_meta(SESSION)).messages_total == 6


async def test_a_failed_write_changes_no_state(repository: ChatRepository) -> None:
    cid = tg(4)
    await repository.append(cid, [user("q"), bot("a")], CONSULTING)
    # An append of nothing is no turn: it stores nothing, and its state is not kept either.
    assert await repository.append(cid, [], FINISHED) == []
    meta = await repository.get_meta(cid)
    assert (meta.state, meta.messages_total) == (CONSULTING, 2)
    # Nor does it bring a conversation into existence.
    assert await repository.append(tg(40), [], FINISHED) == []
    assert (await repository.get_meta(tg(40))).state == ConversationState()
    assert await repository.conversations("tg") == [cid]


async def test_set_state_changes_the_state_outside_a_turn(repository: ChatRepository) -> None:
    cid = tg(4)
    await repository.append(cid, [user("plan a trip"), bot("how long?")], CONSULTING)
    cancelled = ConversationState()
    meta = await repository.set_state(cid, cancelled)
    assert meta.state == cancelled
    # It wins over the state the last turn carried, and stores no message.
    assert (await repository.get_meta(cid)).state == cancelled
    ctx = await repository.context(cid, 10)
    assert ctx.meta.state == cancelled
    assert [m.content for m in ctx.history] == ["plan a trip", "how long?"]
    assert ctx.meta.messages_total == 2
    # Later turns keep it until one changes it.
    await repository.append(cid, [user("hi"), bot("hello")])
    assert (await repository.get_meta(cid)).state == cancelled
    await repository.append(cid, [user("again"), bot("round 1")], CONSULTING)
    assert (await repository.get_meta(cid)).state == CONSULTING


async def test_set_state_on_a_new_conversation(repository: ChatRepository) -> None:
    meta = await repository.set_state(SESSION, CONSULTING)
    assert meta.state == CONSULTING
    assert (await repository.get_meta(SESSION)).state == CONSULTING
    stored = await repository.append(SESSION, [user("first")])
    assert stored[0].seq == 1
    assert (await repository.context(SESSION, 5)).meta.state == CONSULTING


async def test_reset_forgets_everything(repository: ChatRepository) -> None:
    cid = tg(5)
    await repository.append(cid, [user("remember me"), bot("sure")], CONSULTING)
    assert await summarize(repository, cid, "a summary", 1, 2)
    await repository.add_fact(cid, "likes tea", 10)
    await repository.reset(cid)
    assert await repository.tail(cid, 10) == []
    assert await repository.get_summary(cid) == ""
    assert await repository.get_facts(cid) == []
    meta = await repository.get_meta(cid)
    assert (meta.messages_total, meta.summarized_upto, meta.summaries_made) == (0, 0, 0)
    assert meta.state == ConversationState()
    stored = await repository.append(cid, [user("fresh")])
    assert stored[0].seq == 1
    ctx = await repository.context(cid, 10)
    assert ctx.meta.state == ConversationState()
    assert [m.content for m in ctx.history] == ["fresh"]


async def test_reset_after_set_state_forgets_the_state(repository: ChatRepository) -> None:
    await repository.set_state(SESSION, CONSULTING)
    await repository.reset(SESSION)
    assert (await repository.get_meta(SESSION)).state == ConversationState()
    assert await repository.conversations("api") == []


# -- attachments and files -------------------------------------------------------------------


async def test_attachments_round_trip_as_metadata(repository: ChatRepository) -> None:
    key = new_file_key("jpg")
    photo = Attachment(kind="image", file=key, mime="image/jpeg", size=1234, width=64, height=48)
    voice = Attachment(kind="voice", mime="audio/ogg", size=999, seconds=2.5)
    doc = Attachment(kind="document", file=new_file_key("txt"), name="a.pdf", pages=2, chars=10)
    await repository.append(ONE, [user("look", attachments=(photo, voice, doc)), bot("nice")])
    stored = await repository.tail(ONE, 10)
    assert stored[0].attachments == (photo, voice, doc)
    assert stored[1].attachments == ()
    streamed = [m.attachments async for m in repository.iter_messages(ONE)]
    assert streamed[0] == (photo, voice, doc)


async def test_an_answers_sources_are_kept_with_it(repository: ChatRepository) -> None:
    """The pages a web search found, with the answer that cites them, and the words its
    delivery shows above them: the same from every read, so a resend shows the same links."""
    sources = (Source("https://example.org/visit", "Hours – «Museum»"), Source("https://x.y/z"))
    answer = Message(
        role="assistant",
        content="Open 10 to 18.",
        sources=sources,
        delivery=Delivery(sources_head="Sources:"),
    )
    await repository.append(ONE, [user("When is it open?"), answer])
    [question, kept] = await repository.tail(ONE, 10)
    assert (question.sources, kept.sources) == ((), sources)
    assert kept.delivery == Delivery(sources_head="Sources:")
    assert [m.sources async for m in repository.iter_messages(ONE)] == [(), sources]
    assert (await repository.context(ONE, 10)).history[-1].sources == sources


async def test_files_are_kept_per_conversation(repository: ChatRepository) -> None:
    key, other = new_file_key("jpg"), new_file_key("txt")
    data = bytes(range(256)) * 40  # binary, every byte value
    await repository.put_file(ONE, key, data)
    await repository.put_file(ONE, other, "текст".encode())
    assert await repository.get_file(ONE, key) == data
    assert await repository.get_file(ONE, other) == "текст".encode()
    assert await repository.get_file(GROUP, key) is None  # another conversation's
    assert await repository.get_file(SESSION, key) is None
    assert await repository.get_file(ONE, new_file_key("jpg")) is None  # never put
    await repository.put_file(ONE, key, b"again")
    assert await repository.get_file(ONE, key) == b"again"


async def test_reset_removes_the_files(repository: ChatRepository) -> None:
    key = new_file_key("png")
    await repository.append(SESSION, [user("q"), bot("a")])
    await repository.put_file(SESSION, key, b"png bytes")
    await repository.put_file(GROUP, key, b"kept")
    await repository.reset(SESSION)
    assert await repository.get_file(SESSION, key) is None
    assert await repository.get_file(GROUP, key) == b"kept"


@pytest.mark.parametrize("key", ["../meta.json", "x.jpg", "", "A" * 32 + ".jpg", "a/b"])
async def test_a_file_key_not_made_by_membot_is_refused(
    repository: ChatRepository, key: str
) -> None:
    with pytest.raises(InvalidFileKey):
        await repository.put_file(ONE, key, b"x")
    with pytest.raises(InvalidFileKey):
        await repository.get_file(ONE, key)


# -- streaming ---------------------------------------------------------------------------------


async def test_iter_messages_streams_everything(repository: ChatRepository) -> None:
    cid = tg(6)
    for i in range(500):
        await repository.append(cid, [user(f"m{i}")])
    seen = [m.content async for m in repository.iter_messages(cid)]
    assert seen == [f"m{i}" for i in range(500)]
    assert [m async for m in repository.iter_messages(tg(12345))] == []


async def test_iter_messages_after_seq_resumes_where_asked(repository: ChatRepository) -> None:
    cid = tg(6)
    # Long lines push the archive past several read blocks, so resuming cannot be a lucky scan.
    # Appended a hundred at a time: the same archive as one by one, in 30 writes, not 3,000.
    for first in range(1, 3001, 100):
        await repository.append(
            cid, [user(f"m{i} " + "x" * 200) for i in range(first, first + 100)]
        )
    for after in (0, 1, 1499, 2999, 3000, 5000):
        seen = [m.seq async for m in repository.iter_messages(cid, after_seq=after)]
        assert seen == list(range(after + 1, 3001)), after


# -- facts -------------------------------------------------------------------------------------


async def test_facts_are_kept_deduplicated_and_removed(repository: ChatRepository) -> None:
    cid = tg(3)
    assert await repository.get_facts(cid) == []
    assert await repository.add_fact(cid, "My cat is called Tofu", 10) is True
    assert await repository.add_fact(cid, "I live in Kraków", 10) is True
    assert await repository.add_fact(cid, "my cat is called tofu", 10) is False
    assert await repository.get_facts(cid) == ["My cat is called Tofu", "I live in Kraków"]
    assert (await repository.context(cid, 5)).facts == [
        "My cat is called Tofu",
        "I live in Kraków",
    ]
    assert await repository.remove_facts(cid, ["My cat is called Tofu", "absent"]) == [
        "My cat is called Tofu"
    ]
    assert await repository.get_facts(cid) == ["I live in Kraków"]
    assert await repository.get_facts(tg(4)) == []


async def test_facts_are_capped(repository: ChatRepository) -> None:
    cid = tg(3)
    assert await repository.add_fact(cid, "one", 2) is True
    assert await repository.add_fact(cid, "two", 2) is True
    assert await repository.add_fact(cid, "three", 2) is None  # full
    # Full, but this one is kept already: the user hears that, not "forget some first".
    assert await repository.add_fact(cid, "ONE", 2) is False
    assert await repository.get_facts(cid) == ["one", "two"]
    assert await repository.remove_facts(cid, ["one"]) == ["one"]
    assert await repository.add_fact(cid, "three", 2) is True
    assert await repository.get_facts(cid) == ["two", "three"]


async def test_the_fact_cap_holds_under_concurrent_adds(repository: ChatRepository) -> None:
    cid = tg(3)
    results = await asyncio.gather(
        *(repository.add_fact(cid, f"fact {i}", 3) for i in range(10)),
        *(repository.add_fact(cid, "FACT 0", 3) for _ in range(3)),
    )
    assert results.count(True) == 3
    assert len(await repository.get_facts(cid)) == 3
    assert set(results) <= {True, False, None}


# -- concurrency and ids ---------------------------------------------------------------------


async def test_concurrent_appends_keep_sequence_unique(repository: ChatRepository) -> None:
    cid = tg(8)
    await asyncio.gather(
        *(repository.append(cid, [user(f"u{i}"), bot(f"b{i}")]) for i in range(25))
    )
    msgs = await repository.tail(cid, 100)
    assert [m.seq for m in msgs] == list(range(1, 51))
    # Each append is one unit: a user line is always followed by its own answer.
    for q, a in zip(msgs[::2], msgs[1::2], strict=True):
        assert q.content[1:] == a.content[1:]


BAD_IDS: list[tuple[str, Callable[[], ConversationId]]] = [
    ("tg-path", lambda: ConversationId("tg", "../etc")),
    ("tg-slash", lambda: ConversationId("tg", "1/../../x")),
    ("tg-zero", lambda: ConversationId("tg", "0")),
    ("tg-newline", lambda: ConversationId("tg", "1\n")),
    ("api-not-uuid", lambda: ConversationId("api", "not-a-uuid")),
    ("api-path", lambda: ConversationId.api("../../etc/passwd")),
    ("namespace", lambda: ConversationId("x", "1")),
    ("namespace-path", lambda: ConversationId("..", "1")),
    ("telegram-bool", lambda: ConversationId.telegram(True)),
    ("telegram-float", lambda: ConversationId.telegram(1.5)),  # type: ignore[arg-type]
    ("telegram-str", lambda: ConversationId.telegram("1")),  # type: ignore[arg-type]
    ("parse-path", lambda: ConversationId.parse("../etc")),
    ("parse-api-path", lambda: ConversationId.parse("api:../etc")),
    ("parse-namespace", lambda: ConversationId.parse("x:1")),
]


@pytest.mark.parametrize("build", [b for _, b in BAD_IDS], ids=[name for name, _ in BAD_IDS])
def test_invalid_ids_cannot_be_built(build: Callable[[], ConversationId]) -> None:
    with pytest.raises(InvalidConversationId):
        build()


async def test_nothing_outside_data_dir_is_ever_touched(tmp_path: Path) -> None:
    data = tmp_path / "data"
    repo = FileRepository(data)
    cids = [tg(5), tg(-100123), SESSION, ConversationId.parse("api:" + str(OTHER_SESSION.key))]
    for cid in cids:
        await repo.append(cid, [user("q"), bot("a")], CONSULTING)
        assert await summarize(repo, cid, "s", 1, 2)
        await repo.add_fact(cid, "a fact", 10)
        await repo.set_state(cid, FINISHED)
        await repo.put_file(cid, new_file_key("jpg"), b"image")
    for _, build in BAD_IDS:
        with pytest.raises(InvalidConversationId):
            await repo.append(build(), [user("escape")])
    await repo.reset(OTHER_SESSION)
    assert [p.name for p in tmp_path.iterdir()] == ["data"]
    dirs = sorted(str(p.relative_to(data)) for p in data.rglob("*") if p.is_dir())
    session = f"api/{SESSION.key}"
    expected = ["-100123", "5", "api", session, "-100123/files", "5/files", f"{session}/files"]
    assert dirs == sorted(expected)


async def test_an_archive_line_without_attachments_reads_as_before(tmp_path: Path) -> None:
    """Archives written before attachments existed; and a line never holds file bytes."""
    repo = FileRepository(tmp_path)
    (tmp_path / "7").mkdir()
    line = '{"seq":1,"ts":"2025-01-01T00:00:00.000Z","role":"user","content":"old"}\n'
    (tmp_path / "7" / "messages.txt").write_text(line)
    [old] = await repo.tail(tg(7), 5)
    assert (old.content, old.attachments) == ("old", ())
    key = new_file_key("jpg")
    photo = Attachment(kind="image", file=key, mime="image/jpeg", size=5)
    await repo.put_file(tg(7), key, b"\xff\xd8\xff\xe0J")
    await repo.append(tg(7), [user("a photo", attachments=(photo,))])
    archive = (tmp_path / "7" / "messages.txt").read_text()
    assert f'"file":"{key}"' in archive and "base64" not in archive and "/9j/" not in archive
    assert (tmp_path / "7" / "files" / key).read_bytes() == b"\xff\xd8\xff\xe0J"


async def test_the_stopped_mark_is_written_only_when_set(tmp_path: Path) -> None:
    repo = FileRepository(tmp_path)
    await repo.append(tg(7), [user("q"), Message(role="assistant", content="a", stopped=True)])
    lines = (tmp_path / "7" / "messages.txt").read_text().splitlines()
    assert ['"stopped"' in line for line in lines] == [False, True]


# -- the file backend: a state rides on its turn ---------------------------------------------


async def test_a_turn_whose_meta_write_was_lost_keeps_its_state(tmp_path: Path) -> None:
    repo = FileRepository(tmp_path)
    cid = tg(11)
    await repo.append(cid, [user("hi"), bot("hello")])
    meta_path = tmp_path / "11" / "meta.json"
    before = meta_path.read_bytes()
    await repo.append(cid, [user("plan my trip"), bot("how long?")], CONSULTING)
    meta_path.write_bytes(before)  # the process died between the append and the meta write
    assert (await repo.get_meta(cid)).state == CONSULTING
    ctx = await FileRepository(tmp_path).context(cid, 10)
    assert ctx.meta.state == CONSULTING
    assert ctx.meta.messages_total == 4
    # The next round's turn carries on from it.
    await repo.append(cid, [user("a week"), bot("the plan")], FINISHED)
    assert (await repo.get_meta(cid)).state == FINISHED


async def test_set_state_wins_over_the_last_turn_after_a_restart(tmp_path: Path) -> None:
    repo = FileRepository(tmp_path)
    cid = tg(11)
    await repo.append(cid, [user("plan my trip"), bot("how long?")], CONSULTING)
    await repo.set_state(cid, ConversationState())  # /cancel
    assert (await repo.get_meta(cid)).state == ConversationState()
    assert (await FileRepository(tmp_path).context(cid, 5)).meta.state == ConversationState()


async def test_a_lost_meta_write_survives_the_next_turn(tmp_path: Path) -> None:
    repo = FileRepository(tmp_path)
    cid = tg(11)
    await repo.append(cid, [user("plan my trip"), bot("how long?")], CONSULTING)
    meta_path = tmp_path / "11" / "meta.json"
    before = meta_path.read_bytes()
    # The final round ends the consultation; its meta write is lost in a crash.
    await repo.append(cid, [user("a week"), bot("the full plan")], FINISHED)
    meta_path.write_bytes(before)
    assert (await repo.get_meta(cid)).state == FINISHED  # read back from the turn's line
    # After the restart, the next message is a plain chat turn: no state change.
    await repo.append(cid, [user("thanks!"), bot("you're welcome")])
    assert (await repo.get_meta(cid)).state == FINISHED


async def test_a_turn_that_could_not_be_written_changes_no_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = FileRepository(tmp_path)
    cid = tg(12)
    await repo.append(cid, [user("plan my trip"), bot("how long?")], CONSULTING)

    def disk_full(fd: int, data: bytes) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(files_module, "write_all", disk_full)
    with pytest.raises(OSError):
        await repo.append(cid, [user("a week"), bot("the plan")], FINISHED)
    monkeypatch.undo()
    for reader in (repo, FileRepository(tmp_path)):
        meta = await reader.get_meta(cid)
        assert (meta.state, meta.messages_total) == (CONSULTING, 2)
        assert [m.content for m in await reader.tail(cid, 10)] == ["plan my trip", "how long?"]


# -- delivery marks: answers stored before they are sent -------------------------------------


def answer(text: str, **kw: object) -> Message:
    return Message(role="assistant", content=text, delivery=Delivery(**kw))  # type: ignore[arg-type]


async def test_an_answer_to_send_is_marked_until_delivered(repository: ChatRepository) -> None:
    """The append that stores an answer with its delivery leaves the conversation a mark,
    listed at start-up; progress of its parts is kept; delivered, the mark is gone."""
    cid = tg(41)
    how = {"reply_to": 7, "thread": 3, "quote": "heard\u2028this", "suffix": "\n\n(stopped)"}
    await repository.append(cid, [user("q1"), answer("a1", **how)])
    assert await repository.undelivered("tg") == [cid]
    assert await repository.delivery_mark(cid) == DeliveryMark(after=0)
    [stored] = [m async for m in repository.iter_messages(cid, 1)]
    assert stored.delivery == Delivery(**how)  # type: ignore[arg-type]
    # Its first message's request is out: from then on it counts as sent.
    await repository.mark_delivered(cid, 2, 0, sending=True)
    mark = await repository.delivery_mark(cid)
    assert mark == DeliveryMark(after=0, seq=2, parts=0, sending=True)
    assert (mark.sent(2), mark.sent(4)) == (1, 0)
    # Refused (a flood-wait): not sent after all.
    await repository.mark_delivered(cid, 2, 0)
    assert await repository.delivery_mark(cid) == DeliveryMark(after=0, seq=2, parts=0)
    await repository.mark_delivered(cid, 2, 1, sending=True)
    assert await repository.delivery_mark(cid) == DeliveryMark(
        after=0, seq=2, parts=1, sending=True
    )
    await repository.mark_delivered(cid, 2)
    assert await repository.delivery_mark(cid) is None
    assert await repository.undelivered("tg") == []


async def test_a_resend_marks_by_the_seqs_it_reads(repository: ChatRepository) -> None:
    """An answer whose sending failed after its first request went out (marked by the seq
    its append returned) is sent again by a resend: the mark read, the answer found by the
    seq read, its marks by that seq. Delivered, nothing is left to send (memory/outage/
    keeps this across an outage: tests/unit/memory/test_outage.py)."""
    cid = tg(44)
    done = await repository.append(cid, [user("q1"), answer("a1")])
    await repository.mark_delivered(cid, done[-1].seq)
    stored = await repository.append(cid, [user("q2"), answer("a2")])
    await repository.mark_delivered(cid, stored[-1].seq, 0, sending=True)
    await repository.mark_delivered(cid, stored[-1].seq, 0)  # refused: not sent after all
    mark = await repository.delivery_mark(cid)
    assert mark == DeliveryMark(after=2, seq=4, parts=0)
    [again] = [m async for m in repository.iter_messages(cid, mark.after) if m.delivery]
    assert (again.seq, again.content) == (4, "a2")
    await repository.mark_delivered(cid, again.seq, mark.sent(again.seq), sending=True)
    assert await repository.delivery_mark(cid) == DeliveryMark(2, seq=4, parts=0, sending=True)
    await repository.mark_delivered(cid, again.seq)
    assert await repository.delivery_mark(cid) is None
    assert await repository.undelivered("tg") == []


async def test_the_mark_keeps_the_oldest_answer_unsent(repository: ChatRepository) -> None:
    """Two answers unsent: the mark stays at the first until it is delivered, then moves
    to the second; a later append does not move it."""
    cid = tg(42)
    await repository.append(cid, [user("q1"), answer("a1")])
    await repository.append(cid, [user("q2"), answer("a2")])
    assert await repository.delivery_mark(cid) == DeliveryMark(after=0)
    await repository.mark_delivered(cid, 2)
    assert await repository.delivery_mark(cid) == DeliveryMark(after=2)
    assert await repository.undelivered("tg") == [cid]
    await repository.mark_delivered(cid, 4)
    assert await repository.delivery_mark(cid) is None
    # A new answer after everything was delivered: marked from where the archive ends.
    await repository.append(cid, [user("q3"), answer("a3")])
    assert await repository.delivery_mark(cid) == DeliveryMark(after=4)


async def test_turns_without_an_answer_to_send_leave_no_mark(repository: ChatRepository) -> None:
    await repository.append(tg(43), [user("q"), bot("a")])
    await repository.append(SESSION, [user("q"), bot("a")])
    assert await repository.undelivered("tg") == []
    assert await repository.undelivered("api") == []
    assert await repository.delivery_mark(tg(43)) is None
    await repository.mark_delivered(tg(43), 2)  # nothing to clear: nothing happens
    await repository.mark_delivered(tg(44), 2, 3, sending=True)
    assert await repository.delivery_mark(tg(43)) is None
    assert await repository.delivery_mark(tg(44)) is None
    assert await repository.undelivered("tg") == []


async def test_turns_and_forgetting_after_delivery_leave_nothing_to_send(
    repository: ChatRepository,
) -> None:
    """Every answer delivered: a turn with nothing to send, and a message forgotten, leave
    nothing to send; the next answer is marked from where the archive ends."""
    cid = tg(46)
    await repository.append(cid, [user("q1"), answer("a1")])
    await repository.mark_delivered(cid, 2)
    await repository.append(cid, [user("q2"), bot("a2")])
    assert await repository.delivery_mark(cid) is None
    await repository.forget(cid, [1], [])
    assert await repository.delivery_mark(cid) is None
    assert await repository.undelivered("tg") == []
    await repository.append(cid, [user("q3"), answer("a3")])
    assert await repository.delivery_mark(cid) == DeliveryMark(after=4)


async def test_marks_are_per_conversation_and_go_with_a_reset(repository: ChatRepository) -> None:
    await repository.append(ONE, [user("q"), answer("a")])
    await repository.append(GROUP, [user("q"), answer("a", reply_to=1)])
    assert await repository.undelivered("tg") == sorted([ONE, GROUP])
    await repository.mark_delivered(ONE, 2)
    assert await repository.undelivered("tg") == [GROUP]
    await repository.reset(GROUP)
    assert await repository.undelivered("tg") == []
    assert await repository.delivery_mark(GROUP) is None


LINE_BREAKS = "a\u2028b\u2029c\x85d\x0be\x0cf\x1cg\x1dh\x1ei\r\nj"


async def test_line_breaks_of_every_kind_round_trip(repository: ChatRepository) -> None:
    await repository.append(tg(45), [user(LINE_BREAKS), bot(LINE_BREAKS)])
    assert [m.content for m in await repository.tail(tg(45), 2)] == [LINE_BREAKS] * 2
    assert [m.content async for m in repository.iter_messages(tg(45))] == [LINE_BREAKS] * 2
