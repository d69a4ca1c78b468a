"""A fact corrected in words brings the summary in line (core/summarizer.py `_correct`, and
the kept facts in every summary request), against the real FakeLLM over HTTP and a real
FileRepository."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from membot.core.facts import FactsDraft
from membot.core.summarizer import FACTS_NOTE, Summarizer
from membot.ids import ConversationId
from membot.llm.client import OpenAIChatModel
from membot.memory import FileRepository, Message
from tests.conftest import API_KEY
from tests.fakes import FakeLLM, Reply

CHAT = ConversationId.telegram(78)


@pytest.fixture
async def model(llm: FakeLLM) -> AsyncIterator[OpenAIChatModel]:
    chat_model = OpenAIChatModel(
        api_key=API_KEY, base_url=llm.base_url, model="test/model", timeout=5.0
    )
    yield chat_model
    await chat_model.close()


@pytest.fixture
def repo(tmp_path: Path) -> FileRepository:
    return FileRepository(tmp_path)


async def summarized(repo: FileRepository, summary: str, *facts: str) -> None:
    """Two stored messages, summarized as `summary`; `facts` kept."""
    await repo.append(
        CHAT,
        [
            Message(role="user", content="I live in Porto", user_id=5, name="Ann"),
            Message(role="assistant", content="Noted."),
        ],
    )
    meta = await repo.get_meta(CHAT)
    assert await repo.save_summary(CHAT, summary, 1, 2, meta.generation)
    for fact in facts:
        await repo.add_fact(CHAT, fact, 100)


def asked(request: dict[str, Any]) -> tuple[str, str]:
    system, user = request["messages"]
    return system["content"], user["content"]


async def test_a_corrected_fact_rewrites_the_summary_keeping_its_coverage(
    llm: FakeLLM, model: OpenAIChatModel, repo: FileRepository, tmp_path: Path
) -> None:
    await summarized(repo, "Ann lives in Porto and likes tea.", "Ann lives in Lisbon")
    llm.script("Ann lives in Lisbon and likes tea.")
    summarizer = Summarizer(model, repo, every=20)
    assert await summarizer.maybe_summarize(CHAT, ["Ann lives in Porto"]) is True
    assert await repo.get_summary(CHAT) == "Ann lives in Lisbon and likes tea."
    [request] = llm.summary_requests
    instructions, content = asked(request)
    assert "no longer true" in instructions
    assert content == (
        "Summary:\nAnn lives in Porto and likes tea.\n\n"
        "No longer true:\n- Ann lives in Porto\n\n"
        "Facts the user keeps:\n- Ann lives in Lisbon"
    )
    meta = json.loads((repo.conversation_dir(CHAT) / "meta.json").read_text())
    assert meta["summarized_upto"] == 2  # what it covers is what it covered


async def test_nothing_to_correct_asks_nothing(
    llm: FakeLLM, model: OpenAIChatModel, repo: FileRepository
) -> None:
    summarizer = Summarizer(model, repo, every=20)
    assert await summarizer.maybe_summarize(CHAT, ["Ann lives in Porto"]) is False  # no summary
    await summarized(repo, "Ann lives in Porto.")
    assert await summarizer.maybe_summarize(CHAT) is False  # nothing corrected
    assert llm.requests == []


async def test_a_failed_correction_leaves_the_summary_as_it_was(
    llm: FakeLLM, model: OpenAIChatModel, repo: FileRepository
) -> None:
    await summarized(repo, "Ann lives in Porto.")
    llm.script(Reply(status=500, error_message="upstream exploded"))
    summarizer = Summarizer(model, repo, every=20)
    assert await summarizer.maybe_summarize(CHAT, ["Ann lives in Porto"]) is False
    assert await repo.get_summary(CHAT) == "Ann lives in Porto."


async def test_every_summary_is_told_the_kept_facts_are_right(
    llm: FakeLLM, model: OpenAIChatModel, repo: FileRepository
) -> None:
    """A summary due anyway is made with the kept facts in view: no correction beside it."""
    await repo.add_fact(CHAT, "Ann lives in Lisbon", 100)
    for n in range(2):
        await repo.append(
            CHAT,
            [
                Message(role="user", content=f"q{n}", name="Ann"),
                Message(role="assistant", content="a"),
            ],
        )
    summarizer = Summarizer(model, repo, every=4)
    assert await summarizer.maybe_summarize(CHAT, ["Ann lives in Porto"]) is True
    [request] = llm.summary_requests
    _, content = asked(request)
    assert content.endswith(f"{FACTS_NOTE}\n- Ann lives in Lisbon")


async def test_a_turn_knows_which_facts_it_dropped_for_good(repo: FileRepository) -> None:
    await repo.add_fact(CHAT, "Ann lives in Porto", 100)
    await repo.add_fact(CHAT, "Ann likes tea", 100)
    draft = FactsDraft(repo, CHAT, 100)
    assert await draft.remove(["Ann lives in Porto"]) == ["Ann lives in Porto"]
    assert await draft.add("Ann lives in Lisbon") is True
    await draft.remove(["Ann likes tea"])
    await draft.add("Ann likes tea")  # taken back in the same turn: not a correction
    await draft.commit()
    assert draft.dropped == ["Ann lives in Porto"]
    assert await repo.get_facts(CHAT) == ["Ann lives in Lisbon", "Ann likes tea"]
