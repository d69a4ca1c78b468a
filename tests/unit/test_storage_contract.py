"""The storage contract, run over every backend: what the agent relies on, nothing more.

A new backend (Redis is next) joins by adding itself to the `repository` fixture.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from membot.memory import ChatRepository, FileRepository, Message


@pytest.fixture(params=["files"])
async def repository(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[ChatRepository]:
    repo: ChatRepository
    if request.param == "files":
        repo = FileRepository(tmp_path / "data")
    else:  # pragma: no cover - filled in as backends arrive
        raise AssertionError(request.param)
    yield repo
    await repo.close()


def user(text: str, **kw: object) -> Message:
    return Message(role="user", content=text, **kw)  # type: ignore[arg-type]


def bot(text: str) -> Message:
    return Message(role="assistant", content=text)


async def test_unknown_chat_is_empty(repository: ChatRepository) -> None:
    assert await repository.tail(1, 20) == []
    assert await repository.get_summary(1) == ""
    meta = await repository.get_meta(1)
    assert (meta.messages_total, meta.summarized_upto) == (0, 0)
    ctx = await repository.context(1, 20)
    assert (ctx.history, ctx.summary) == ([], "")


async def test_append_assigns_sequence_and_tail_returns_last_in_order(
    repository: ChatRepository,
) -> None:
    stored = await repository.append(7, [user("q1", user_id=5, name="Ann"), bot("a1")])
    assert [m.seq for m in stored] == [1, 2]
    for i in range(2, 31):
        await repository.append(7, [user(f"q{i}"), bot(f"a{i}")])
    tail = await repository.tail(7, 5)
    assert [m.content for m in tail] == ["a28", "q29", "a29", "q30", "a30"]
    assert [m.seq for m in tail] == [56, 57, 58, 59, 60]
    first = (await repository.tail(7, 60))[0]
    assert (first.content, first.user_id, first.name) == ("q1", 5, "Ann")
    assert (await repository.get_meta(7)).messages_total == 60


async def test_tail_larger_than_history(repository: ChatRepository) -> None:
    await repository.append(1, [user("only")])
    assert [m.content for m in await repository.tail(1, 100)] == ["only"]


async def test_unicode_and_newlines_round_trip(repository: ChatRepository) -> None:
    text = 'строка 1\nline "2" \\ 🎉 <b>&amp;</b>\n\n\tend'
    await repository.append(3, [user(text)])
    assert (await repository.tail(3, 1))[0].content == text


async def test_tool_calls_round_trip(repository: ChatRepository) -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    await repository.append(
        3,
        [
            user("hi"),
            Message(role="assistant", content="", tool_calls=(call,)),
            Message(role="tool", content="42", tool_call_id="c1"),
            bot("it is 42"),
        ],
    )
    msgs = await repository.tail(3, 4)
    assert msgs[1].tool_calls == (call,)
    assert msgs[2].tool_call_id == "c1"


async def test_chats_are_isolated(repository: ChatRepository) -> None:
    await repository.append(1, [user("secret of one")])
    await repository.append(-1002, [user("group talk")])
    await repository.save_summary(1, "one's summary", 1, 1)
    assert [m.content for m in await repository.tail(-1002, 10)] == ["group talk"]
    assert await repository.get_summary(-1002) == ""


async def test_summary_save_and_meta(repository: ChatRepository) -> None:
    for i in range(10):
        await repository.append(9, [user(f"q{i}"), bot(f"a{i}")])
    await repository.save_summary(9, "first summary", 1, 20)
    meta = await repository.get_meta(9)
    assert (meta.messages_total, meta.summarized_upto, meta.summaries_made) == (20, 20, 1)
    assert meta.unsummarized == 0
    await repository.append(9, [user("more"), bot("ok")])
    await repository.save_summary(9, "second summary", 21, 22)
    ctx = await repository.context(9, 3)
    assert ctx.summary == "second summary"
    assert ctx.meta.summarized_upto == 22
    assert ctx.meta.summaries_made == 2
    assert [m.content for m in ctx.history] == ["a9", "more", "ok"]


async def test_reset_forgets_everything(repository: ChatRepository) -> None:
    await repository.append(5, [user("remember me"), bot("sure")])
    await repository.save_summary(5, "a summary", 1, 2)
    await repository.update_settings(5, lang="en")
    await repository.add_fact(5, "likes tea")
    await repository.reset(5)
    assert await repository.tail(5, 10) == []
    assert await repository.get_summary(5) == ""
    assert await repository.get_facts(5) == []
    meta = await repository.get_meta(5)
    assert (meta.messages_total, meta.summarized_upto, meta.settings) == (0, 0, {})
    stored = await repository.append(5, [user("fresh")])
    assert stored[0].seq == 1


async def test_summary_made_before_a_reset_is_dropped(repository: ChatRepository) -> None:
    for i in range(10):
        await repository.append(5, [user(f"q{i}"), bot(f"a{i}")])
    await repository.reset(5)
    await repository.append(5, [user("new life")])
    await repository.save_summary(5, "summary of the old life", 1, 20)
    assert await repository.get_summary(5) == ""


async def test_settings_merge(repository: ChatRepository) -> None:
    await repository.update_settings(4, tz="Europe/Warsaw", mode="short")
    meta = await repository.update_settings(4, mode=None)
    assert meta.settings == {"tz": "Europe/Warsaw"}
    assert (await repository.get_meta(4)).settings == {"tz": "Europe/Warsaw"}


async def test_iter_messages_streams_everything(repository: ChatRepository) -> None:
    for i in range(500):
        await repository.append(6, [user(f"m{i}")])
    seen = [m.content async for m in repository.iter_messages(6)]
    assert seen == [f"m{i}" for i in range(500)]
    assert [m async for m in repository.iter_messages(12345)] == []


async def test_iter_messages_after_seq_resumes_where_asked(repository: ChatRepository) -> None:
    # Long lines push the archive past several read blocks, so resuming cannot be a lucky scan.
    for i in range(1, 3001):
        await repository.append(6, [user(f"m{i} " + "x" * 200)])
    for after in (0, 1, 1499, 2999, 3000, 5000):
        seen = [m.seq async for m in repository.iter_messages(6, after_seq=after)]
        assert seen == list(range(after + 1, 3001)), after


async def test_facts_are_kept_deduplicated_and_removed(repository: ChatRepository) -> None:
    assert await repository.get_facts(3) == []
    assert await repository.add_fact(3, "My cat is called Tofu")
    assert await repository.add_fact(3, "I live in Kraków")
    assert not await repository.add_fact(3, "my cat is called tofu")
    assert await repository.get_facts(3) == ["My cat is called Tofu", "I live in Kraków"]
    assert (await repository.context(3, 5)).facts == ["My cat is called Tofu", "I live in Kraków"]
    assert await repository.remove_facts(3, ["My cat is called Tofu", "absent"]) == [
        "My cat is called Tofu"
    ]
    assert await repository.get_facts(3) == ["I live in Kraków"]
    assert await repository.get_facts(4) == []


async def test_concurrent_appends_keep_sequence_unique(repository: ChatRepository) -> None:
    await asyncio.gather(*(repository.append(8, [user(f"u{i}"), bot(f"b{i}")]) for i in range(25)))
    msgs = await repository.tail(8, 100)
    assert [m.seq for m in msgs] == list(range(1, 51))
    # Each append is one unit: a user line is always followed by its own answer.
    for q, a in zip(msgs[::2], msgs[1::2], strict=True):
        assert q.content[1:] == a.content[1:]


@pytest.mark.parametrize("bad", [1.5, "1", "../etc", True, None])
async def test_chat_id_must_be_an_integer(repository: ChatRepository, bad: object) -> None:
    with pytest.raises(TypeError):
        await repository.append(bad, [user("x")])  # type: ignore[arg-type]
