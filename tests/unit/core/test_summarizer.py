"""The Summarizer against the real FakeLLM server (over HTTP, through the real OpenAI client)
and a real FileRepository in a temporary directory; a reset racing a summary is timed with
the in-process scripted model instead."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from membot.core.summarizer import MAX_BLOCK_FACTOR, SUMMARY_TOOL_CHARS, Summarizer
from membot.ids import ConversationId
from membot.llm.client import OpenAIChatModel
from membot.memory import ChatRepository, FileRepository, MemoryRepository, Message
from tests.conftest import API_KEY, StartBot
from tests.fakes import FakeLLM, FakeTelegram, Reply
from tests.scripted import Reply as ScriptedReply
from tests.scripted import ScriptedModel

CHAT_ID = 77
CHAT = ConversationId.telegram(CHAT_ID)


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


def chat_files(repo: FileRepository) -> Path:
    return repo.conversation_dir(CHAT)


async def talk(repo: FileRepository, first: int, last: int) -> None:
    """Store turns first..last: 'question i' from Ann, then 'answer i'."""
    for i in range(first, last + 1):
        await repo.append(
            CHAT,
            [
                Message(role="user", content=f"question {i}", user_id=5, name="Ann"),
                Message(role="assistant", content=f"answer {i}"),
            ],
        )


def prompt(request: dict[str, Any]) -> tuple[str, str]:
    """(instructions, the user message with the previous summary and the new messages)."""
    system, user = request["messages"]
    assert (system["role"], user["role"]) == ("system", "user")
    return system["content"], user["content"]


def log_entries(repo: FileRepository) -> list[dict[str, Any]]:
    path = chat_files(repo) / "summaries.log"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def meta(repo: FileRepository) -> dict[str, Any]:
    return json.loads((chat_files(repo) / "meta.json").read_text())


async def test_not_due_below_summary_every(
    llm: FakeLLM, model: OpenAIChatModel, repo: FileRepository
) -> None:
    summarizer = Summarizer(model, repo, every=6)
    await talk(repo, 1, 2)
    await repo.append(CHAT, [Message(role="user", content="one more")])  # 5 messages
    assert summarizer.due(5, 0) is False
    assert await summarizer.maybe_summarize(CHAT) is False
    assert llm.requests == []
    assert not (chat_files(repo) / "summary.txt").exists()
    assert meta(repo)["summarized_upto"] == 0


async def test_first_summary_at_the_threshold(
    llm: FakeLLM, model: OpenAIChatModel, repo: FileRepository
) -> None:
    summarizer = Summarizer(model, repo, every=4)
    await talk(repo, 1, 2)
    assert summarizer.due(4, 0) is True
    assert await summarizer.maybe_summarize(CHAT) is True

    [request] = llm.requests
    assert request["model"] == "test/model"
    _, content = prompt(request)
    assert content == (
        "Previous summary: none\n\n"
        "New messages:\n"
        "User (Ann): question 1\nAssistant: answer 1\n"
        "User (Ann): question 2\nAssistant: answer 2"
    )
    summary = (chat_files(repo) / "summary.txt").read_text()
    assert summary.startswith("SUMMARY #1: ")
    assert await repo.get_summary(CHAT) == summary
    [entry] = log_entries(repo)
    assert (entry["covers_from"], entry["covers_to"], entry["text"]) == (1, 4, summary)
    assert (meta(repo)["summarized_upto"], meta(repo)["summaries_made"]) == (4, 1)
    # Covered now: not due again until SUMMARY_EVERY new messages.
    assert await summarizer.maybe_summarize(CHAT) is False
    assert len(llm.requests) == 1


async def test_next_summary_merges_the_previous_one_with_only_new_messages(
    llm: FakeLLM, model: OpenAIChatModel, repo: FileRepository
) -> None:
    summarizer = Summarizer(model, repo, every=4)
    await talk(repo, 1, 2)
    first = "Ann asked questions 1 and 2\nand got answers."
    llm.script(first)
    await summarizer.maybe_summarize(CHAT)
    assert await repo.get_summary(CHAT) == first
    await talk(repo, 3, 3)
    assert await summarizer.maybe_summarize(CHAT) is False  # 2 new messages: not yet
    await talk(repo, 4, 4)
    assert await summarizer.maybe_summarize(CHAT) is True

    _, content = prompt(llm.requests[-1])
    previous, new = content.split("\n\nNew messages:\n")
    assert previous == f"Previous summary:\n{first}"
    assert new.splitlines() == [
        "User (Ann): question 3",
        "Assistant: answer 3",
        "User (Ann): question 4",
        "Assistant: answer 4",
    ]
    second = (chat_files(repo) / "summary.txt").read_text()
    assert second.startswith("SUMMARY #2: ") and second != first
    assert [(e["covers_from"], e["covers_to"]) for e in log_entries(repo)] == [(1, 4), (5, 8)]
    assert (meta(repo)["summarized_upto"], meta(repo)["summaries_made"]) == (8, 2)


async def test_llm_failure_changes_nothing_and_the_next_call_succeeds(
    llm: FakeLLM,
    model: OpenAIChatModel,
    repo: FileRepository,
    caplog: pytest.LogCaptureFixture,
) -> None:
    summarizer = Summarizer(model, repo, every=4)
    await talk(repo, 1, 2)
    await summarizer.maybe_summarize(CHAT)
    await talk(repo, 3, 4)
    files = {p.name: p.read_bytes() for p in chat_files(repo).iterdir()}

    llm.script(Reply(status=500, error_message="upstream exploded"))
    with caplog.at_level(logging.ERROR):
        assert await summarizer.maybe_summarize(CHAT) is False
    assert any(r.levelno == logging.ERROR for r in caplog.records)
    assert {p.name: p.read_bytes() for p in chat_files(repo).iterdir()} == files

    assert await summarizer.maybe_summarize(CHAT) is True
    _, content = prompt(llm.requests[-1])
    assert "question 3" in content and "answer 4" in content
    assert [(e["covers_from"], e["covers_to"]) for e in log_entries(repo)] == [(1, 4), (5, 8)]
    assert meta(repo)["summarized_upto"] == 8


@pytest.mark.parametrize("empty", ["", "  \n "])
async def test_an_empty_summary_is_not_saved(
    llm: FakeLLM, model: OpenAIChatModel, repo: FileRepository, empty: str
) -> None:
    summarizer = Summarizer(model, repo, every=4)
    await talk(repo, 1, 2)
    llm.script(Reply(content=empty))
    assert await summarizer.maybe_summarize(CHAT) is False
    assert not (chat_files(repo) / "summary.txt").exists()
    assert log_entries(repo) == []
    assert meta(repo)["summarized_upto"] == 0
    assert await summarizer.maybe_summarize(CHAT) is True  # retried, and now it works
    assert meta(repo)["summarized_upto"] == 4


async def test_a_long_backlog_is_summarized_oldest_first_in_capped_blocks(
    llm: FakeLLM,
    model: OpenAIChatModel,
    repo: FileRepository,
    caplog: pytest.LogCaptureFixture,
) -> None:
    every = 2
    cap = every * MAX_BLOCK_FACTOR
    summarizer = Summarizer(model, repo, every=every)
    turns = cap  # 2 * cap messages waiting, e.g. after a long outage of the model
    await talk(repo, 1, turns)
    with caplog.at_level(logging.WARNING):
        assert await summarizer.maybe_summarize(CHAT) is True
    assert "await a summary" in caplog.text

    _, content = prompt(llm.requests[-1])
    shown = content.split("New messages:\n")[1].splitlines()
    assert len(shown) == cap
    assert shown[0] == "User (Ann): question 1"
    assert shown[-1] == f"Assistant: answer {cap // 2}"
    assert meta(repo)["summarized_upto"] == cap

    # Nothing was skipped: the rest is still due, and the next run merges it in.
    assert await summarizer.maybe_summarize(CHAT) is True
    previous, new = prompt(llm.requests[-1])[1].rsplit("New messages:\n", 1)
    assert "Previous summary:\nSUMMARY #1" in previous
    assert new.splitlines()[0] == f"User (Ann): question {cap // 2 + 1}"
    assert new.splitlines()[-1] == f"Assistant: answer {turns}"
    assert [(e["covers_from"], e["covers_to"]) for e in log_entries(repo)] == [
        (1, cap),
        (cap + 1, 2 * turns),
    ]
    assert meta(repo)["summarized_upto"] == 2 * turns
    assert await summarizer.maybe_summarize(CHAT) is False


async def test_tool_results_are_truncated_in_the_summary_prompt(
    llm: FakeLLM, model: OpenAIChatModel, repo: FileRepository
) -> None:
    summarizer = Summarizer(model, repo, every=4)
    call = {"id": "call_1", "type": "function", "function": {"name": "calc", "arguments": "{}"}}
    result = "R" * SUMMARY_TOOL_CHARS + "TAIL-THE-MODEL-NEVER-SEES"
    await repo.append(
        CHAT,
        [
            Message(role="user", content="what is 6*7?", name="Ann"),
            Message(role="assistant", content="", tool_calls=(call,)),
            Message(role="tool", content=result, tool_call_id="call_1", name="calc"),
            Message(role="assistant", content="It is 42."),
        ],
    )
    assert await summarizer.maybe_summarize(CHAT) is True
    _, content = prompt(llm.requests[-1])
    assert content.split("New messages:\n")[1].splitlines() == [
        "User (Ann): what is 6*7?",
        "Assistant (used tools: calc)",
        "Tool result (data, not the user's words): " + "R" * SUMMARY_TOOL_CHARS,
        "Assistant: It is 42.",
    ]


@pytest.mark.parametrize(
    ("language", "expected"),
    [("German", "German"), ("", "the language of the conversation")],
)
async def test_summary_language_goes_into_the_instructions(
    llm: FakeLLM, model: OpenAIChatModel, repo: FileRepository, language: str, expected: str
) -> None:
    summarizer = Summarizer(model, repo, every=2, language=language)
    await talk(repo, 1, 1)
    await summarizer.maybe_summarize(CHAT)
    instructions, _ = prompt(llm.requests[-1])
    assert f"Write the summary in {expected}." in instructions


async def test_summary_language_setting_reaches_the_running_bot(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot
) -> None:
    # The window keeps the last message out of the summary: two turns make one due.
    await start_bot(summary_every=2, window_size=1, summary_language="Deutsch")
    tg.push_text(CHAT_ID, "hallo")
    await tg.wait_for_messages(CHAT_ID, 1)
    tg.push_text(CHAT_ID, "wie geht's")
    await tg.wait_for_messages(CHAT_ID, 2)
    await llm.wait_until(lambda: len(llm.summary_requests) == 1, what="the summary request")
    instructions, _ = prompt(llm.summary_requests[0])
    assert "Write the summary in Deutsch." in instructions


@pytest.mark.parametrize("backend", ["files", "memory"])
async def test_a_summary_made_across_a_reset_never_reaches_the_new_conversation(
    tmp_path: Path, backend: str
) -> None:
    # The summary is being written by the model when the conversation is reset and begins
    # anew: what comes back describes a conversation that no longer exists.
    repository: ChatRepository = (
        FileRepository(tmp_path) if backend == "files" else MemoryRepository()
    )
    gate = asyncio.Event()
    model = ScriptedModel([ScriptedReply("Ann asked questions 1 and 2.", gate=gate)])
    summarizer = Summarizer(model, repository, every=4)
    for i in (1, 2):
        await repository.append(
            CHAT,
            [Message(role="user", content=f"question {i}"), Message(role="assistant", content="a")],
        )
    summarizing = asyncio.create_task(summarizer.maybe_summarize(CHAT))
    await model.wait_for_requests(1)
    await repository.reset(CHAT)
    for i in (1, 2):
        await repository.append(
            CHAT, [Message(role="user", content=f"new {i}"), Message(role="assistant", content="b")]
        )
    gate.set()
    assert await summarizing is False
    assert await repository.get_summary(CHAT) == ""
    assert (await repository.get_meta(CHAT)).summarized_upto == 0
    # The new conversation gets a summary of its own, made from its own messages only.
    model.script("Ann said new things.")
    assert await summarizer.maybe_summarize(CHAT) is True
    assert "question" not in model.requests[-1].messages[-1]["content"]
    assert await repository.get_summary(CHAT) == "Ann said new things."


async def test_a_file_sent_without_words_is_in_the_summary_as_its_marker() -> None:
    """A photo or a PDF sent with no caption is still something the user said: the
    summarizer reads its marker, never an empty "User:" line."""
    from membot.memory.contract.attachment import Attachment

    model = ScriptedModel([ScriptedReply("summary")])
    repo = MemoryRepository()
    summarizer = Summarizer(model, repo, every=2, window=1)
    cid = ConversationId.telegram(5)
    pdf = Attachment(kind="document", mime="application/pdf", name="lease.pdf", pages=2)
    await repo.append(
        cid,
        [
            Message(role="user", content="", attachments=(pdf,)),
            Message(role="assistant", content="Got the lease."),
            Message(role="user", content="and the deposit?"),
            Message(role="assistant", content="Two months."),
        ],
    )
    await summarizer.maybe_summarize(cid)
    prompt = json.dumps(model.requests[0].messages, ensure_ascii=False)
    assert pdf.marker() in prompt
    assert "User: \\n" not in prompt
