"""Citations of the archive: the `[#id]` markers an answer writes after what search_history
showed it. No marker reaches a reader (whole, streamed however cut, stopped midway); only
ids the turn's searches returned become citations, each once, with the cited message's date,
author, Telegram id and the part of it the answer rests on."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from membot.core.agent import Agent
from membot.core.citing import MAX_CITATIONS, MarkerFilter, Recalled, cite, strip_markers
from membot.core.prompt import PromptBuilder
from membot.core.summarizer import Summarizer
from membot.core.tools.builtin import builtin
from membot.core.turn import Incoming
from membot.ids import ConversationId
from membot.llm.tools import ToolExecutor, make_mode
from membot.memory import MemoryRepository
from membot.memory.contract.attachment import Attachment
from membot.memory.contract.citation import QUOTE_CHARS, Citation, pick_quote
from membot.memory.contract.models import Message
from membot.search import HistorySearch
from membot.search.excerpts import Excerpt, Line
from membot.search.hits import SearchHit
from membot.tasks import TaskSupervisor
from tests.scripted import (
    RecordingSink,
    Reply,
    ScriptedModel,
    StoppableSink,
    StreamingSink,
    tool_call,
)

CHAT = ConversationId.telegram(4711)
MARCH = datetime(2025, 3, 3, 9, 30, tzinfo=UTC)

# -- markers ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "clean"),
    [
        ("You moved to Lisbon in March [#12].", "You moved to Lisbon in March."),
        ("Twice [#3][#4] and a list [#5, #6] or [#7,8].", "Twice and a list or."),
        ("On its own line.\n[#12]\nNext.", "On its own line.\nNext."),
        # Not markers: shown as written.
        ("[#abc] [#] [12] [# 12] #12 [#12", "[#abc] [#] [12] [# 12] #12 [#12"),
        ("no markers at all", "no markers at all"),
    ],
)
def test_markers_are_taken_out_with_the_space_before_them(text: str, clean: str) -> None:
    assert strip_markers(text) == clean


def test_a_stopped_answer_loses_a_marker_begun_at_its_end() -> None:
    assert strip_markers("You moved in March [#1", finished=False) == "You moved in March"
    assert strip_markers("You moved in March [", finished=False) == "You moved in March"
    assert strip_markers("Costs [#abc", finished=False) == "Costs [#abc"


TEXTS = [
    "You moved to Lisbon in March [#12]. Your cat is Tom [#3, #44].",
    "[#1] starts it, ends it [#2]",
    "Odd [#x] and [1] and a real one [#7]\n\nMore [#8][#9].",
    "Unfinished at the end [#12",
]


@pytest.mark.parametrize("text", TEXTS)
def test_a_stream_cut_anywhere_shows_no_marker_and_adds_up_to_the_answer(text: str) -> None:
    clean = strip_markers(text)
    for cuts in [(i,) for i in range(len(text))] + [(i, i + 2) for i in range(len(text) - 2)]:
        pieces = [text[a:b] for a, b in zip((0, *cuts), (*cuts, len(text)), strict=True)]
        markers, shown = MarkerFilter(), ""
        for piece in pieces:
            shown += markers.feed(piece)
            # Every draft is the beginning of the answer as it will be: no "[#12" in it.
            assert clean.startswith(shown), (pieces, shown)
        assert shown + markers.flush() == clean


def test_pieces_of_one_character_each() -> None:
    markers = MarkerFilter()
    shown = [markers.feed(c) for c in "Lisbon [#12]."]
    assert "".join(shown) + markers.flush() == "Lisbon."
    assert not any("[" in piece or "#" in piece for piece in shown)


# -- what a citation says -------------------------------------------------------------------


def test_a_short_message_is_quoted_whole_a_long_one_by_its_sentence() -> None:
    assert pick_quote("  I moved to Lisbon.  ") == "I moved to Lisbon."
    long = (
        "We talked about many things that day. " * 4
        + "In March I moved to Lisbon with my cat Tom! "
        + "The weather was fine and the flat was small. " * 3
    )
    quote = pick_quote(long, "You moved to Lisbon in March")
    assert quote == "In March I moved to Lisbon with my cat Tom!" and quote in long
    cut = pick_quote("word " * 100 + ".", "")
    assert len(cut) <= QUOTE_CHARS and cut in "word " * 100


def test_a_citation_keeps_through_its_json_line() -> None:
    citation = Citation(12, MARCH, "Anna", 'I said "hi"\n', "user", 501, verbatim=True)
    message = Message(role="assistant", content="Hi.", citations=(citation,))
    again = Message.from_json(message.to_json())
    assert again.citations == (citation,)
    assert Message.from_json(Message(role="assistant", content="a").to_json()).citations == ()


def shown(*messages: Message) -> Recalled:
    """What a search showed: these messages, as lines of an excerpt."""
    recalled = Recalled()
    lines = tuple(
        Line(SearchHit(m.seq, m.ts, m.role, m.name, m.content, 1.0), hit=True) for m in messages
    )
    recalled.add([Excerpt((), lines, 1.0)])
    return recalled


async def test_only_ids_the_search_showed_are_cited_each_once_in_order(
    repo: MemoryRepository,
) -> None:
    stored = await repo.append(
        CHAT,
        [
            Message(
                role="user", content="I moved to Lisbon.", ts=MARCH, name="Anna", tg_message_id=501
            ),
            Message(role="assistant", content="Congratulations on the move!", ts=MARCH),
            Message(role="user", content="My cat is Tom.", name="Anna", tg_message_id=503),
            Message(role="user", content="Tom hates trains.", name="Anna", tg_message_id=504),
        ],
    )
    recalled = shown(*stored[:3])
    text = "You live in Lisbon [#1][#2]. Your cat is Tom [#3, #1]. He flies [#4]. Odd [#99]."
    clean, citations = await cite(text, recalled, repo, CHAT)
    assert clean == "You live in Lisbon. Your cat is Tom. He flies. Odd."
    # 4 was not shown by this turn's searches (it is stored all the same), 99 not at all.
    assert [c.id for c in citations] == [1, 2, 3]
    first, answer, cat = citations
    assert first == Citation(1, MARCH, "Anna", "I moved to Lisbon.", "user", 501, verbatim=True)
    # The bot's own answer cannot be replied to: no Telegram id.
    assert (answer.author, answer.role, answer.tg_message_id) == ("assistant", "assistant", None)
    assert cat.quote == "My cat is Tom."


async def test_a_voice_message_is_cited_but_its_transcript_is_not_telegrams_text(
    repo: MemoryRepository,
) -> None:
    voice = Message(
        role="user",
        content="I think we should go in May.",
        name="Anna",
        tg_message_id=77,
        attachments=(Attachment(kind="voice", seconds=3.0),),
    )
    stored = await repo.append(CHAT, [voice])
    _, [citation] = await cite("In May [#1].", shown(*stored), repo, CHAT)
    assert citation.tg_message_id == 77 and not citation.verbatim


async def test_at_most_a_few_citations(repo: MemoryRepository) -> None:
    stored = await repo.append(
        CHAT, [Message(role="user", content=f"fact {n}") for n in range(MAX_CITATIONS + 3)]
    )
    text = " ".join(f"Fact {m.seq} [#{m.seq}]." for m in stored)
    clean, citations = await cite(text, shown(*stored), repo, CHAT)
    assert len(citations) == MAX_CITATIONS and "[#" not in clean


# -- a turn -------------------------------------------------------------------------------


@pytest.fixture
async def agent(
    model: ScriptedModel, repo: MemoryRepository, tmp_path: Path
) -> AsyncIterator[Agent]:
    made = Agent(
        model=model,
        repository=repo,
        prompts=PromptBuilder("You are the test assistant."),
        summarizer=Summarizer(model, repo, every=1000, window=2),
        window_size=2,
        tools=ToolExecutor(builtin.subset(("search_history",)), timeout=5),
        tool_mode=make_mode("native"),
        max_tool_steps=3,
        search=HistorySearch(repo, tmp_path / "index"),
        tasks=TaskSupervisor(),
    )
    yield made
    await made.aclose()


async def test_a_streamed_answer_cites_what_its_search_found_and_shows_no_marker(
    agent: Agent, model: ScriptedModel, repo: MemoryRepository
) -> None:
    await repo.append(
        CHAT,
        [
            Message(
                role="user", content="I moved to Lisbon in March.", name="Anna", tg_message_id=9
            ),
            Message(role="assistant", content="Nice!"),
            *(Message(role="user", content=f"chatter {n}") for n in range(6)),
        ],
    )
    model.script(
        tool_call("search_history", query="Lisbon"),
        "You moved to Lisbon in March [#1]. You own a boat [#57].",
    )
    sink = StreamingSink()
    asked = Incoming(conversation=CHAT, text="Where do I live?", user_id=7, name="Anna")
    result = await agent.respond(asked, sink)
    # The model was shown the ids, and told how to cite them.
    results = [m for m in model.chat_requests[1].messages if m["role"] == "tool"]
    assert "[#1] [" in str(results[0]["content"])
    assert (
        "[#12]"
        in next(t for t in model.chat_requests[0].tools if "search" in str(t))["function"][
            "description"
        ]
    )
    assert "".join(sink.deltas) == result.reply == "You moved to Lisbon in March. You own a boat."
    assert not any("[" in d or "#" in d for d in sink.deltas)  # pieces of four characters
    [citation] = result.citations  # 57 was made up: dropped
    assert (citation.id, citation.tg_message_id, citation.quote) == (
        1,
        9,
        "I moved to Lisbon in March.",
    )
    answer = (await repo.tail(CHAT, 1))[0]
    assert (answer.content, answer.citations) == (result.reply, result.citations)


async def test_the_text_beside_a_tool_call_shows_no_marker(
    agent: Agent, model: ScriptedModel, repo: MemoryRepository
) -> None:
    model.script(Reply("Looking again [#3]…", tool_call("search_history", query="boat")), "Done.")
    sink = RecordingSink()
    await agent.respond(Incoming(conversation=CHAT, text="boat?"), sink)
    assert sink.progress_texts == ["Looking again…"]
    assert all("[#" not in m.content for m in await repo.tail(CHAT, 10))


async def test_an_answer_stopped_inside_a_marker_keeps_no_part_of_it(
    agent: Agent, model: ScriptedModel, repo: MemoryRepository
) -> None:
    model.piece_chars = 9  # "Lisbon [#", then the stream waits: the user presses Stop
    model.script(Reply("Lisbon [#1] and then more", midway=asyncio.Event()))
    sink = StoppableSink(stop_after=1)
    result = await agent.respond(Incoming(conversation=CHAT, text="where?"), sink)
    assert sink.deltas == ["Lisbon"]  # the marker begun was held back
    assert result.stopped and result.reply == "Lisbon"
    assert (await repo.tail(CHAT, 1))[0].content == "Lisbon"
