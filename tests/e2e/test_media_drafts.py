"""End to end: turns that bring files stream like text turns (STREAMING): the real bot, the
fake Bot API (getFile, downloads of real files, recorded drafts), the fake LLM transcribing
and streaming with pacing.

A voice in a private chat: the first draft shows what was heard, quoted as the answer quotes
it, while the model has not written a word; then the answer grows under the quote; the
message that replaces the drafts is the quote and the stored answer. A document streams too.
A group's voice gets one message and no drafts."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.conftest import StartBot
from tests.e2e.helpers import stored
from tests.e2e.test_drafts import ANSWER, FAST, QUICK_WRITING, WRITING, assert_paced
from tests.fakes import FakeLLM, FakeTelegram, Reply, media_files

CHAT = 4343
GROUP = -4344
HEARD = "Plan my week, please."
QUOTE = {"type": "blockquote", "offset": 0, "length": len(HEARD)}


async def test_a_voice_drafts_the_transcript_first_then_the_growing_answer(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    await start_bot(drafts=FAST)
    llm.script_transcription(HEARD)
    llm.script(Reply(content=ANSWER, pacing=QUICK_WRITING))
    llm.gate = asyncio.Event()  # the model's answer waits until the first draft was seen
    tg.push_voice(CHAT, data=media_files.ogg_voice(2.0), duration=2)
    await tg.wait_until(lambda: bool(tg.drafts_to(CHAT)), what="the first draft")
    # The transcript is shown before the model has written anything: its call is held.
    await llm.wait_for_in_flight(1)
    [first] = tg.drafts_to(CHAT)
    assert (first.text, first.entities) == (HEARD, [QUOTE])
    assert tg.messages_to(CHAT) == []
    llm.gate.set()
    [final] = await tg.wait_for_messages(CHAT, 1)
    quote, answer = final.text.split("\n\n", 1)
    assert quote == HEARD and answer.startswith("Plan: step0")
    drafts = tg.drafts_to(CHAT)
    later = drafts[1:]
    assert later, [d.text for d in drafts]
    # Each later draft is the quote, then more of the answer, rendered as the message is.
    for draft in later:
        head, grown = draft.text.split("\n\n", 1)
        assert head == HEARD and answer.startswith(grown.rstrip())
        assert draft.entities[0] == QUOTE
    lengths = [len(d.text) for d in drafts]
    # The last draft may show the whole answer when the model finished before the message
    # went out (a loaded machine); never more than the message.
    assert lengths == sorted(lengths) and lengths[-1] <= len(final.text)
    assert len({d.draft_id for d in drafts}) == 1 and all(d.at < final.at for d in drafts)
    assert_paced(drafts, FAST)
    [user, assistant] = stored(data_dir, CHAT)
    assert (user["content"], assistant["content"]) == (HEARD, ANSWER)
    assert llm.streams == 1


async def test_a_document_streams_like_text(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    await start_bot(drafts=FAST)
    llm.script(Reply(content=ANSWER, pacing=QUICK_WRITING))
    tg.push_document(CHAT, b"a,b\n1,2\n", file_name="t.csv", mime_type="text/csv")
    [final] = await tg.wait_for_messages(CHAT, 1)
    drafts = tg.drafts_to(CHAT)
    assert drafts and all(final.text.startswith(d.text.rstrip()) for d in drafts)
    assert final.text.startswith("Plan: step0") and llm.streams == 1
    assert stored(data_dir, CHAT)[-1]["content"] == ANSWER


async def test_a_voice_in_a_group_gets_one_message_and_no_drafts(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    await start_bot()
    llm.script_transcription(HEARD)
    llm.script(Reply(content=ANSWER, pacing=WRITING))
    tg.push_voice(GROUP, data=media_files.ogg_voice(1.0), duration=1, reply_to_bot=True)
    [final] = await tg.wait_for_messages(GROUP, 1)
    assert final.text.startswith(f"{HEARD}\n\nPlan: step0")
    assert tg.drafts == [] and tg.call_count("sendMessageDraft") == 0 and llm.streams == 0
    assert stored(data_dir, GROUP)[-1]["content"] == ANSWER
