"""The window around imported stretches: counted and read as if nothing were imported."""

from __future__ import annotations

from dataclasses import replace

from membot.core.imported import Spans, own_messages, window_of
from membot.core.window import WindowPolicy
from membot.ids import ConversationId
from membot.memory import MemoryRepository, Message

CID = ConversationId.telegram(77)


def test_spans_count_and_number_the_chats_own_messages() -> None:
    spans = Spans(((5, 7), (10, 12)))
    assert spans.count(0, 12) == 6 and spans.count(6, 11) == 3
    assert spans.own_seq(4) == 4 and spans.own_seq(8) == 5 and spans.own_seq(13) == 7
    assert spans.own_stretches(0, None) == [(1, 4), (8, 9), (13, None)]
    assert spans.own_stretches(6, 11) == [(8, 9)]
    assert Spans().own_stretches(3, None) == [(4, None)]


async def _chat(own_before: int, imported: int, own_after: int) -> MemoryRepository:
    repo = MemoryRepository()
    await repo.append(CID, [Message("user", f"own {n}") for n in range(own_before)])
    meta = await repo.get_meta(CID)
    span = (own_before + 1, own_before + imported)
    batch = [Message("user", f"imported {n}", origin=f"chatgpt:c:{n}") for n in range(imported)]
    await repo.append(CID, batch, state=replace(meta.state, imported=(span,)))
    after = [Message("user", f"own {own_before + n}") for n in range(own_after)]
    if after:
        await repo.append(CID, after)
    return repo


async def test_the_window_is_the_chats_own_last_messages_when_an_import_fills_the_tail() -> None:
    repo = await _chat(own_before=6, imported=500, own_after=2)
    policy = WindowPolicy(size=4, every=4)
    ctx = await repo.context(CID, policy.read)
    window = await window_of(repo, policy, ctx)
    # 8 own messages, a summary due (4 + 4): the window keeps the last 4, none imported.
    assert [m.content for m in window] == ["own 4", "own 5", "own 6", "own 7"]


async def test_own_messages_step_over_the_import() -> None:
    repo = await _chat(own_before=3, imported=50, own_after=2)
    got = [m.content async for m in own_messages(repo, CID, 1, Spans(((4, 53),)))]
    assert got == ["own 1", "own 2", "own 3", "own 4"]
