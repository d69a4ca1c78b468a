"""A prompt a provider's prefix cache can serve: the head stays the same from one
summary to the next, the window starts at a summary boundary and only grows until the next
summary, and Anthropic's and Google's models get `cache_control` breakpoints at the end of
both, the others none."""

from __future__ import annotations

from typing import Any

import pytest

from membot.core.agent import Agent
from membot.core.prompt import PromptBuilder
from membot.core.summarizer import Summarizer
from membot.core.tools.builtin import builtin
from membot.core.turn import Incoming
from membot.core.window import WindowPolicy
from membot.ids import ConversationId
from membot.llm.cache import CACHE_MARK, for_wire
from membot.llm.model import ChatMessage
from membot.llm.tools import ToolExecutor, make_mode
from membot.memory import MemoryRepository, Message
from membot.tasks import TaskSupervisor
from tests.scripted import RecordingSink, ScriptedModel, tool_call

CHAT = ConversationId.telegram(4242)
WINDOW, EVERY = 4, 4


def plain(messages: list[ChatMessage]) -> list[ChatMessage]:
    return [{k: v for k, v in m.items() if k != CACHE_MARK} for m in messages]


def texts(messages: list[ChatMessage]) -> list[str]:
    return [str(m.get("content")) for m in messages]


def no_language(text: str) -> None:
    """Detection has its own tests."""


async def test_heads_are_identical_and_windows_only_grow_between_summaries() -> None:
    model, repo = ScriptedModel(), MemoryRepository()
    registry = builtin.subset(("calculate", "current_datetime"))
    agent = Agent(
        model=model,
        repository=repo,
        prompts=PromptBuilder("You are the test assistant."),
        summarizer=Summarizer(model, repo, every=EVERY, window=WINDOW),
        window_size=WINDOW,
        tools=ToolExecutor(registry, timeout=5),
        tool_mode=make_mode("native"),
        tasks=TaskSupervisor(),
        detect=no_language,
    )
    summaries = 0
    uptos: list[int] = []
    shown: list[str] = []  # the summary each turn started from
    for turn in range(1, 16):
        if turn == 5:  # a tool exchange in the middle: a window never starts inside it
            model.script(tool_call("calculate", expression="6*7"), "It is 42.")
        else:
            model.script(f"answer {turn}")
        uptos.append((await repo.get_meta(CHAT)).summarized_upto)
        shown.append(await repo.get_summary(CHAT))
        await agent.respond(
            Incoming(conversation=CHAT, text=f"question {turn}", user_id=7), RecordingSink()
        )
        if len(agent.tasks):  # the summary it started: its reply, then let it land
            summaries += 1
            model.script(f"summary {summaries}")
            await agent.tasks.join()
    await agent.aclose()
    assert summaries >= 3
    first_calls = [r for r in model.chat_requests if r.messages[-1]["role"] == "user"]
    assert len(first_calls) == 15  # one per turn, the tool step's second call aside
    stored = [m async for m in repo.iter_messages(CHAT)]
    for n, request in enumerate(first_calls):
        upto = uptos[n]
        window = plain(request.messages[1:-1])
        # The window is every message after the summary: no overlap, nothing lost.
        after = [m for m in stored if upto < m.seq <= 2 * n + (2 if n >= 5 else 0)]
        assert texts(window) == [m.content for m in after]
        assert after == [] or after[0].role != "tool"
        if 2 * n >= WINDOW:
            assert WINDOW <= len(window) < WINDOW + EVERY + 2  # + the tool exchange's two
        assert shown[n] in request.system
        # The first turn's head says there is no history yet; from the second on it holds.
        if n >= 2 and uptos[n - 1] == upto:
            before = first_calls[n - 1]
            # Same summary: the head is the same bytes and the old window is a prefix.
            assert request.messages[0] == before.messages[0]
            assert plain(request.messages[: len(before.messages) - 1]) == plain(
                before.messages[:-1]
            )
            assert request.tools == before.tools
    # The last WINDOW messages are always there.
    last = plain(first_calls[-1].messages[1:-1])
    assert texts(last)[-WINDOW:] == [m.content for m in stored[:-2][-WINDOW:]]


def msg(seq: int, role: str = "user") -> Message:
    extra: dict[str, Any] = {}
    if role == "tool":
        extra = {"tool_call_id": "c"}
    return Message(role=role, content=f"m{seq}", seq=seq, **extra)  # type: ignore[arg-type]


@pytest.mark.parametrize("total", range(0, 60))
def test_the_window_holds_at_least_size_and_fewer_than_size_plus_every(total: int) -> None:
    policy = WindowPolicy(20, 10)
    upto = 0
    history = [msg(s, "user" if s % 2 else "assistant") for s in range(1, total + 1)]
    for seen in range(1, total + 1):
        if policy.due(seen, upto):
            upto = policy.boundary(upto, seen, history[:seen])
    window = policy.window(upto, history)
    assert [m.seq for m in window] == list(range(upto + 1, total + 1))
    if total >= 20:
        assert 20 <= len(window) < 30
    else:
        assert len(window) == total


def test_a_boundary_never_leaves_a_tool_result_first() -> None:
    policy = WindowPolicy(4, 4)
    roles = ["user", "assistant", "user", "assistant", "tool", "tool", "assistant", "user"]
    history = [msg(s, role) for s, role in enumerate(roles + ["assistant"] * 2, 1)]
    # Aligned, the boundary would be 4: messages 5 and 6 are the results of message 4's calls.
    assert policy.boundary(0, 10, history) == 3
    # While that summary is not made yet, the window already starts where it will end.
    assert [m.seq for m in policy.window(0, history)] == list(range(4, 11))


HEAD: ChatMessage = {"role": "system", "content": "head", CACHE_MARK: True}
WINDOW_END: ChatMessage = {"role": "assistant", "content": "old answer", CACHE_MARK: True}
NEW: ChatMessage = {"role": "user", "content": "new"}


@pytest.mark.parametrize("model", ["anthropic/claude-sonnet-4.5", "google/gemini-2.5-pro"])
def test_breakpoints_for_models_that_need_them(model: str) -> None:
    wire = for_wire(model, [HEAD, {"role": "user", "content": "q"}, WINDOW_END, NEW])
    marked = [m for m in wire if "cache_control" in str(m)]
    assert [m["role"] for m in marked] == ["system", "assistant"]
    assert wire[0]["content"] == [
        {"type": "text", "text": "head", "cache_control": {"type": "ephemeral"}}
    ]
    assert wire[2]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert wire[1] == {"role": "user", "content": "q"} and wire[3] == NEW
    assert all(CACHE_MARK not in m for m in wire)


@pytest.mark.parametrize("model", ["openai/gpt-5", "deepseek/deepseek-chat", "bench/model"])
def test_no_breakpoints_for_the_others(model: str) -> None:
    wire = for_wire(model, [HEAD, WINDOW_END, NEW])
    assert wire == [
        {"role": "system", "content": "head"},
        {"role": "assistant", "content": "old answer"},
        NEW,
    ]
